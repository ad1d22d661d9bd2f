"""A host that crashed under a test, as the report keeps and shows it.

The crash plugin (:mod:`hil.plugin.crash`) puts the :class:`~hil.host.liveness.Crash`
in the test's stash; the fixtures and the report's own evidence look here to
leave the crashed host alone in the test's teardown (every call to it would
only wait for its bound), and the report attaches the host's last kernel
log lines.  A test failed this way has the message
``hil: HostCrashed: HOST: host crashed (...) during TEST: ...``, the
category **Host crashed** (:mod:`hil.report.categories`).
"""

from __future__ import annotations

import pytest

from hil.host.liveness import Crash
from hil.report import attach

CRASH_KEY = pytest.StashKey[Crash]()
MESSAGE_PREFIX = "hil: HostCrashed: "


def crashed(item: pytest.Item) -> Crash | None:
    """The crash of a host under ``item``, once noticed; None while its hosts answer."""
    return item.stash.get(CRASH_KEY, None)


def message(crash: Crash, test: str) -> str:
    """The failure message of a test its host crashed under (the category matches it)."""
    kind = "kernel crash" if crash.kind == "kernel_crash" else "stopped answering"
    return f"{MESSAGE_PREFIX}{crash.host}: host crashed ({kind}) during {test}: {crash.detail}"


def attach_crash(crash: Crash) -> None:
    """The host's last kernel log lines, named by where they come from."""
    attach.attach_kernel_log(
        crash.lines, name=f"kernel log of {crash.host} before the crash ({crash.source})"
    )
