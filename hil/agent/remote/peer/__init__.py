"""The reference peer: a pure-Python iWARP endpoint over a plain TCP socket (issue 26).

It speaks MPA (RFC 5044, with the enhanced connection setup of RFC 6581),
DDP (RFC 5041) and RDMAP (RFC 5040) itself, so it can test any RNIC's
protocol handling from the wire: it needs no RDMA hardware.  It runs inside
the agent on a lab host, so it is standard library only (python >= 3.9).

Modules, bottom up (the frame codec is in ``protocol/``, since the controller
reads frames too: ``frames``, ``mpa``, ``crc32c``, ``fpdu``, ``ddp``, ``rdmap``):

- ``endpoint``: the TCP connection (active or passive), the FPDU reader, the
  segmenting writer and the record of every frame;
- ``scenario``: the interpreter of a scenario's steps, in segments between
  the DUT's steps;
- ``op``: the agent methods (``peer_run``, ``peer_resume``, ``peer_close``).

docs/peer.md describes the record and how to run the peer.
"""
