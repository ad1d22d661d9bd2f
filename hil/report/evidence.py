"""Per-test evidence for the report: ``rdma resource`` counts and the kernel log of both hosts.

Independent of the after-test checks (which judge the same data): this only
records it, through :mod:`hil.host.evidence` with ``settle_s=0`` (the state
as the test left it; waiting is the checks' job), so that every test on the
pair carries it, passed or failed.  Taking it never fails a test; a host
that cannot give it is noted in the report instead.

    ev = Evidence.begin(hosts, pair)
    ...                                  # the test
    ev.attach()
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from hil.errors import HilError
from hil.host import evidence
from hil.report import attach

if TYPE_CHECKING:
    from hil.host.hosts import Hosts
    from hil.inventory.model import Pair

log = logging.getLogger(__name__)


class Evidence:
    """A baseline taken before a test; ``attach()`` reads the after-state and attaches both."""

    def __init__(self, probes: Mapping[str, evidence.Probe], baseline: evidence.Baseline) -> None:
        self.probes = probes
        self.baseline = baseline

    @classmethod
    def begin(cls, hosts: Hosts, pair: Pair) -> Evidence | None:
        """Counts and kernel-log cursors of both hosts now; None (noted) when a host fails."""
        try:
            probes = {h.name: hosts.agent(h.name) for h in pair.hosts}
            return cls(probes, evidence.begin(probes))
        except HilError as e:
            log.warning("no per-test evidence: %s", e)
            attach.note("evidence not taken", str(e))
            return None

    def attach(self) -> None:
        """Attach the counts before/after and the kernel lines logged since ``begin``."""
        try:
            after = evidence.collect(self.probes, self.baseline, settle_s=0)
        except HilError as e:
            log.warning("per-test evidence lost: %s", e)
            attach.note("evidence lost", str(e))
            return
        attach.attach_resource_counts(after.resources)
        dropped = [
            f"{host}: {n} kernel log records were overwritten before they were read"
            for host, n in after.lost.items()
            if n
        ]
        attach.attach_kernel_log([*after.kernel_log, *dropped])
