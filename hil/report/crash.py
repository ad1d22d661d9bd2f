"""A host that crashed under a test, as the report shows it: its last kernel log lines.

The test's :class:`~hil.run.testrun.TestRun` holds the crash
(:class:`~hil.host.liveness.Crash`); the report's observer
(:mod:`hil.report.testobserver`) attaches the host's last kernel log lines
when the test finishes.  A test failed this way has the message
``hil: HostCrashed: HOST: host crashed (...) during TEST: ...``
(:meth:`Crash.message <hil.host.liveness.Crash.message>`), the category
**Host crashed** (:mod:`hil.report.categories`).
"""

from __future__ import annotations

from hil.host.liveness import Crash
from hil.report import attach


def attach_crash(crash: Crash) -> None:
    """The host's last kernel log lines, named by where they come from."""
    attach.attach_kernel_log(
        crash.lines, name=f"kernel log of {crash.host} before the crash ({crash.source})"
    )
