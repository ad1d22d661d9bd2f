"""KVM or TCG: probe whether KVM guests actually boot here.

/dev/kvm may exist and still hang guests (nested virtualisation), so a
short boot that must print a marker decides.  The answer is cached per
machine boot and kernel in the cache directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

from hil.errors import InputError
from hil.lab.guestcmd import vng_binary, vng_env
from hil.lab.kernelkey import cache_root
from hil.lab.state import boot_id

PROBE_TIMEOUT = 20.0
MARKER = "hil-kvm-probe-ok"
ACCELS = ("auto", "kvm", "tcg")


def choose(requested: str, kernel: Path, say: Callable[[str], None]) -> str:
    """``kvm`` or ``tcg`` for ``requested`` (auto/kvm/tcg), saying which and why."""
    if requested not in ACCELS:
        raise InputError(f"--accel must be one of {', '.join(ACCELS)}, got {requested!r}")
    if requested != "auto":
        say(f"lab: using {requested.upper()} (as asked)")
        return requested
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        say("lab: using TCG (no usable /dev/kvm)")
        return "tcg"
    cache = cache_root() / f"kvm-probe-{boot_id()}-{kernel.parent.name}"
    if cache.exists():
        accel = cache.read_text().strip()
        say(f"lab: using {accel.upper()} (KVM probe result cached in {cache})")
        return accel
    say(f"lab: probing KVM with a {PROBE_TIMEOUT:.0f} s test boot")
    accel = "kvm" if kvm_boots(kernel) else "tcg"
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(accel + "\n")
    say(
        "lab: using KVM (probe boot worked)"
        if accel == "kvm"
        else "lab: using TCG (a KVM probe boot did not finish in time; KVM hangs here)"
    )
    return accel


def kvm_boots(kernel: Path) -> bool:
    """Whether a KVM guest of ``kernel`` boots and runs a command within the timeout."""
    argv = [
        vng_binary(),
        "--run",
        str(kernel),
        "--cpus",
        "1",
        "--memory",
        "256M",
        "--cwd",
        "/",
        "--disable-microvm",
        "--exec",
        f"echo {MARKER}",
    ]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=vng_env(),
    )
    try:
        out, _ = proc.communicate(timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return False
    return MARKER in out.decode(errors="replace")
