"""The debug lab (``hil lab up --debug``): its checkers run, and their reports fail a test.

On two guests of the debug kernel (KASAN, kmemleak, lockdep, debug objects;
hil/lab/debug.config), booted by this module:

- kmemleak runs and a scan of a guest's whole memory completes (its time printed);
- a reference count decremented to zero and a read after free, provoked in a
  guest's kernel through lkdtm, each reach the kernel log as their checker's
  report, and the after-test check (hil.host.evidence, the pytest plugin's
  own) fails on them with the report's lines.

Not in .ci/run (kernel_labs.py): ~1-2 min of boot and a few seconds of tests.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kernel_labs import cached_image
from vlab import VirtualLab, booted_lab

from hil import tools
from hil.host import evidence, kmemleak
from hil.host.hosts import Hosts
from hil.judge.profiles import pair_profile, siw_profile

pytestmark = [pytest.mark.lab, pytest.mark.timeout(3600)]

PROVOKE = "/sys/kernel/debug/provoke-crash/DIRECT"


@pytest.fixture(scope="module")
def debug_lab(pytestconfig: pytest.Config) -> Iterator[VirtualLab]:
    with booted_lab(pytestconfig, cached_image(None, debug=True)) as lab:
        yield lab


@pytest.fixture(scope="module")
def hosts(debug_lab: VirtualLab) -> Iterator[Hosts]:
    with Hosts(debug_lab.inventory) as h:
        yield h


def test_kmemleak_runs_and_scans_a_guest(debug_lab: VirtualLab, hosts: Hosts) -> None:
    for host in debug_lab.pair.hosts:
        agent = hosts.agent(host.name)
        assert kmemleak.available(agent), f"{host.name}: no {kmemleak.PATH}"
        kmemleak.clear(agent, host.name)
        started = time.monotonic()
        report = kmemleak.scan(agent, host.name, since=started - kmemleak.MIN_AGE_S)
        print(f"{host.name}: kmemleak scan {time.monotonic() - started:.1f} s, report {report!r}")


@pytest.mark.parametrize(
    "provoke, report",
    [
        ("REFCOUNT_DEC_ZERO", "refcount_t: decrement hit 0"),
        # Last: KASAN reports once per boot and turns lockdep off after it.
        ("READ_AFTER_FREE", "use-after-free in lkdtm_READ_AFTER_FREE"),
    ],
)
def test_a_checkers_report_fails_the_after_test_check(
    debug_lab: VirtualLab, hosts: Hosts, provoke: str, report: str
) -> None:
    a, b = (h.name for h in debug_lab.pair.hosts)
    probes = {name: hosts.agent(name) for name in (a, b)}
    baseline = evidence.begin(probes)
    out = hosts.agent(b).run(tools.argv("tee", PROVOKE), timeout=120, input=provoke)
    assert out.status == 0, f"{b}: lkdtm {provoke}: {out.stderr}"
    profile = pair_profile(((a, siw_profile()), (b, siw_profile())))
    result = evidence.finish(probes, baseline, profile, settle_s=1.0)
    text = result.to_text()
    assert not result.ok, f"lkdtm {provoke} left no failing line:\n{text}"
    assert report in text, text
    assert "kernel-log-clean" in text, text
