"""The reference peer: a pure-Python iWARP endpoint over a plain TCP socket (issue 26).

It speaks MPA (RFC 5044, with the enhanced connection setup of RFC 6581),
DDP (RFC 5041) and RDMAP (RFC 5040) itself, so it can test any RNIC's
protocol handling from the wire: it needs no RDMA hardware.  It runs inside
the agent on a lab host, so it is standard library only (python >= 3.9).

Modules, bottom up:

- ``crc32c``: the CRC32c of MPA (RFC 3385 / RFC 3720 B.4);
- (in ``protocol/``, since the controller reads them too: ``frames``, frames as
  JSON-able dicts, field overrides, ``FrameError``; ``mpa``, MPA request and reply
  frames and the v2 IRD/ORD words, RFC 5044 7.1, RFC 6581 5);
- ``fpdu``: MPA framing of an FPDU: ULPDU_Length, pad, CRC (RFC 5044 4);
- ``ddp``: DDP tagged and untagged headers (RFC 5041 4);
- ``rdmap``: RDMAP messages (SEND, WRITE, READ request/response, TERMINATE,
  RFC 5040 4), a whole FPDU encoded and decoded;
- ``endpoint``: the TCP connection (active or passive), the FPDU reader, the
  segmenting writer and the record of every frame;
- ``scenario``: the interpreter of a scenario's steps, in segments between
  the DUT's steps;
- ``op``: the agent methods (``peer_run``, ``peer_resume``, ``peer_close``).

docs/peer.md describes the record and how to run the peer.
"""
