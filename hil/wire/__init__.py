"""The wire judge: each test's packets, decoded by Wireshark's iWARP dissectors,
held against the CM timeline.

- :mod:`hil.wire.model`: packets and connections as data;
- :mod:`hil.wire.tshark`: runs tshark (version, timeout, the fields read);
- :mod:`hil.wire.decode`: capture files to an :class:`~hil.wire.model.Exchange`;
  its packets grouped into connections by :mod:`hil.wire.tcpconn`; what tshark's
  reading needs mended in :mod:`hil.wire.realign`, :mod:`hil.wire.corrupted` and
  :mod:`hil.wire.reused`;
- :mod:`hil.wire.render`: an exchange as text (packets, and a ladder of those that matter);
- :mod:`hil.wire.clock`: capture timestamps onto the timeline's time base;
- :mod:`hil.wire.plan`: a link's capture points, and whether they see its provider's packets;
- :mod:`hil.wire.capture`: tcpdump on one host's netdev, bounded;
  :mod:`hil.wire.command`: a vendor's capture tool, through the inventory's templates;
- :mod:`hil.wire.linkcapture`: every capture point of a link, for one test;
- :mod:`hil.wire.link`: which wire connection is which connect of a timeline;
- :mod:`hil.wire.rule`, :mod:`hil.wire.rules`: what a wire rule is; the rules, by name,
  with registration; the checks themselves in :mod:`hil.wire.mpa_rules`,
  :mod:`hil.wire.close_rules`, :mod:`hil.wire.pull_rules`, :mod:`hil.wire.cause_rules`;
- :mod:`hil.wire.judge`: an exchange and timelines to a wire verdict.
"""
