"""The wire judge against siw broken on purpose: each fault kernel fails its suite by name.

For each fault of tests/siw_faults.py (two patches of bench/mutants/): build
its kernel from the lab kernel's tree (hil/lab/patched.py, cached after the
first time), boot a lab of its own with it, run the
suite that must catch it, and read from the JUnit report which tests failed
and whether the expected wire rule is named; then run the same suites on a
lab of the default kernel, where they must pass.  Prints one line per lab;
exit 0 when every fault was caught by its wire rule and the default passed.

    flock /tmp/hil-lab.lock .venv/bin/python bench/wire_faults.py [--fault NAME ...]

Cost here (2 cores, TCG): a fault build 45 s the first time, then cached;
each lab ~40 s to boot; test_close.py ~1 min, test_connect.py ~1.5 min.
About 8 minutes for both faults and the default, with the kernels cached.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import siw_faults  # noqa: E402  (tests/ is not a package: path set just above)

SUITE_TIMEOUT = 1800.0
LAB_TIMEOUT = 600.0


@dataclass(frozen=True)
class Catch:
    """A fault, the suite that must catch it and the wire rule it must name."""

    fault: str
    suite: str
    rule: str


CATCHES = (
    Catch("rst-close", "suites/test_close.py", "orderly-close-is-fin"),
    Catch("no-accept-pdata", "suites/test_connect.py", "mpa-reply-carries-accept-pdata"),
)


@dataclass(frozen=True)
class Outcome:
    """What a suite run gave: tests run, those that failed, those naming the rule."""

    tests: int
    failed: int
    naming: int


def _hil(*args: str, timeout: float = LAB_TIMEOUT) -> None:
    argv = [sys.executable, "-m", "hil", *args]
    if subprocess.run(argv, timeout=timeout, check=False).returncode:
        raise SystemExit(f"hil {' '.join(args)} failed")


def _suite(inventory: Path, suite: str, rule: str, junit: Path) -> Outcome:
    argv = [
        sys.executable,
        "-m",
        "pytest",
        suite,
        "-q",
        "-p",
        "no:cacheprovider",
        f"--hil-inventory={inventory}",
        f"--junitxml={junit}",
    ]
    subprocess.run(argv, cwd=ROOT, timeout=SUITE_TIMEOUT, check=False)
    cases = ET.parse(junit).getroot().iter("testcase")
    tests = failed = naming = 0
    for case in cases:
        tests += 1
        bad = [e for e in case if e.tag in ("failure", "error")]
        if bad:
            failed += 1
            text = " ".join((e.get("message") or "") + (e.text or "") for e in bad)
            naming += f"[{rule}] fail" in text
    return Outcome(tests, failed, naming)


def _on_lab(kernel: Path | None, catches: list[Catch], scratch: Path) -> list[Outcome]:
    """Each catch's suite on one lab booted with ``kernel`` (None: the default kernel)."""
    lab_dir = scratch / "lab"
    up = ["lab", "up", "--dir", str(lab_dir), "--accel", "tcg"]
    try:
        _hil(*up, *(["--kernel", str(kernel)] if kernel else []))
        inventory = lab_dir / "inventory.yaml"
        return [_suite(inventory, c.suite, c.rule, scratch / "junit.xml") for c in catches]
    finally:
        _hil("lab", "down", "--dir", str(lab_dir), timeout=120)


def main() -> int:
    """Build, boot, run, compare; print one line per suite run."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fault", action="append", choices=[c.fault for c in CATCHES])
    args = p.parse_args()
    chosen = [c for c in CATCHES if not args.fault or c.fault in args.fault]
    ok = True
    with tempfile.TemporaryDirectory(prefix="hil-wire-faults-") as tmp:
        for catch in chosen:
            (got,) = _on_lab(siw_faults.build(catch.fault), [catch], Path(tmp))
            caught = got.naming > 0
            ok &= caught
            print(
                f"fault {catch.fault:16} {catch.suite}: {got.failed}/{got.tests} failed, "
                f"{got.naming} naming {catch.rule}: {'CAUGHT' if caught else 'MISSED'}",
                flush=True,
            )
        for catch, got in zip(chosen, _on_lab(None, chosen, Path(tmp)), strict=True):
            ok &= got.failed == 0 and got.tests > 0
            print(
                f"default kernel         {catch.suite}: {got.failed}/{got.tests} failed "
                f"({'clean' if got.failed == 0 else 'NOT CLEAN'})",
                flush=True,
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
