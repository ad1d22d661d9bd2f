"""siw kernels with a deliberate fault, for the wire judge's tests.

    .venv/bin/python tests/siw_faults.py [--jobs N] [--rebuild] FAULT...
    .venv/bin/python tests/siw_faults.py --list

Each fault is a few text edits of ``drivers/infiniband/sw/siw/siw_cm.c``
(:data:`FAULTS`), made in a copy of the lab kernel's build tree
(:func:`hil.lab.kernel.tree_dir`, built first if needed) and built there
incrementally (``make bzImage``: siw_cm.o, then vmlinux and bzImage again).
The result is cached beside the default kernel, ``KERNEL_DIR-fault-NAME/``
(``bzImage``, ``config``, ``fault.diff``, ``fault.json``); a second call
returns it at once.  Boot it with ``hil lab up --kernel PATH``.

The copy leaves the default tree and kernel as they are: source files (as
old as the extraction) are hard links, and the build's own products (newer)
are real copies, because a build rewrites some of its products in place
(``arch/x86/boot/bzImage``, ``System.map``) and would write through a link.
The patched file is written anew and renamed over its link.  The default
tree's bzImage and siw_cm.c are checked unchanged at the end.

In ``tests/`` rather than ``bench/``: it makes test kernels, not numbers,
and tests import it (like ``vlab``) to find or build a fault kernel.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hil.errors import HilError, LabError
from hil.lab import kernel

SIW_CM = Path("drivers/infiniband/sw/siw/siw_cm.c")
COPY_PROGRESS_EVERY = 5.0


@dataclass(frozen=True)
class Edit:
    """Replace ``anchor``, which must occur exactly once in siw_cm.c, by ``replacement``."""

    anchor: str
    replacement: str


@dataclass(frozen=True)
class Fault:
    """A named siw fault: what it does and the edits that make it."""

    name: str
    summary: str
    edits: tuple[Edit, ...]

    def digest(self) -> str:
        """A hash of the edits: a changed fault is built again."""
        h = hashlib.sha256()
        for e in self.edits:
            h.update(e.anchor.encode() + b"\0" + e.replacement.encode() + b"\0")
        return h.hexdigest()[:12]


FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault(
            "rst-close",
            "every siw connection ends with a TCP RST instead of a FIN; CM events unchanged "
            "(SO_LINGER {1, 0} on the socket in siw_socket_disassoc, which every release "
            "of a connected siw socket passes just before sock_release)",
            (
                Edit(
                    "\tif (sk) {\n"
                    "\t\twrite_lock_bh(&sk->sk_callback_lock);\n"
                    "\t\tcep = sk_to_cep(sk);\n",
                    "\tif (sk) {\n"
                    "\t\t/* hil fault rst-close: close by abort, RST instead of FIN */\n"
                    "\t\tsock_no_linger(sk);\n"
                    "\t\twrite_lock_bh(&sk->sk_callback_lock);\n"
                    "\t\tcep = sk_to_cep(sk);\n",
                ),
            ),
        ),
        Fault(
            "no-accept-pdata",
            "siw_accept sends its MPA reply without the private data the application gave "
            "rdma_accept (MPA v2: pd_len 4, the IRD/ORD words only); nothing else changed",
            (
                Edit(
                    "\trv = siw_send_mpareqrep(cep, params->private_data,\n"
                    "\t\t\t\tparams->private_data_len);\n",
                    "\t/* hil fault no-accept-pdata: the reply carries no private data */\n"
                    "\trv = siw_send_mpareqrep(cep, NULL, 0);\n",
                ),
            ),
        ),
    )
}


def fault_dir(name: str) -> Path:
    """Where the kernel with fault ``name`` is (or will be) cached, beside the default one."""
    base = kernel.kernel_dir(kernel.find_source())
    return base.with_name(f"{base.name}-fault-{name}")


def fault_kernel(name: str) -> Path | None:
    """The cached bzImage with fault ``name`` built from the current edits, or None."""
    image = fault_dir(name) / "bzImage"
    stamp = image.with_name("fault.json")
    if not image.is_file() or not stamp.is_file():
        return None
    recorded = json.loads(stamp.read_text())
    return image if recorded.get("digest") == FAULTS[name].digest() else None


def build(
    name: str, jobs: int = 2, rebuild: bool = False, progress: kernel.Progress = kernel.to_stderr
) -> Path:
    """The bzImage with fault ``name``, building the default kernel and then it when needed."""
    fault = FAULTS[name]
    if not rebuild and (cached := fault_kernel(name)) is not None:
        progress(f"fault {name}: cached {cached}")
        return cached
    base_image = kernel.ensure_kernel(progress=progress)
    source = kernel.find_source()
    base_tree = kernel.tree_dir(source)
    if not (base_tree / "arch/x86/boot/bzImage").is_file():
        raise LabError(
            f"fault {name}: the lab kernel's build tree {base_tree} is gone or was never built; "
            "`hil lab kernel --rebuild` builds it again"
        )
    dest = fault_dir(name)
    started = time.monotonic()
    with kernel.build_lock(progress):
        guard = _fingerprint(base_tree, base_image)
        tree = _fault_tree(base_tree, name, _sha256(base_image), progress)
        diff = _apply(fault, base_tree / SIW_CM, tree / SIW_CM)
        progress(f"fault {name}: patched {SIW_CM} ({len(fault.edits)} edit(s))")
        make_started = time.monotonic()
        kernel.make(tree, jobs, progress)
        make_s = time.monotonic() - make_started
        dest.mkdir(parents=True, exist_ok=True)
        tmp = dest / "bzImage.tmp"
        shutil.copyfile(tree / "arch/x86/boot/bzImage", tmp)
        shutil.copyfile(tree / ".config", dest / "config")
        (dest / "fault.diff").write_text(diff)
        stamp = {"fault": name, "summary": fault.summary, "digest": fault.digest()}
        (dest / "fault.json").write_text(json.dumps(stamp, indent=2) + "\n")
        tmp.replace(dest / "bzImage")
        if _fingerprint(base_tree, base_image) != guard:
            raise LabError(
                f"fault {name}: the default kernel or its tree changed while building "
                f"({base_tree}); rebuild it with `hil lab kernel --rebuild`"
            )
    progress(
        f"fault {name}: built in {time.monotonic() - started:.0f} s "
        f"(make {make_s:.0f} s): {dest / 'bzImage'}"
    )
    return dest / "bzImage"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _fingerprint(base_tree: Path, base_image: Path) -> tuple[str, ...]:
    # What a fault build must never touch: the default kernel, its tree's image and siw_cm.c.
    return tuple(
        _sha256(p) for p in (base_image, base_tree / "arch/x86/boot/bzImage", base_tree / SIW_CM)
    )


def _fault_tree(base_tree: Path, name: str, base_sha: str, progress: kernel.Progress) -> Path:
    """The fault's copy of ``base_tree``, made anew unless one of the same default kernel exists."""
    work = base_tree.parent.with_name(f"{base_tree.parent.name}-fault-{name}")
    tree = work / base_tree.name
    marker = work / ".copied"
    if marker.is_file() and marker.read_text().strip() == base_sha and tree.is_dir():
        progress(f"fault {name}: reusing the tree {tree}")
        return tree
    if work.exists():
        shutil.rmtree(work)  # a half-made copy, or one of an older default kernel
    extracted = (base_tree.parent / ".extracted").stat().st_mtime
    progress(f"fault {name}: copying {base_tree} to {tree} (sources linked, build products copied)")
    _copy_tree(base_tree, tree, extracted, progress)
    marker.write_text(base_sha + "\n")
    return tree


def _copy_tree(src: Path, dst: Path, extracted: float, progress: kernel.Progress) -> None:
    started = last = time.monotonic()
    linked = copied = 0
    for root, dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in dirs:
            if (Path(root) / name).is_symlink():
                os.symlink(os.readlink(Path(root) / name), dst / rel / name)
        for name in files:
            here, there = Path(root) / name, dst / rel / name
            if here.is_symlink():
                os.symlink(os.readlink(here), there)
            elif here.stat().st_mtime < extracted:
                os.link(here, there)
                linked += 1
            else:
                _copy_product(here, there, os.fsencode(src), os.fsencode(dst))
                copied += 1
        if time.monotonic() - last > COPY_PROGRESS_EVERY:
            last = time.monotonic()
            progress(f"  copy: {last - started:4.0f} s, {linked} linked, {copied} copied")
    progress(
        f"  copy: done in {time.monotonic() - started:.0f} s, {linked} linked, {copied} copied"
    )


def _copy_product(s: Path, d: Path, src: bytes, dst: bytes) -> None:
    """Copy a build product, keeping its mtime so that make sees the copy as built.

    tools/ (objtool) records its commands and dependencies with absolute
    paths; moved to the copy's path, they stay unchanged for make, and
    objtool, with every object that depends on it, is not rebuilt.
    """
    shutil.copy2(s, d)
    if d.suffix in (".cmd", ".d"):
        text = d.read_bytes()
        if src in text:
            st = s.stat()
            d.write_bytes(text.replace(src, dst))
            os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns))


def _apply(fault: Fault, original: Path, target: Path) -> str:
    """Write ``target`` anew as ``original`` with the fault's edits; return the unified diff."""
    text = original.read_text()
    edited = text
    for e in fault.edits:
        found = edited.count(e.anchor)
        if found != 1:
            raise LabError(
                f"fault {fault.name}: the anchor occurs {found} times in {original}, not once; "
                f"the kernel source changed, update the fault's edits:\n{e.anchor}"
            )
        edited = edited.replace(e.anchor, e.replacement)
    tmp = target.with_name(target.name + ".fault-tmp")
    tmp.write_text(edited)
    os.replace(tmp, target)  # a new file: the hard link to the default tree's copy is broken
    return "".join(
        difflib.unified_diff(
            text.splitlines(keepends=True),
            edited.splitlines(keepends=True),
            f"a/{SIW_CM}",
            f"b/{SIW_CM}",
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("faults", nargs="*", metavar="FAULT", help=", ".join(FAULTS))
    parser.add_argument("--list", action="store_true", help="list the faults and their kernels")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="make -j (default: cores)"
    )
    parser.add_argument("--rebuild", action="store_true", help="build even when cached")
    args = parser.parse_args()
    if args.list or not args.faults:
        for f in FAULTS.values():
            print(f"{f.name:16} {fault_kernel(f.name) or '(not built)'}\n    {f.summary}")
        return 0
    unknown = [n for n in args.faults if n not in FAULTS]
    if unknown:
        print(f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(FAULTS)}", file=sys.stderr)
        return 1
    try:
        for n in args.faults:
            print(build(n, jobs=args.jobs, rebuild=args.rebuild))
    except HilError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
