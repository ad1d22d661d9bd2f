"""irdma's RDMA device on a host: the PCI function under it, and whether it runs iWARP.

irdma (Intel E810 through ``ice``, X722 through ``i40e``) registers one RDMA
device per PCI function, in iWARP or in RoCEv2 mode, chosen by ``ice`` when
it plugs the auxiliary device irdma binds (ice_idc.c ``ice_plug_aux_dev``:
``ice.iwarp.N`` or ``ice.roce.N``).  hil tests iWARP only, so a device in
RoCE mode is refused with the commands that switch it; hil switches it only
at pair setup when the link pins it (``devlink_params``,
:mod:`hil.host.devlinkparams`): it unplugs the RDMA device, and every QP on it.
Linux 6.1 and 6.12 sources throughout.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from hil import tools
from hil.errors import RemoteError
from hil.host.rdmadev import READ_TIMEOUT, SYSFS_IB, read_file

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.agent.agent import Runner

IRDMA = "irdma"
# core sysfs.c node_type_show prints "%u: %s": irdma's verbs.c sets
# RDMA_NODE_RNIC (4) in irdma_init_iw_device, RDMA_NODE_IB_CA (1) in
# irdma_init_roce_device.
IWARP_NODE_TYPE = "4: RNIC"
ROCE_NODE_TYPE = "1: CA"


def pci_function(agent: Runner, host: str, device: str) -> str:
    """The PCI function under RDMA device ``device`` (``0000:17:00.0``): irdma's parent.

    verbs.c ``irdma_init_rdma_device`` sets ``ibdev.dev.parent = &pcidev->dev``.
    """
    link = posixpath.join(SYSFS_IB, device, "device")
    r = agent.run(tools.argv("readlink", "-f", link), timeout=READ_TIMEOUT)
    if r.status != 0 or not r.stdout.strip():
        raise RemoteError(host, f"cannot tell the PCI function under {device} ({r.why()})")
    return posixpath.basename(r.stdout.strip())


def switch_to_iwarp(bdf: str) -> str:
    """The commands that switch the E810 function ``bdf`` from RoCEv2 to iWARP.

    ``enable_roce`` first: ice's ``ice_devlink_enable_iw_validate`` refuses
    iWARP while RoCEv2 is on (the two are exclusive), and the parameters are
    runtime only (``DEVLINK_PARAM_CMODE_RUNTIME``), so a reboot or a reload of
    ice brings RoCEv2 back (``ice_init_rdma`` starts in RoCEv2).
    """
    handle = f"pci/{bdf}"
    return (
        f"devlink dev param set {handle} name enable_roce value false cmode runtime; "
        f"devlink dev param set {handle} name enable_iwarp value true cmode runtime"
    )


def roce_refusal(agent: Agent, host: str, device: str) -> str:
    """Why ``device`` cannot be tested, with the fix, when it runs RoCE; "" when iWARP."""
    node_type = read_file(agent, host, posixpath.join(SYSFS_IB, device, "node_type"))
    if node_type == IWARP_NODE_TYPE:
        return ""
    bdf = pci_function(agent, host, device)
    mode = "RoCEv2" if node_type == ROCE_NODE_TYPE else "not iWARP"
    return (
        f"{device} on {host} runs {mode} (node_type {node_type!r}, not {IWARP_NODE_TYPE!r}); "
        f"hil tests iWARP: switch {bdf} to iWARP ({switch_to_iwarp(bdf)}), or pin it in the link "
        "(devlink_params: {enable_roce: false, enable_iwarp: true}) for pair setup to switch it"
    )
