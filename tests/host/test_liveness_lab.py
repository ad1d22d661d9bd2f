"""The liveness watch on the session's virtual lab: real agents, real kernel logs, real QMP.

- an Oops line in a guest's real kernel log (written to /dev/kmsg, which the
  agent's cursor reads like any other record) is a kernel crash, seen within
  a probe or two, with the lines before it;
- a guest frozen with QMP ``stop`` is silent to its agent and SSH: it is
  declared unreachable within the bound, and answers a fresh probe again
  once it runs (``cont``).  Neither needs the guest restarted: cheap.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from vlab import VirtualLab

from hil.host.hosts import Hosts
from hil.host.liveness import Crash, Watch
from hil.lab.qmp import QMPClient

pytestmark = pytest.mark.lab

BOUND = 6.0
# Priority 2 (critical) like a real oops; the text says who wrote it.
OOPS = "<2>hil test_liveness_lab: Oops: 0002 [#1] written to /dev/kmsg by the test\n"


@pytest.fixture
def hosts(virtual_lab: VirtualLab) -> Iterator[Hosts]:
    with Hosts(virtual_lab.inventory) as h:
        yield h


def names(lab: VirtualLab) -> list[str]:
    return [h.name for h in lab.pair.hosts]


def wait_for(crashes: list[Crash], within: float) -> float:
    start = time.monotonic()
    while not crashes and time.monotonic() - start < within:
        time.sleep(0.05)
    return time.monotonic() - start


def test_an_oops_in_a_guests_kernel_log_is_a_kernel_crash(
    virtual_lab: VirtualLab, hosts: Hosts
) -> None:
    a, b = names(virtual_lab)
    crashes: list[Crash] = []
    watch = Watch(hosts, [a, b], crashes.append, bound=BOUND, interval=0.5).start()
    try:
        hosts.session(b).run(["tee", "/dev/kmsg"], input=OOPS, timeout=20)
        took = wait_for(crashes, BOUND)
    finally:
        watch.stop()
    assert crashes, "the Oops line was not seen"
    (crash,) = crashes
    assert (crash.host, crash.kind) == (b, "kernel_crash")
    assert crash.detail == OOPS[3:].strip()
    assert crash.lines[-1] == OOPS[3:].strip()
    assert took < 3.0


def test_a_guest_frozen_past_the_bound_is_unreachable_and_answers_once_continued(
    virtual_lab: VirtualLab, hosts: Hosts
) -> None:
    a, b = names(virtual_lab)
    qmp = next(g.qmp for g in virtual_lab.state.guests if g.name == a)
    crashes: list[Crash] = []
    watch = Watch(hosts, [a, b], crashes.append, bound=BOUND, interval=0.5).start()
    with QMPClient(qmp) as monitor:
        monitor.execute("stop")
        try:
            took = wait_for(crashes, BOUND * 3)
        finally:
            monitor.execute("cont")
    watch.stop()
    assert crashes, f"{a} frozen for {BOUND * 3:g} s was not declared"
    (crash,) = crashes
    assert (crash.host, crash.kind) == (a, "unreachable")
    assert f"(liveness bound {BOUND:g} s)" in crash.detail
    # Declared after the bound from its last answer (up to a probe's interval before the
    # stop), and not much later: the monitor does not wait for the blocked probe.
    assert BOUND - 1.0 <= took <= BOUND + 2.0
    # Running again, it answers a fresh watch's probe.
    again = Watch(hosts, [a, b], crashes.append, bound=BOUND * 4, interval=0.5).start()
    try:
        assert again.confirm() is None
    finally:
        again.stop()
    assert len(crashes) == 1
