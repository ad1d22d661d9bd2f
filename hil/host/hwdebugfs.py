"""iw_cxgb4's debugfs files, and one ``cat`` of several of them split back into each file.

``setup_debugfs`` in drivers/infiniband/hw/cxgb4/device.c makes
``/sys/kernel/debug/iw_cxgb4/<PCI function>/`` with ``qps``, ``eps``,
``stags`` and ``stats``: one line per QP (``dump_qp``), per endpoint and
listener (``dump_ep``, ``dump_listen_ep``), per memory region
(``dump_stag``), and the resource table (``stats_show``).  Each file's lines
have their own first words, which is how one ``cat`` of all four is split
(:func:`split_debugfs`).  Reading them on a host: :mod:`hil.host.hwevidence`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from hil.agent.types import CommandResult

DEBUGFS_ROOT = "/sys/kernel/debug"
# debugfs_create_dir(DRV_NAME, NULL) in c4iw_init_module (device.c).
CXGB4_DEBUGFS = posixpath.join(DEBUGFS_ROOT, "iw_cxgb4")
CXGB4 = "iw_cxgb4"
FILES = ("qps", "eps", "stags", "stats")
# The first words of each file's lines (device.c: dump_qp, dump_ep and
# dump_listen_ep, dump_stag); every other line is stats_show's table.
LINE_STARTS = {
    "qps": ("qp sq id ", "rc qp sq id "),
    "eps": ("ep ",),
    "stags": ("stag: ",),
}


@dataclass(frozen=True)
class Debugfs:
    """The driver's debugfs files on one host at one moment."""

    directory: str
    files: Mapping[str, str]  # file name -> content, for each file that was read
    unreadable: Mapping[str, str]  # file name -> cat's reason

    def lines(self, name: str) -> list[str]:
        """The non-empty lines of file ``name`` (none when it was not read)."""
        return [line for line in self.files.get(name, "").splitlines() if line.strip()]

    @property
    def qps(self) -> int | None:
        """QPs the driver holds (lines of ``qps``), None when unread."""
        return len(self.lines("qps")) if "qps" in self.files else None

    @property
    def eps(self) -> int | None:
        """Endpoints, listeners included (lines of ``eps``), None when unread."""
        return len(self.lines("eps")) if "eps" in self.files else None

    @property
    def listeners(self) -> int | None:
        """Listening endpoints among them (``dump_listen_ep``'s lines carry a ``stid``)."""
        if "eps" not in self.files:
            return None
        return sum(1 for line in self.lines("eps") if " stid " in line)


def split_debugfs(directory: str, result: CommandResult, names: tuple[str, ...]) -> Debugfs:
    """One ``cat`` of several of the driver's files, back into one text per file.

    Each line goes to the file its format belongs to (:data:`LINE_STARTS`);
    a file cat named in a message on stderr is unreadable, with that
    message (coreutils quotes a name with a colon, as every PCI function's
    has: ``cat: '/sys/.../0000:81:00.4/qps': Permission denied``).  The NUL
    byte ``qp_open`` and ``stag_open`` end their buffer with is dropped.
    """
    unreadable = {}
    for line in result.stderr.splitlines():
        for name in names:
            path = posixpath.join(directory, name)
            for prefix in (f"'{path}': ", f"{path}: "):
                if prefix in line:
                    unreadable[name] = line.split(prefix, 1)[1].strip()
                    break
    read = [n for n in names if n not in unreadable]
    texts: dict[str, list[str]] = {n: [] for n in read}
    for line in result.stdout.replace("\0", "").splitlines():
        owner = _owner(line, read)
        if owner is not None:
            texts[owner].append(line)
    files = {n: "".join(f"{line}\n" for line in lines) for n, lines in texts.items()}
    return Debugfs(directory, files, unreadable)


def _owner(line: str, names: list[str]) -> str | None:
    """Which of ``names`` printed ``line``: by its first words, else ``stats``."""
    start = line.lstrip()
    for name in names:
        if start.startswith(LINE_STARTS.get(name, ())):
            return name
    return "stats" if "stats" in names and line.strip() else None
