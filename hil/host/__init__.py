"""Host control: what hil does on and reads from the hosts of a reserved pair.

- :mod:`hil.host.evidence`: the RDMA resource baseline, the settle wait and
  the kernel-log cursor, before and after a test or a CM run.
"""
