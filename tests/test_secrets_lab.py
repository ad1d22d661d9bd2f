"""No secret in any output of a whole suite run with secrets set (issue 14, item 8).

On the session's virtual lab, the shortest shipped suite (``suites/test_storm.py``)
runs through the nightly's pipeline (``hil.report.pipeline``: pytest into
Allure results, the generated report, the trends) as a CI job would, with
three secrets:

- the guests accept a new passphrase-protected key for this test (its
  public half appended to their authorized_keys, removed afterwards); the
  inventory copy names only that key, with
  ``key_passphrase: {env: HIL_KEY_PASSPHRASE}``;
- the inventory copy holds a literal ``password``.  The guests' sshd has
  ``PasswordAuthentication no`` and the key is accepted first, so the
  password is set but never sent: what is tested is that it is never written;
- ``CI_JOB_TOKEN`` (with ``GITLAB_CI``: the executor record reads GitLab's
  variables) is in the environment.

The run writes Allure results (attachments, pcaps of every test,
``environment.properties``, ``executor.json``, ``hil-metrics.json``), the
generated report, the summary and trend files, a junit file with every
test's logs, pytest's DEBUG log file (hil's and paramiko's loggers) and its
terminal output; ``hil inventory show`` and a
``hil`` command whose passphrase is wrong or unset write theirs.  Every
file of the run, and the lab's directory (guest consoles), is searched for
each secret in its usual encodings (tests/secretscan.py, whose own test
shows it finds a planted one): none may appear.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from secretscan import find_leaks
from vlab import VirtualLab

from hil.ssh import SSHPool

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 600.0  # a TCG pair: setup, agents, a 16-connection storm each way, the wire judge
SUITE = "suites/test_storm.py"
AUTHORIZED_KEYS = "/run/hil/authorized_keys"  # the guests' sshd reads it (hil.lab.bootfiles)
PASSPHRASE_VAR = "HIL_KEY_PASSPHRASE"
# Quotes and a backslash: escaped differently by repr, JSON and XML writers.
PASSPHRASE = "hil-lab pass'phr\"ase\\Kq8passCore"
PASSWORD = "hil-lab pw \"Zr5pwdCore'"
TOKEN = "glcbt-64_Ct9TokenCoreXv"
SECRETS = {"key passphrase": PASSPHRASE, "ssh password": PASSWORD, "CI_JOB_TOKEN": TOKEN}


@pytest.fixture
def locked_key(virtual_lab: VirtualLab, tmp_path: Path) -> Iterator[Path]:
    """A passphrase-protected key the guests accept while the test runs."""
    key = tmp_path / "keys" / "locked_ed25519"
    key.parent.mkdir()
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", PASSPHRASE, "-C", "hil-secrets-test"]
        + ["-f", str(key)],
        check=True,
        timeout=30,
    )
    public = key.with_name(key.name + ".pub").read_text()
    with SSHPool(virtual_lab.inventory, ssh_config=None) as pool:
        sessions = [pool.get(h.name) for h in virtual_lab.pair.hosts]
        before = [s.run(["cat", AUTHORIZED_KEYS], timeout=30).stdout for s in sessions]
        for s, keys in zip(sessions, before, strict=True):
            s.run(["sh", "-c", f"cat > {AUTHORIZED_KEYS}"], input=keys + public, timeout=30)
        try:
            yield key
        finally:
            for s, keys in zip(sessions, before, strict=True):
                s.run(["sh", "-c", f"cat > {AUTHORIZED_KEYS}"], input=keys, timeout=30)


def _inventory(lab: VirtualLab, key: Path, path: Path) -> Path:
    """The lab's inventory with every host on the locked key, its passphrase from the
    environment and a literal password."""
    doc = yaml.safe_load(Path(lab.inventory.path).read_text())
    for host in doc["hosts"].values():
        host["ssh"].update(
            identity_file=str(key), key_passphrase={"env": PASSPHRASE_VAR}, password=PASSWORD
        )
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _run(argv: list[str], env: dict[str, str], log: Path) -> subprocess.CompletedProcess[str]:
    """Run ``argv``, keeping its terminal output in ``log`` (searched like every output)."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=TIMEOUT, env=env, cwd=ROOT, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(argv[:6])} ... did not finish within {TIMEOUT:.0f} s")
    log.write_text(f"$ {' '.join(argv)}\n{done.stdout}\n--- stderr\n{done.stderr}")
    return done


def _hil(*args: str, env: dict[str, str], log: Path) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-m", "hil", *args], env, log)


def test_no_secret_reaches_any_output_of_a_suite_run(
    virtual_lab: VirtualLab, locked_key: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    inventory = _inventory(virtual_lab, locked_key, tmp_path / "inventory.yaml")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        PASSPHRASE_VAR: PASSPHRASE,
        "GITLAB_CI": "true",
        "CI_JOB_URL": "https://gitlab.example/lab/hil/-/jobs/1",
        "CI_JOB_TOKEN": TOKEN,
    }
    reports = out / "reports"
    suite = _run(
        [
            sys.executable, "-m", "hil.report.pipeline", SUITE,
            "--reports", str(reports),
            "--inventory", str(inventory),
            "--pair", virtual_lab.pair.name,
            "--pcap", "all",
            "--",
            "--hil-store", str(out / "store.db"),
            "--junitxml", str(out / "junit.xml"), "-o", "junit_logging=all",
            "--log-level", "DEBUG",
            "--log-file", str(out / "debug.log"), "--log-file-level", "DEBUG",
            "-rA",
        ],
        env,
        out / "suite.txt",
    )  # fmt: skip
    assert suite.returncode == 0, f"{SUITE} failed:\n{suite.stdout}\n{suite.stderr}"

    # The scenario happened: the key was unlocked and used, and every kind of output exists.
    debug = (out / "debug.log").read_text()
    assert "Authentication (publickey) successful" in debug, "paramiko's DEBUG log is missing"
    run = reports / "latest"
    results = [json.loads(p.read_text()) for p in (run / "results").glob("*-result.json")]
    assert len(results) >= 2 and {r["status"] for r in results} == {"passed"}, results
    for kind in (
        "results/*-attachment.pcap",
        "results/*-attachment.txt",
        "results/environment.properties",
        "results/hil-metrics*.json",
        "report/index.html",
        "report/data/attachments/*",
    ):
        assert list(run.glob(kind)), f"no {kind} in {run}"
    assert "GitLab CI" in (run / "results" / "executor.json").read_text()

    # hil's own commands on the same inventory: show, and a connect that cannot unlock the key.
    show = _hil("inventory", "show", str(inventory), "--json", env=env, log=out / "show.txt")
    assert show.returncode == 0, show.stderr
    host = virtual_lab.pair.host_a.name
    wrong = {**env, PASSPHRASE_VAR: PASSPHRASE[::-1]}
    unset = {k: v for k, v in env.items() if k != PASSPHRASE_VAR}
    for name, bad in (("wrong", wrong), ("unset", unset)):
        done = _hil(
            "-v", "--inventory", str(inventory), "host", "info", host,
            env=bad, log=out / f"passphrase-{name}.txt",
        )  # fmt: skip
        assert done.returncode == 3, f"{name} passphrase: {done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr and f"hil: error: {host}: " in done.stderr
        assert PASSPHRASE_VAR in done.stderr, done.stderr

    leaks = find_leaks([out, virtual_lab.dir], SECRETS)
    assert not leaks, "secrets in the run's outputs:\n" + "\n".join(map(str, leaks))
