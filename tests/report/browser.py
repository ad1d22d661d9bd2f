"""Headless Debian Chromium and a local HTTP server, for looking at generated reports.

Allure's page loads its data with fetch(), which file:// URLs refuse, so the
report is served on 127.0.0.1.  Chromium runs with the flags that keep it off
the network (no background services, no QUIC) and a throwaway profile.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = "chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
BUDGET_MS = 10_000  # virtual time for the page's scripts and fetches to settle
TIMEOUT = 90.0


def chromium_missing() -> str | None:
    """Why Chromium cannot run here, or None."""
    return None if shutil.which(CHROMIUM) else "needs Debian's chromium (ci/install installs it)"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serve(directory: Path) -> Iterator[str]:
    """Serve ``directory`` on 127.0.0.1 (a free port); yields the base URL."""
    handler = functools.partial(_Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _run(profile: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    argv = [
        CHROMIUM,
        *FLAGS,
        f"--user-data-dir={profile}",
        f"--virtual-time-budget={BUDGET_MS}",
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, check=True)


def dump_dom(url: str, profile: Path) -> str:
    """The page's DOM after its scripts ran."""
    return _run(profile, ["--dump-dom", url]).stdout


def screenshot(url: str, out: Path, profile: Path, size: str = "1400,1000") -> Path:
    """A PNG of the page at ``size`` (width,height)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(profile, [f"--window-size={size}", f"--screenshot={out}", url])
    return out
