"""Lab kernels built from the default one plus a patch: fault kernels, mutants, reverts.

A patch is a unified diff against the lab kernel's source tree (``patch
-p1``) preceded by a header that ``patch`` skips as leading text::

    Name: reject-wrong-status
    Wrong: a peer's reject reaches the active side with -ECONNREFUSED
    Killed-by: suites/test_connect.py -k reject
    --- a/drivers/infiniband/sw/siw/siw_cm.c
    +++ b/drivers/infiniband/sw/siw/siw_cm.c
    ...

(:func:`read_patch`; ``Killed-by`` may repeat: a suite file, optionally
``-k EXPR``, then options of hil's plugin such as ``--hil-race-sweeps full`` for a
test that runs only in the nightly).  ``Kernel: debug`` builds it on the debug
flavour, ``Tree: 6.12`` on another kernel source than the lab's default (a fix
only that source has, undone there).  :func:`build` copies the default kernel's built tree once per
patch (:mod:`hil.lab.treecopy`: sources hard-linked, products copied), makes
each file the patch touches a file of its own, applies the patch (checked
on scratch copies of those files first), and runs ``make bzImage`` there incrementally.  The
result is cached beside the default kernel, ``KERNEL_DIR-patched-NAME/``
(``bzImage``, ``config``, ``patch.diff``, ``patch.json``); a second call
returns it at once, a changed diff is built again.  The default kernel, its
tree's bzImage and the files the patch touches are hashed before and after:
a change fails the build.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from hil import tools
from hil.errors import InputError, LabError
from hil.lab import kernel, treecopy

PATCH_TIMEOUT = 60.0
TOUCHED = ".touched"  # in a patched tree's work dir: the files the last patch made its own


@dataclass(frozen=True)
class Suite:
    """A suite that should kill a mutant: its file, an optional ``-k`` expression and
    options of hil's plugin (``--hil-...``) its tests need to run."""

    path: str
    keyword: str | None = None
    options: tuple[str, ...] = ()

    def pytest_args(self) -> list[str]:
        """The pytest arguments that select it."""
        return [self.path, *(["-k", self.keyword] if self.keyword else []), *self.options]

    def __str__(self) -> str:
        return " ".join(shlex.quote(a) for a in self.pytest_args())


@dataclass(frozen=True)
class Patch:
    """A named patch of the lab kernel: what it breaks, who should notice, the diff."""

    name: str
    wrong: str
    killed_by: tuple[Suite, ...]
    diff: str
    files: tuple[str, ...]  # the tree-relative paths it changes (``+++ b/PATH``, -p1)
    path: Path
    # Its other header fields, lower-cased (a revert kernel's Fix:, Source:, Runs:).
    extra: tuple[tuple[str, str], ...] = ()

    def field(self, name: str) -> str | None:
        """The header field ``name`` (lower case) beyond Name/Wrong/Killed-by, or None."""
        return dict(self.extra).get(name)

    @property
    def tree(self) -> str | None:
        """The kernel source the diff applies to (``Tree: 6.12``: a package, its series or a
        tarball, as ``hil lab kernel --source`` takes it); None: the lab's default."""
        return self.field("tree")

    @property
    def debug(self) -> bool:
        """True when the patch is built on the debug kernel (``Kernel: debug``): a bug that
        shows only to KASAN, lockdep or the refcount checks."""
        return self.field("kernel") == "debug"

    @property
    def unfixed(self) -> str | None:
        """Why the tree lacks the fix (``Unfixed:``), so that this revert undoes nothing and
        its kernel is the tree as it is (widened, where it has a widening); None: a revert."""
        return self.field("unfixed")

    def digest(self) -> str:
        """A hash of the diff (not the header): a changed diff is built again."""
        return hashlib.sha256(self.diff.encode()).hexdigest()[:12]


def read_patch(path: Path) -> Patch:
    """The patch in ``path``: its header and diff; InputError naming the file when malformed."""
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.startswith(("--- ", "diff "))), len(lines))
    header: dict[str, list[str]] = {}
    for ln in lines[:start]:
        if m := re.fullmatch(r"([A-Za-z-]+):\s*(.*?)\s*", ln):
            header.setdefault(m[1].lower(), []).append(m[2])
        elif ln.strip() and ln[:1].isspace() and header:  # a continued value
            last = list(header)[-1]
            header[last][-1] += " " + ln.strip()
    diff = "".join(lines[start:])
    files = tuple(_target(path, ln) for ln in lines[start:] if ln.startswith("+++ "))
    name = (header.get("name") or [""])[0]
    problems = [
        *([f"Name {name!r} is not the file's name {path.stem!r}"] if name != path.stem else []),
        *(["no Wrong: line (the wrong behaviour)"] if not header.get("wrong") else []),
        *(
            ["no Killed-by: line (a suite that should notice)"]
            if not header.get("killed-by")
            else []
        ),
        # A revert of a fix its tree never had (``Unfixed:``) undoes nothing.
        *(["no diff (no '+++ ' line)"] if not files and "unfixed" not in header else []),
    ]
    if problems:
        raise InputError(f"patch {path}: {'; '.join(problems)}")
    return Patch(
        name=name,
        wrong=" ".join(header["wrong"]),
        killed_by=tuple(_suite(path, v) for v in header["killed-by"]),
        diff=diff,
        files=files,
        path=path,
        extra=tuple(
            (k, " ".join(v)) for k, v in header.items() if k not in ("name", "wrong", "killed-by")
        ),
    )


def _target(path: Path, line: str) -> str:
    target = PurePosixPath(line[4:].split("\t")[0].strip())
    rel = PurePosixPath(*target.parts[1:])  # -p1
    if not rel.parts or target.is_absolute() or ".." in rel.parts:
        raise InputError(f"patch {path}: {line.strip()!r} is not a path inside the tree")
    return str(rel)


def _suite(path: Path, value: str) -> Suite:
    words = shlex.split(value)
    keyword = words[2] if len(words) >= 3 and words[1] == "-k" else None
    options = tuple(words[3:] if keyword is not None else words[1:])
    if words and (not options or options[0].startswith("--hil-")):
        return Suite(words[0], keyword, options)
    raise InputError(
        f"patch {path}: Killed-by {value!r} is not 'SUITE' or 'SUITE -k EXPR', "
        "optionally followed by --hil-... options"
    )


def patched_dir(name: str, debug: bool = False, tree: str | None = None) -> Path:
    """Where the kernel patched with ``name`` is (or will be) cached, beside the base one
    (of the source ``tree``, default the lab's; the debug one's, for ``debug``)."""
    base = kernel.kernel_dir(kernel.find_source(spec=tree), debug=debug)
    return base.with_name(f"{base.name}-patched-{name}")


def cached(patch: Patch) -> Path | None:
    """The cached bzImage built from this patch's current diff, or None."""
    image = patched_dir(patch.name, patch.debug, patch.tree) / "bzImage"
    stamp = image.with_name("patch.json")
    if not image.is_file() or not stamp.is_file():
        return None
    return image if json.loads(stamp.read_text()).get("digest") == patch.digest() else None


def build(
    patch: Patch, jobs: int = 2, rebuild: bool = False, progress: kernel.Progress = kernel.to_stderr
) -> Path:
    """The bzImage with ``patch`` applied, building the default kernel and then it when needed
    (a patch without a diff, an unfixed tree's revert: that kernel itself)."""
    if not patch.files:
        source = kernel.find_source(spec=patch.tree)
        return kernel.ensure_kernel(progress=progress, debug=patch.debug, source=source)
    if not rebuild and (image := cached(patch)) is not None:
        progress(f"patched {patch.name}: cached {image}")
        return image
    source = kernel.find_source(spec=patch.tree)
    base_image = kernel.ensure_kernel(progress=progress, debug=patch.debug, source=source)
    base_tree = kernel.tree_dir(source, debug=patch.debug)
    if not (base_tree / "arch/x86/boot/bzImage").is_file():
        raise LabError(
            f"patched {patch.name}: the lab kernel's build tree {base_tree} is gone or was never "
            "built; `hil lab kernel --rebuild` builds it again"
        )
    dest = patched_dir(patch.name, patch.debug, patch.tree)
    started = time.monotonic()
    with kernel.build_lock(progress):
        guard = _fingerprint(base_tree, base_image, patch.files)
        tree = _patched_tree(base_tree, patch.name, _sha256(base_image), progress)
        apply(patch, base_tree, tree)
        progress(f"patched {patch.name}: applied to {', '.join(patch.files)}")
        make_started = time.monotonic()
        kernel.make(tree, jobs, progress)
        make_s = time.monotonic() - make_started
        dest.mkdir(parents=True, exist_ok=True)
        tmp = dest / "bzImage.tmp"
        shutil.copyfile(tree / "arch/x86/boot/bzImage", tmp)
        shutil.copyfile(tree / ".config", dest / "config")
        (dest / "patch.diff").write_text(patch.diff)
        stamp = {"name": patch.name, "wrong": patch.wrong, "digest": patch.digest()}
        (dest / "patch.json").write_text(json.dumps(stamp, indent=2) + "\n")
        tmp.replace(dest / "bzImage")
        if _fingerprint(base_tree, base_image, patch.files) != guard:
            raise LabError(
                f"patched {patch.name}: the default kernel or its tree changed while building "
                f"({base_tree}); rebuild it with `hil lab kernel --rebuild`"
            )
    progress(
        f"patched {patch.name}: built in {time.monotonic() - started:.0f} s "
        f"(make {make_s:.0f} s): {dest / 'bzImage'}"
    )
    return dest / "bzImage"


def apply(patch: Patch, base_tree: Path, tree: Path) -> None:
    """Apply ``patch`` to ``tree``, a copy of ``base_tree``, never writing ``base_tree``.

    The files an earlier patch of this tree changed, and those this one
    changes, are first made fresh copies of the default tree's (restoring the
    first, breaking the hard links of the second); the patch is checked on scratch
    copies of its files before it writes anything.
    """
    record = tree.parent / TOUCHED
    earlier = record.read_text().split() if record.is_file() else []
    for rel in sorted({*earlier, *patch.files}):
        original = base_tree / rel
        if not original.is_file():
            raise LabError(
                f"patched {patch.name}: {rel} is not a file of the lab kernel tree {base_tree}; "
                f"the patch {patch.path} names a file this kernel does not have"
            )
        treecopy.fresh_copy(original, tree / rel)
    record.write_text("\n".join(patch.files) + "\n")
    _check(patch, tree)
    _patch(patch, tree)


def _check(patch: Patch, tree: Path) -> None:
    """Apply ``patch`` to scratch copies of the files it changes first: ``--dry-run``
    would check a second diff of a file (a widening atop its revert) against the file
    as it was, not as the first diff left it."""
    with tempfile.TemporaryDirectory(prefix="hil-patch-check-") as scratch:
        for rel in patch.files:
            (Path(scratch) / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tree / rel, Path(scratch) / rel)
        _patch(patch, Path(scratch), shown=tree)


def _patch(patch: Patch, tree: Path, shown: Path | None = None) -> None:
    argv = tools.argv("patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "-r", "-")
    try:
        out = subprocess.run(
            argv,
            cwd=tree,
            input=patch.diff,
            capture_output=True,
            text=True,
            timeout=PATCH_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        raise LabError(f"patched {patch.name}: patch ran over {PATCH_TIMEOUT:.0f} s") from e
    if out.returncode != 0:
        text = out.stdout + out.stderr
        failed = _failed_files(text) or list(patch.files)
        raise LabError(
            f"patched {patch.name}: {patch.path} does not apply to {', '.join(failed)} in "
            f"{shown or tree}; the kernel source changed, make the diff again:\n"
            + "\n".join(text.strip().splitlines()[-10:])
        )


def _failed_files(output: str) -> list[str]:
    """The files whose hunks failed, from patch's output ("checking file X" / "... FAILED")."""
    failed: list[str] = []
    current = ""
    for line in output.splitlines():
        if m := re.match(r"(?:checking|patching) file (.+)", line):
            current = m[1].strip()
        elif "FAILED" in line and current not in failed:
            failed.append(current)
    return [f for f in failed if f]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _fingerprint(base_tree: Path, base_image: Path, files: tuple[str, ...]) -> tuple[str, ...]:
    # What a patched build must never touch: the default kernel, its tree's image, the
    # default tree's copies of the files the patch changes.
    paths = [base_image, base_tree / "arch/x86/boot/bzImage", *(base_tree / f for f in files)]
    return tuple(_sha256(p) if p.is_file() else "-" for p in paths)


def _patched_tree(base_tree: Path, name: str, base_sha: str, progress: kernel.Progress) -> Path:
    """The patch's copy of ``base_tree``, made anew unless one of the same default kernel exists."""
    work = base_tree.parent.with_name(f"{base_tree.parent.name}-patched-{name}")
    tree = work / base_tree.name
    marker = work / ".copied"
    if marker.is_file() and marker.read_text().strip() == base_sha and tree.is_dir():
        progress(f"patched {name}: reusing the tree {tree}")
        return tree
    if work.exists():
        shutil.rmtree(work)  # a half-made copy, or one of an older default kernel
    extracted = (base_tree.parent / ".extracted").stat().st_mtime
    progress(f"patched {name}: copying {base_tree} to {tree} (sources linked, products copied)")
    treecopy.copy_tree(base_tree, tree, extracted, progress)
    marker.write_text(base_sha + "\n")
    return tree
