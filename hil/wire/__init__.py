"""The wire judge: each test's packets, decoded by Wireshark's iWARP dissectors,
held against the CM timeline.

- :mod:`hil.wire.model`: packets and connections as data;
- :mod:`hil.wire.decode`: a capture file to an :class:`~hil.wire.model.Exchange` (tshark);
- :mod:`hil.wire.clock`: capture timestamps onto the timeline's time base;
- :mod:`hil.wire.capture`: tcpdump (or a vendor tool) at each capture point of a link;
- :mod:`hil.wire.rules`: the wire rules, by name, with registration;
- :mod:`hil.wire.judge`: an exchange and timelines to a wire verdict.
"""
