"""The virtual lab: QEMU guests with soft-iWARP, reached over SSH like lab hosts.

Public entry points (see docs/virtual-lab.md):

- ``hil.lab.control``: ``up(dir, hosts, memory, accel_mode)``, ``down(dir)``,
  ``status(dir)``, ``inventory_path(dir)``, ``restart_guest(dir, name)``,
  ``stop_guest(dir, name)``;
- ``hil.lab.kernel``: ``ensure_kernel(rebuild)``, ``cached_kernel()``;
- ``hil.lab.qmp``: ``set_link(qmp_path, netdev_id, up, timeout)`` (the
  ``carrier`` link pull), ``quit_qemu``, ``QMPClient``;
- ``hil.lab.state.default_dir()``: where ``hil lab`` keeps its lab.

Modules: ``kernel`` (a kernel cached, or built: ``kernelkey`` says which
kernel is which and where it is cached, ``kernelmake`` runs the build's
steps), ``network`` (wiring, MACs, ports), ``bootfiles`` and
``guest_boot.sh`` (what a guest boots with), ``guests`` (start/stop vng and
QEMU; its command line in ``guestcmd``, its process group in ``procgroup``,
the machine's ports and SSH banners in ``localports``), ``accel`` (KVM
probe), ``readiness`` (SSH-ready), ``inventory`` (the lab's inventory
file), ``state`` (the lab dir's state file and stale detection),
``control`` (up/down/status: the directory's lock and files in ``labdir``,
the guests' boot in ``labboot``), ``restart`` (a guest started again or
stopped), ``carrier`` and ``power`` (the carrier pull and the ``qmp`` power
mode host control uses).
"""
