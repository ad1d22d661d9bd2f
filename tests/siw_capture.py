"""Record one CM sequence's packets on a virtual lab, for the wire judge's test data.

    .venv/bin/python tests/siw_capture.py --inventory INV SEQUENCE OUT.pcap [-- CM-RUN-ARGS]
    .venv/bin/python tests/siw_capture.py --kernel BZIMAGE --lab-dir DIR SEQUENCE OUT.pcap ...

On the lab of ``INV`` (``hil lab inventory``, or a lab of one's own with a
fault kernel, ``hil lab up --dir D --kernel K``): ``hil host setup PAIR``
(the inventory's one pair) takes and prepares the pair; tcpdump starts on
the first guest's data NIC (``-n -p -U -s 512``, over its own SSH session,
waited for until it says it listens); ``hil cm run SEQUENCE --lease L
--json CM-RUN-ARGS`` runs under that lease; after 2 s for the last segments
tcpdump gets SIGINT by its pid; the capture is copied to ``OUT.pcap`` and the
run's JSON (lease, setup, timeline, verdict) to ``OUT.json``, and to
``OUT.clock.json`` two samples of the guest's (wall clock, CLOCK_MONOTONIC)
taken in one process before tcpdump starts and after it stops: the pcap's
times are that guest's wall clock, the timeline's ``host_t_us`` its
monotonic clock.  The lease is released.  The caller holds ``flock /tmp/hil-lab.lock`` around it.

With ``--kernel`` (a fault kernel, tests/siw_faults.py) it first boots a lab
of its own, ``hil lab up --dir DIR --kernel BZIMAGE --accel tcg``, captures
on it, and always takes it down again (``hil lab down --dir DIR``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

SNAPLEN = 512
LISTEN_TIMEOUT = 30.0
CM_TIMEOUT = 600.0
SETTLE_S = 2.0
GUEST_PCAP = "/tmp/hil-siw-capture.pcap"


def hil(
    inventory: Path, *args: str, timeout: float = CM_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """``hil --inventory INV ARGS``, its output captured."""
    argv = [sys.executable, "-m", "hil", "--inventory", str(inventory), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def ssh_argv(host: dict[str, Any], command: str) -> list[str]:
    """ssh to an inventory host (its port, key, known_hosts; keys checked) running ``command``."""
    ssh = host["ssh"]
    return [
        "ssh",
        "-p",
        str(ssh["port"]),
        "-i",
        ssh["identity_file"],
        "-o",
        f"UserKnownHostsFile={ssh['known_hosts']}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=10",
        f"{ssh['user']}@{ssh['host']}",
        command,
    ]


def capture(inventory: Path, sequence: str, out: Path, cm_args: list[str]) -> int:
    """Run ``sequence`` under a capture; the ``hil cm run`` exit status."""
    inv = yaml.safe_load(inventory.read_text())
    (pair,) = inv["links"]
    end = inv["links"][pair]["ends"][0]
    host_name, port_name = end.split(":")
    host = inv["hosts"][host_name]
    (netdev,) = [r["netdev"] for r in host["rnics"] if r["name"] == port_name]

    setup = hil(inventory, "host", "setup", pair, "--json")
    if setup.returncode != 0:
        raise SystemExit(f"hil host setup {pair} failed:\n{setup.stderr}")
    lease = json.loads(setup.stdout)["lease"]["lease"]
    print(f"setup {pair}: lease {lease}", file=sys.stderr)
    try:
        return _captured_run(inventory, host_name, host, netdev, lease, sequence, out, cm_args)
    finally:
        hil(inventory, "release", lease, timeout=60)


def _captured_run(
    inventory: Path,
    host_name: str,
    host: dict[str, Any],
    netdev: str,
    lease: str,
    sequence: str,
    out: Path,
    cm_args: list[str],
) -> int:
    remote = (
        f"rm -f {GUEST_PCAP}; echo pid $$; exec tcpdump -i {shlex.quote(netdev)} -n -p -U "
        f"-s {SNAPLEN} -w {GUEST_PCAP}"
    )
    clock = [_clock_sample(host)]
    dump = subprocess.Popen(
        ssh_argv(host, remote), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert dump.stdout is not None and dump.stderr is not None
    pid = None
    try:
        pid = int(dump.stdout.readline().split()[1])
        deadline = time.monotonic() + LISTEN_TIMEOUT
        line = ""
        while "listening on" not in line:
            line = dump.stderr.readline()
            if not line or time.monotonic() > deadline:
                raise SystemExit(f"tcpdump on {host_name}:{netdev} did not start: {line}")
        print(f"tcpdump on {host_name}:{netdev} (pid {pid}): {line.strip()}", file=sys.stderr)
        run = hil(inventory, "cm", "run", sequence, "--lease", lease, "--json", *cm_args)
        print(f"hil cm run {sequence}: exit {run.returncode}", file=sys.stderr)
        if run.stderr:
            print(run.stderr, file=sys.stderr)
        out.with_suffix(".json").write_text(run.stdout)
        time.sleep(SETTLE_S)
    finally:
        if pid is not None:
            subprocess.run(ssh_argv(host, f"kill -INT {pid}"), check=False, timeout=30)
        try:
            _, err = dump.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            dump.kill()
            _, err = dump.communicate()
        print(f"tcpdump: {err.strip()}", file=sys.stderr)
    clock.append(_clock_sample(host))
    out.with_suffix(".clock.json").write_text(
        json.dumps({"host": host_name, "samples": clock}, indent=2) + "\n"
    )
    with open(out, "wb") as f:
        subprocess.run(ssh_argv(host, f"cat {GUEST_PCAP}"), stdout=f, check=True, timeout=60)
    return run.returncode


def _clock_sample(host: dict[str, Any]) -> dict[str, int]:
    """The guest's wall clock and CLOCK_MONOTONIC, read one after the other, in ns."""
    code = "import time; print(time.time_ns(), time.monotonic_ns())"
    argv = ssh_argv(host, f"python3 -c {shlex.quote(code)}")
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    wall, mono = (int(x) for x in out.stdout.split())
    return {"wall_ns": wall, "monotonic_ns": mono}


def lab(*args: str, timeout: float = CM_TIMEOUT) -> None:
    """``hil lab ARGS``, its progress on our stderr; SystemExit when it fails."""
    argv = [sys.executable, "-m", "hil", "lab", *args]
    if subprocess.run(argv, stdout=subprocess.DEVNULL, timeout=timeout, check=False).returncode:
        raise SystemExit(f"hil lab {' '.join(args)} failed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--inventory", type=Path, help="a running lab's inventory")
    where.add_argument("--kernel", type=Path, help="boot a lab of this kernel for the capture")
    parser.add_argument("--lab-dir", type=Path, default=Path("/tmp/hil-faultlab"))
    parser.add_argument("sequence")
    parser.add_argument("out", type=Path, help="the pcap to write (OUT.json beside it)")
    parser.add_argument("cm_args", nargs="*", help="more `hil cm run` arguments, after --")
    args = parser.parse_args()
    if args.inventory is not None:
        return capture(args.inventory, args.sequence, args.out, args.cm_args)
    lab_dir = str(args.lab_dir)
    try:
        lab("up", "--dir", lab_dir, "--kernel", str(args.kernel), "--accel", "tcg")
        return capture(args.lab_dir / "inventory.yaml", args.sequence, args.out, args.cm_args)
    finally:
        lab("down", "--dir", lab_dir, timeout=120)


if __name__ == "__main__":
    sys.exit(main())
