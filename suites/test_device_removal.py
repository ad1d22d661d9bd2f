"""A siw device's netdev deleted while the device is in use: the removal waits for its users.

On the active host: a veth with a siw device on it, a cm_id listening on its address,
`rdma link show` port queries running, and a connection on the pair's own device; the
veth is deleted, only once a query listed the device, the id is bound (a listen refused
ENODEV is tried again) and a query that began after the bind ended.  The removal waits
for the device's user (the bound id and the verbs context librdmacm opened: siw cannot
disassociate one) until its process exits after 1 s, the device goes, a query ran
across the removal, and the pair's connection closes orderly afterwards
(hil/cm/regressions/device.py says how each step is made and seen).  A run in which one
of them did not happen fails "scenario not reached" or "window not reached" (a query
across the removal); the contract judges the timeline.

It was written for "RDMA/siw: Remove direct link to net_device" (16b87037b488, syzbot
4b87489410b4efd181bf) but cannot reach that bug: no user-space port query reaches
siw_query_port once the core may let go of the netdev (docs/notes/regression-corpus.md,
"the test's window is not the bug's"); test_regressions.py's
``test_siw_16b87037b488_...`` does, on its widened kernels.  On the 6.1 debug lab,
which lacks the fix, a KASAN report in siw_query_port is the known finding
``siw-netdev-query-port-uaf`` (suites/known-kernel-findings.yaml).
"""

from __future__ import annotations

import pytest

from hil.cm.regressions import device
from hil.cm.regressions.evidence import missing
from hil.cm.session import CMSession
from hil.plugin.api import Contract, explain

pytestmark = pytest.mark.parametrize("direction", ["a-b"])


def test_a_siw_netdev_deleted_under_port_queries_and_a_bound_id_waits_for_its_users(
    cm: CMSession, contract: Contract
) -> None:
    tl = cm.run(device.regress_siw_netdev_removed)
    contract(tl)
    gap = missing(tl)
    if gap is not None:
        pytest.fail(explain(tl, gap), pytrace=False)
