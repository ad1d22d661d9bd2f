"""Per-test evidence for the report: ``rdma resource`` counts and the kernel log of both hosts.

Independent of the suites' after-test checks (which judge the same data):
this only records it, through the public calls of :mod:`hil.checks`, so that
every test on the pair carries it, passed or failed.  Taking it never fails a
test; a host that cannot give it is noted in the report instead.

    ev = Evidence.begin(hosts, pair)
    ...                                  # the test
    ev.attach()
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from hil import checks
from hil.errors import HilError
from hil.report import attach

if TYPE_CHECKING:
    from hil.hosts import Hosts
    from hil.inventory.model import Pair

log = logging.getLogger(__name__)


class Evidence:
    """A baseline taken before a test; ``attach()`` reads the after-state and attaches both."""

    def __init__(self, probes: Mapping[str, checks.Probe], baseline: checks.Baseline) -> None:
        self.probes = probes
        self.baseline = baseline

    @classmethod
    def begin(cls, hosts: Hosts, pair: Pair) -> Evidence | None:
        """Counts and kernel-log cursors of both hosts now; None (noted) when a host fails."""
        try:
            probes = {h.name: hosts.agent(h.name) for h in pair.hosts}
            return cls(probes, checks.begin(probes))
        except HilError as e:
            log.warning("no per-test evidence: %s", e)
            attach.note("evidence not taken", str(e))
            return None

    def attach(self) -> None:
        """Attach the counts before/after and the kernel lines logged since ``begin``."""
        try:
            # settle_s=0: record the state as the test left it; waiting is the checks' job.
            counts, _ = checks.wait_back_to_baseline(self.probes, self.baseline, settle_s=0)
            lines, lost = checks.read_kernel_log(self.probes, self.baseline)
        except HilError as e:
            log.warning("per-test evidence lost: %s", e)
            attach.note("evidence lost", str(e))
            return
        before: dict[str, dict[str, int]] = {}
        after: dict[str, dict[str, int]] = {}
        for r in counts:
            before.setdefault(r.host, {})[r.kind] = r.before
            after.setdefault(r.host, {})[r.kind] = r.after
        attach.attach_resources(before, after)
        dropped = [f"{host}: {n} kernel log records were overwritten before they were read"
                   for host, n in lost.items() if n]
        attach.attach_kernel_log([*lines, *dropped])
