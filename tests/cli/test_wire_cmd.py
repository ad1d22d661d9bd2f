"""``hil wire judge`` on the real captures of tests/data/wire (tshark decodes them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hil.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "wire"
RPING = DATA / "rping-siw.pcap"  # rping between the lab's guests: siw's own traffic
BAD_FLAGS = DATA / "mpa-bad-flags.pcap"  # an MPA reply of revision 1 with CRC and markers

pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="needs tshark")


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    """``hil wire judge ARGV``: exit code (argparse's exit too), stdout, stderr."""
    try:
        code = main(["wire", "judge", *map(str, argv)])
    except SystemExit as e:  # argparse refused an argument
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_rping_traffic_holds(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, RPING)
    assert code == 0
    assert "connection 198.18.0.1:44668 > 198.18.0.2:7174 (seen by rping-siw)" in out
    assert "wire PASSED: profile siw" in out
    assert "[mpa-revision-and-flags] pass" in out
    assert err == "hil: wire rules hold (1 passed)\n"


def test_a_violation_exits_4_and_names_the_rule(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, BAD_FLAGS)
    assert code == 4
    assert "wire FAILED" in out and "[mpa-revision-and-flags] fail" in out


def test_json_has_the_captures_the_exchange_and_the_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, BAD_FLAGS, "--json")
    assert code == 4
    doc = json.loads(out)
    assert doc["captures"] == {"mpa-bad-flags": str(BAD_FLAGS)}
    assert doc["exchange"]["points"] == ["mpa-bad-flags"]
    assert len(doc["exchange"]["connections"]) == 1
    assert doc["verdict"]["ok"] is False
    failed = [r["rule"] for r in doc["verdict"]["results"] if r["outcome"]["status"] == "fail"]
    assert failed == ["mpa-revision-and-flags"]


def test_each_file_is_a_capture_point(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, RPING, BAD_FLAGS, "--json")
    assert code == 4
    assert json.loads(out)["exchange"]["points"] == ["rping-siw", "mpa-bad-flags"]
    # Two files of one name are told apart by their paths.
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        shutil.copy(RPING, tmp_path / d / "host.pcap")
    code, out, _ = run(capsys, tmp_path / "a/host.pcap", tmp_path / "b/host.pcap", "--json")
    assert code == 0
    assert json.loads(out)["exchange"]["points"] == [
        str(tmp_path / "a/host.pcap"),
        str(tmp_path / "b/host.pcap"),
    ]


def test_port_keeps_the_connections_of_that_port(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, RPING, "--port", "7174")[0] == 0
    code, out, err = run(capsys, RPING, "--port", "7175")
    assert (code, out) == (1, "")
    assert err == f"hil: error: no TCP connection to or from port 7175 in {RPING}\n"


@pytest.mark.parametrize(
    "argv, says",
    [
        (["/nonexistent.pcap"], "hil: error: cannot read the capture /nonexistent.pcap"),
        ([str(DATA / "README.md")], "README.md is not a packet capture (pcap or pcapng)"),
        ([str(RPING), "--port", "x"], "argument --port: 'x' is not a TCP port (1..65535)"),
        ([str(RPING), "--profile", "rxe"], "argument --profile: invalid choice: 'rxe'"),
        ([str(RPING), str(RPING)], "hil: error: the same capture is given twice"),
        ([str(RPING), "--timeline", "/no.json"], "cannot read the timeline /no.json"),
        ([str(RPING), "--timeline", str(DATA / "README.md")], "README.md is not JSON"),
    ],
)
def test_bad_input_exits_1_with_one_message(
    capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (1, "")
    assert says in err and "Traceback" not in err


def test_nothing_to_judge_is_not_a_pass(capsys: pytest.CaptureFixture[str]) -> None:
    # A SYN answered by RST: every rule that could judge it needs the CM timeline.
    code, out, err = run(capsys, DATA / "no-listener-rst.pcap")
    assert code == 1
    assert "wire PASSED" in out  # the verdict is printed: nothing failed...
    assert "nothing judged: every wire rule was skipped or not applicable" in err  # ...nor passed


def test_the_console_script_prints_no_traceback() -> None:
    script = Path(sys.executable).parent / "hil"
    done = subprocess.run(
        [str(script), "wire", "judge", "/nonexistent.pcap"],
        capture_output=True, text=True, timeout=60, check=False,
        env={k: v for k, v in os.environ.items() if k != "HIL_INVENTORY"},
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("hil: error: cannot read the capture /nonexistent.pcap")
    assert "Traceback" not in done.stderr


def test_with_its_runs_timeline_a_capture_is_judged_as_in_the_test(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # siw built to close with RST: only the timeline says an orderly close was asked for.
    capture = DATA / "close-rst-fault-siw.pcap"
    assert run(capsys, capture)[0] == 0  # a bare capture: nothing here breaks a wire-only rule
    code, out, _ = run(capsys, capture, "--timeline", DATA / "close-rst-fault-siw.json")
    assert code == 4
    assert "[orderly-close-is-fin] fail" in out and "ACK,RST" in out
    # Without the capture host's clock samples, the rules that need times say so.
    assert "[every-teardown-event-has-a-cause] skip: the packets could not be placed" in out
    code, out, _ = run(capsys, DATA / "close-siw.pcap", "--timeline", DATA / "close-siw.json")
    assert code == 0 and "[orderly-close-is-fin] pass" in out
