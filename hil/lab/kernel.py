"""The lab's guest kernel: Debian's linux-source built with siw, cached.

The kernel is built once per machine from ``/usr/src/linux-source-X.Y.tar.xz``
(6.1 unless another source is named: :mod:`hil.lab.kernel_source`)
from one of two bases plus ``siw.config``: ``defconfig`` (virtme-ng's
defconfig, the kernel of old) or ``minimal`` (``make allnoconfig`` with
``minimal.config``: only what the lab needs, a third of the compiles).  It is
cached under ``$XDG_CACHE_HOME/hil/kernel/<source-version>-<config-hash>/bzImage``.
Each base's extracted tree stays in ``.../kernel/build/<source-version>[-minimal]/``
so that a changed fragment rebuilds incrementally instead of from scratch, and
ccache (``.../kernel/ccache``) keeps compiles across trees and rebuilds.
The debug flavour (``debug.config`` on top of the minimal base: KASAN,
kmemleak, lockdep, debug objects) has its own key and tree (``...-minimal-debug``).
"""

from __future__ import annotations

import fcntl
import hashlib
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
from typing import Literal

from hil import tools
from hil.errors import InputError, LabError
from hil.lab.kernel_source import KernelSource as KernelSource
from hil.lab.kernel_source import find_source as find_source

FRAGMENT = Path(__file__).with_name("siw.config")
MINIMAL = Path(__file__).with_name("minimal.config")
DEBUG = Path(__file__).with_name("debug.config")
# What a kernel is configured from: virtme-ng's defconfig, or allnoconfig + MINIMAL.
Base = Literal["defconfig", "minimal"]
DEFAULT_BASE: Base = "minimal"
CCACHE_MAX_SIZE = "3G"
CCACHE_MARK = ".hil-ccache"  # in a tree: it is configured and built with CC="ccache gcc"
MAKE_TARGETS = ("bzImage",)
EXTRACT_TIMEOUT = 900.0
CONFIG_TIMEOUT = 600.0
BUILD_TIMEOUT = 3 * 3600.0
PROGRESS_EVERY = 5.0

# What the build runs; hil/tools.py says which Debian package provides each.
BUILD_TOOLS = tools.KERNEL_BUILD
BUILD_HEADERS: dict[str, str] = {
    "/usr/include/libelf.h": "libelf-dev",
    "/usr/include/openssl/ssl.h": "libssl-dev",
}

# Where the lab's long commands (this build, ``hil lab up`` and ``down``) say what they do.
Progress = Callable[[str], None]


def to_stderr(line: str) -> None:
    """The default :data:`Progress`: the line on stderr, at once."""
    print(line, file=sys.stderr, flush=True)


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/hil`` (default ``~/.cache/hil``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hil"


def config_hash(fragment: Path = FRAGMENT, base: Base = DEFAULT_BASE, debug: bool = False) -> str:
    """Hash of what decides the kernel besides its source: base, fragment, targets.

    The defconfig base depends on virtme-ng's version (its defconfig), the
    minimal one on ``minimal.config`` instead; the defconfig key is the one
    hil always used, so its cached kernels stay valid.  The debug flavour adds
    ``debug.config`` (the plain keys stay what they were).
    """
    h = hashlib.sha256()
    h.update(fragment.read_bytes())
    h.update(" ".join(MAKE_TARGETS).encode())
    if base == "minimal":
        h.update(b"\0allnoconfig\0" + MINIMAL.read_bytes())
    else:
        h.update(_virtme_version().encode())
    if debug:
        h.update(b"\0debug\0" + DEBUG.read_bytes())
    return h.hexdigest()[:12]


def _virtme_version() -> str:
    try:
        from importlib.metadata import version

        return version("virtme-ng")
    except Exception:  # noqa: BLE001 - not installed is reported by missing_tools
        return "none"


def kernel_dir(
    source: KernelSource, fragment: Path = FRAGMENT, base: Base = DEFAULT_BASE, debug: bool = False
) -> Path:
    """Where the bzImage of this source, fragment, base and flavour is (or will be) cached."""
    safe = re.sub(r"[^A-Za-z0-9.+_-]", "_", source.version)
    return cache_root() / "kernel" / f"{safe}-{config_hash(fragment, base, debug)}"


def tree_dir(source: KernelSource, base: Base = DEFAULT_BASE, debug: bool = False) -> Path:
    """The extracted source tree of ``source`` for ``base``, where it is built in place.

    One tree per base and flavour, so building one never makes another's a
    full rebuild (the debug options change the flags of every compile).
    """
    name = re.sub(r"[^A-Za-z0-9.+_-]", "_", source.version)
    if base != "defconfig":
        name += f"-{base}"
    if debug:
        name += "-debug"
    return cache_root() / "kernel" / "build" / name / source.tree_name


def cached_kernel(
    fragment: Path = FRAGMENT,
    base: Base = DEFAULT_BASE,
    source: KernelSource | None = None,
    debug: bool = False,
) -> Path | None:
    """The cached bzImage of ``source`` (default 6.1), or None if not built yet."""
    image = kernel_dir(source or find_source(), fragment, base, debug) / "bzImage"
    return image if image.is_file() else None


def missing_tools() -> list[str]:
    """Debian packages whose tools or headers the kernel build lacks."""
    missing = {tools.tool(t).package for t in BUILD_TOOLS if shutil.which(t) is None}
    missing |= {pkg for hdr, pkg in BUILD_HEADERS.items() if not Path(hdr).exists()}
    if _configkernel() is None:
        missing.add("virtme-ng (PyPI, in hil's venv)")
    return sorted(missing)


def _configkernel() -> str | None:
    # Prefer the one next to our interpreter: the venv's bin is often not on PATH.
    name = tools.name("virtme-configkernel")
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else shutil.which(name)


def ensure_kernel(
    rebuild: bool = False,
    fragment: Path = FRAGMENT,
    progress: Progress = to_stderr,
    jobs: int | None = None,
    base: Base = DEFAULT_BASE,
    source: KernelSource | None = None,
    debug: bool = False,
) -> Path:
    """The path of a bzImage with siw of ``source`` (default 6.1), built first when not cached."""
    if debug and base != "minimal":
        raise InputError("the debug kernel is built on the minimal base only")
    source = source or find_source()
    dest = kernel_dir(source, fragment, base, debug)
    image = dest / "bzImage"
    if image.is_file() and not rebuild:
        return image
    missing = missing_tools()
    if missing:
        raise LabError(
            "cannot build the lab kernel, missing: "
            + ", ".join(missing)
            + " (run ci/install, or apt-get install the packages above)"
        )
    with build_lock(progress):
        if image.is_file() and not rebuild:
            return image  # another process built it while we waited
        tree = _extract(source, tree_dir(source, base, debug), progress)
        _configure(tree, fragment, base, debug, progress)
        started = time.monotonic()
        make(tree, jobs or os.cpu_count() or 1, progress)
        dest.mkdir(parents=True, exist_ok=True)
        tmp = dest / "bzImage.tmp"
        shutil.copyfile(tree / "arch/x86/boot/bzImage", tmp)
        shutil.copyfile(tree / ".config", dest / "config")
        tmp.replace(image)
        progress(f"lab kernel: built in {time.monotonic() - started:.0f} s: {image}")
    return image


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
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LabError(
                        f"{holder} held {path} for over {timeout:.0f} s; stop it, "
                        "or remove the lock"
                    ) from None
                if deadline - time.monotonic() > timeout - PROGRESS_EVERY:
                    progress(f"{holder} is running; waiting for it to finish")
                time.sleep(PROGRESS_EVERY)
        yield


def _extract(source: KernelSource, tree: Path, progress: Progress) -> Path:
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


def _configure(tree: Path, fragment: Path, base: Base, debug: bool, progress: Progress) -> None:
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
        tool = _configkernel()
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
