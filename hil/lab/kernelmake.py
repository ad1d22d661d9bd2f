"""The steps of a lab kernel build: the build lock, extract, configure, make.

:func:`hil.lab.kernel.ensure_kernel` runs them in order; a patched kernel
(:mod:`hil.lab.patched`) and the build bench reuse the lock and ``make``.
Every step has its timeout and a LabError that names the step and what to
do; ``make`` says its progress every few seconds and keeps its log beside
the tree.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from hil import tools
from hil.errors import LabError
from hil.lab.kernel_source import KernelSource
from hil.lab.kernelkey import DEBUG, MAKE_TARGETS, MINIMAL, Base, cache_root

CCACHE_MAX_SIZE = "3G"
CCACHE_MARK = ".hil-ccache"  # in a tree: it is configured and built with CC="ccache gcc"
EXTRACT_TIMEOUT = 900.0
CONFIG_TIMEOUT = 600.0
BUILD_TIMEOUT = 3 * 3600.0
PROGRESS_EVERY = 5.0

# Where the lab's long commands (this build, ``hil lab up`` and ``down``) say what they do.
Progress = Callable[[str], None]


def to_stderr(line: str) -> None:
    """The default :data:`Progress`: the line on stderr, at once."""
    print(line, file=sys.stderr, flush=True)


def configkernel() -> str | None:
    """virtme-configkernel's path (the defconfig base's configure), None when missing."""
    # Prefer the one next to our interpreter: the venv's bin is often not on PATH.
    name = tools.name("virtme-configkernel")
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else shutil.which(name)


@contextmanager
def build_lock(progress: Progress) -> Iterator[None]:
    """Held while a kernel is built: one build (or copy of the tree) at a time per machine."""
    lock_path = cache_root() / "kernel" / ".build.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with waited_lock(lock_path, BUILD_TIMEOUT, "lab kernel: another build", progress):
        yield


@contextmanager
def waited_lock(path: Path, timeout: float, holder: str, progress: Progress) -> Iterator[None]:
    """Hold the flock on ``path``, waiting for ``holder`` at most ``timeout`` seconds.

    Says once on ``progress`` that it waits; LabError naming the lock when
    the wait runs out.
    """
    with open(path, "a") as f:
        if not _try_flock(f.fileno()):
            progress(f"{holder} is running; waiting for it to finish")
            if not _queued_flock(f.fileno(), timeout):
                raise LabError(
                    f"{holder} held {path} for over {timeout:.0f} s; stop it, or remove the lock"
                )
        yield


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _queued_flock(fd: int, timeout: float) -> bool:
    """Wait for the flock in the kernel's queue, at most ``timeout`` seconds.

    A blocking flock, not a LOCK_NB poll: at each release the kernel hands the lock
    to a blocked waiter, so a poller loses to every ``flock LOCK cmd`` queued beside
    it, for as long as they keep coming.  The wait runs in a thread on a dup of the
    fd (a flock belongs to the open file description, which the dup shares); given
    up, the caller closes its fd, and the lock, once granted, goes with the dup's
    close.
    """
    dup = os.dup(fd)
    granted, guard = threading.Event(), threading.Lock()
    abandoned = False

    def wait() -> None:
        try:
            fcntl.flock(dup, fcntl.LOCK_EX)
            with guard:
                if not abandoned:
                    granted.set()
        finally:
            os.close(dup)

    threading.Thread(target=wait, name="flock-wait", daemon=True).start()
    if granted.wait(timeout):
        return True
    with guard:
        abandoned = not granted.is_set()
    return not abandoned


def extract(source: KernelSource, tree: Path, progress: Progress) -> Path:
    work = tree.parent
    marker = work / ".extracted"
    if marker.exists() and tree.is_dir():
        return tree
    if work.exists():
        shutil.rmtree(work)  # a half-extracted tree from an interrupted run
    work.mkdir(parents=True)
    progress(f"lab kernel: extracting {source.tarball} into {work}")
    _run(
        tools.argv("tar", "-xf", str(source.tarball), "-C", str(work)),
        EXTRACT_TIMEOUT,
        "extracting",
    )
    marker.touch()
    return tree


def configure(tree: Path, fragment: Path, base: Base, debug: bool, progress: Progress) -> None:
    if base == "minimal":
        parts = [MINIMAL, fragment, *([DEBUG] if debug else [])]
        wanted = "\n".join(p.read_text() for p in parts)
        allconfig = tree.parent / "allconfig"
        allconfig.write_text(wanted)
        (tree / CCACHE_MARK).touch()
        progress(f"lab kernel: configuring with allnoconfig + {' + '.join(p.name for p in parts)}")
        argv = tools.argv("make", *make_vars(tree), f"KCONFIG_ALLCONFIG={allconfig}", "allnoconfig")
        _run(argv, CONFIG_TIMEOUT, "configuring", cwd=tree, env=ccache_env(tree))
    else:
        wanted = fragment.read_text()
        progress(f"lab kernel: configuring with virtme-configkernel --defconfig + {fragment.name}")
        tool = configkernel()
        assert tool is not None  # missing_tools() checked it
        _run(
            [tool, "--defconfig", "--custom", str(fragment)],
            CONFIG_TIMEOUT,
            "configuring",
            cwd=tree,
        )
    dropped = unmet_options(wanted, (tree / ".config").read_text())
    if dropped:
        raise LabError(
            f"kernel config in {tree} lacks {', '.join(dropped)} from {fragment.name}"
            f"{' or ' + MINIMAL.name if base == 'minimal' else ''}"
            f"{' or ' + DEBUG.name if debug else ''}: "
            "a dependency is missing; add it to the fragment"
        )


def make_vars(tree: Path) -> list[str]:
    """make's variables for a configure or build in ``tree``: ccache when it was set up so.

    Every object's recorded command line names ``CC``: building a tree with
    another ``CC`` than it was built with recompiles everything.  So ccache is
    used in trees marked for it (the minimal base's, and copies of it), and
    the defconfig trees keep the plain ``gcc`` they were built with.
    """
    if not (tree / CCACHE_MARK).exists():
        return []
    return [f"CC={tools.executable('ccache')} {tools.executable('gcc')}"]


def ccache_env(tree: Path) -> dict[str, str]:
    """The environment of a kernel build: ccache's directory, size, and base dir.

    ``CCACHE_BASEDIR`` makes paths inside ``tree`` relative in ccache's hash,
    so a copy of the tree (a fault kernel's) hits the same cache entries.
    """
    env = dict(os.environ)
    env["CCACHE_DIR"] = str(cache_root() / "kernel" / "ccache")
    env["CCACHE_MAXSIZE"] = CCACHE_MAX_SIZE
    env["CCACHE_BASEDIR"] = str(tree)
    env["CCACHE_NOHASHDIR"] = "1"
    return env


def unmet_options(fragment: str, config: str) -> list[str]:
    """The fragment's ``CONFIG_X=y`` lines that the final .config does not have."""
    have = set(config.splitlines())
    wanted = [
        ln.strip() for ln in fragment.splitlines() if re.fullmatch(r"CONFIG_\w+=y", ln.strip())
    ]
    return [w for w in wanted if w not in have]


def _run(
    argv: list[str],
    timeout: float,
    what: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> None:
    try:
        out = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as e:
        raise LabError(f"lab kernel: {what} took over {timeout:.0f} s ({argv[0]}); retry") from e
    if out.returncode != 0:
        tail = "\n".join((out.stdout + out.stderr).strip().splitlines()[-15:])
        raise LabError(f"lab kernel: {what} failed ({argv[0]} exited {out.returncode}):\n{tail}")


def make(tree: Path, jobs: int, progress: Progress) -> None:
    """``make -jJOBS bzImage`` in ``tree``, a progress line every few seconds, log beside it."""
    argv = tools.argv("make", f"-j{jobs}", *make_vars(tree), *MAKE_TARGETS)
    log_path = tree.parent / "build.log"
    progress(
        f"lab kernel: {' '.join(argv)} in {tree} (log {log_path}); from scratch ~10 min on 2 cores"
    )
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            argv,
            cwd=tree,
            env=ccache_env(tree),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        watcher = _MakeWatcher(proc, log)
        watcher.start()
        started = time.monotonic()
        try:
            while proc.poll() is None:
                time.sleep(PROGRESS_EVERY)
                elapsed = time.monotonic() - started
                if elapsed > BUILD_TIMEOUT:
                    raise LabError(
                        f"lab kernel: make ran over {BUILD_TIMEOUT:.0f} s; see {log_path}"
                    )
                progress(
                    f"lab kernel: {elapsed:4.0f} s, {watcher.compiled} files compiled: "
                    f"{watcher.last}"
                )
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            watcher.join(timeout=10)
    if proc.returncode != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
        raise LabError(f"lab kernel: make exited {proc.returncode}; see {log_path}:\n{tail}")


class _MakeWatcher(threading.Thread):
    """Copies make's output to the log, counting CC lines for progress."""

    def __init__(self, proc: subprocess.Popen[str], log: object) -> None:
        super().__init__(daemon=True)
        self.proc = proc
        self.log = log
        self.compiled = 0
        self.last = ""

    def run(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.log.write(line)  # type: ignore[attr-defined]
            if line.lstrip().startswith("CC"):
                self.compiled += 1
            self.last = line.strip()[:100]
