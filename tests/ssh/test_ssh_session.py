"""SSHSession against the real sshd of the netns lab: commands, processes, SFTP."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import time
from pathlib import Path

import paramiko
import pytest
from netnslab import NetnsLab
from sshtest import inventory_of, with_ssh

from hil.errors import CommandFailed, CommandTimeout, InputError, SSHError
from hil.inventory.model import Inventory
from hil.ssh import SSHPool, SSHSession


def gone(lab: NetnsLab, pattern: str, within: float = 10) -> bool:
    """True once no process in host 0 matches ``pattern`` (pgrep -f)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if lab.exec(0, ["pgrep", "-f", pattern], check=False).returncode == 1:
            return True
        time.sleep(0.1)
    return False


def test_run_returns_stdout_stderr_and_status(session: SSHSession) -> None:
    r = session.run(["sh", "-c", "echo out; echo err >&2; exit 3"], check=False)
    assert (r.argv, r.status, r.stdout, r.stderr) == (
        ("sh", "-c", "echo out; echo err >&2; exit 3"),
        3,
        "out\n",
        "err\n",
    )


def test_run_runs_in_the_namespace_it_connected_to(session: SSHSession) -> None:
    assert "198.18.0.1/24" in session.run(["ip", "-br", "addr", "show", "data0"]).stdout


def test_arguments_reach_the_command_verbatim_without_a_shell(session: SSHSession) -> None:
    args = ["a b", "$HOME", ";touch /tmp/hil-should-not-exist", "'\"", "*"]
    r = session.run(["printf", "%s|", *args])
    assert r.stdout == "|".join(args) + "|"
    assert not Path("/tmp/hil-should-not-exist").exists()


def test_command_failed_carries_status_output_and_stderr_tail(session: SSHSession) -> None:
    script = "echo partial; for i in $(seq 1 30); do echo line$i >&2; done; exit 7"
    with pytest.raises(CommandFailed) as info:
        session.run(["sh", "-c", script])
    e = info.value
    assert (e.host, e.status, e.stdout) == ("ns0", 7, "partial\n")
    assert e.argv == ["sh", "-c", script]
    assert "exited 7" in str(e) and "line30" in str(e) and "line20" not in str(e)
    assert str(e).startswith("ns0: ")


def test_check_false_returns_failures(session: SSHSession) -> None:
    assert session.run(["false"], check=False).status == 1


def test_a_failures_why_is_its_last_stderr_line_else_its_status(session: SSHSession) -> None:
    said = session.run(["sh", "-c", "echo one >&2; echo two >&2; exit 3"], check=False)
    assert said.why() == "two"
    assert session.run(["false"], check=False).why() == "exit 1"


def test_input_is_piped_to_stdin_as_text_or_bytes(session: SSHSession) -> None:
    assert session.run(["cat"], input="hello\n").stdout == "hello\n"
    assert session.run(["wc", "-c"], input=b"\x00\x01\x02").stdout.strip() == "3"


def test_large_input_and_output_flow_both_ways_without_deadlock(session: SSHSession) -> None:
    # 6 MB each way: more than the SSH windows on both sides.
    data = os.urandom(3 * 1024 * 1024).hex().encode()
    r = session.run(["cat"], input=data, timeout=120)
    assert hashlib.sha256(r.stdout.encode()).hexdigest() == hashlib.sha256(data).hexdigest()


def test_input_to_a_command_that_only_reads_or_never_reads(session: SSHSession) -> None:
    data = os.urandom(6 * 1024 * 1024)
    assert session.run(["wc", "-c"], input=data, timeout=120).stdout.strip() == str(len(data))
    assert session.run(["true"], input=data, timeout=120).status == 0
    assert session.run(["head", "-c", "4"], input=b"abcdefgh" * 10**6).stdout == "abcd"


def test_without_input_stdin_is_closed(session: SSHSession) -> None:
    assert session.run(["cat"], timeout=10).stdout == ""


def test_timeout_raises_and_kills_the_remote_command(
    session: SSHSession, netns_lab: NetnsLab
) -> None:
    started = time.monotonic()
    with pytest.raises(CommandTimeout) as info:
        session.run(["sh", "-c", "sleep 3141; echo never"], timeout=1)
    elapsed = time.monotonic() - started
    expected = "ns0: sh -c 'sleep 3141; echo never' did not finish within 1s"
    assert str(info.value).startswith(expected)
    assert elapsed < 6, f"CommandTimeout came {elapsed:.1f}s after a 1s timeout"
    assert gone(netns_lab, "sleep 3141"), "the timed-out command still runs on the host"
    assert session.run(["true"]).status == 0  # the session survives a timeout


def test_command_that_ignores_term_is_killed_too(session: SSHSession, netns_lab: NetnsLab) -> None:
    with pytest.raises(CommandTimeout):
        session.run(["sh", "-c", "trap '' TERM; sleep 3142"], timeout=0.5)
    assert gone(netns_lab, "sleep 3142"), "TERM-proof command survived its timeout"


def test_an_empty_or_non_string_argv_is_refused(session: SSHSession) -> None:
    with pytest.raises(InputError):
        session.run([])
    with pytest.raises(InputError):
        session.run(["echo", 3])  # type: ignore[list-item]


def test_open_process_round_trips_lines(session: SSHSession) -> None:
    upper = "import sys\nfor line in sys.stdin:\n    print(line.strip().upper(), flush=True)"
    with session.open_process(["python3", "-u", "-c", upper]) as proc:
        for word in (b"one", b"two", b"three"):
            proc.write(word + b"\n")
            assert proc.readline(timeout=10) == word.upper() + b"\n"
        assert proc.pgid > 1
        proc.stdin.write(b"file-like\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == b"FILE-LIKE\n"
        assert proc.close() == 0  # it ends when its stdin closes


def test_readline_timeout_keeps_the_partial_line(session: SSHSession) -> None:
    # The rest of the line waits for a line on stdin, not a fixed second (which a loaded
    # machine could spend before the first readline timed out); "par" comes within that one.
    script = "printf par; read go; echo tial; cat"
    with session.open_process(["sh", "-c", script]) as proc:
        with pytest.raises(CommandTimeout, match="no line on stdout within 1s"):
            proc.readline(timeout=1)
        proc.write(b"go\n")
        assert proc.readline(timeout=10) == b"partial\n"


def test_process_stderr_and_exit_status(session: SSHSession) -> None:
    proc = session.open_process(["sh", "-c", "echo oops >&2; exit 4"])
    assert proc.wait(timeout=10) == 4
    assert proc.stderr.read() == b"oops\n"
    assert proc.readline(timeout=1) == b""
    proc.close()


def test_close_kills_a_process_that_ignores_eof_and_term(
    session: SSHSession, netns_lab: NetnsLab
) -> None:
    proc = session.open_process(["sh", "-c", "trap '' TERM; sleep 3143 & sleep 3144; wait"])
    assert proc.close(timeout=0.5) is None
    assert gone(netns_lab, "sleep 314[34]"), "the process group survived close()"


def test_sudo_wraps_only_when_the_host_says_so(
    netns_lab: NetnsLab, lab_inventory: Inventory
) -> None:
    if shutil.which("sudo") is None:
        pytest.fail("sudo is not installed; ci/install installs it")
    plain = lab_inventory.hosts["ns0"]
    inventory = inventory_of(
        lab_inventory, plain, dataclasses.replace(with_ssh(plain, sudo=True), name="ns0-sudo")
    )
    with SSHPool(inventory, ssh_config=None) as pool:
        via_sudo = pool.get("ns0-sudo")
        assert via_sudo.run(["printenv", "SUDO_USER"], sudo=True).stdout == "root\n"
        assert via_sudo.run(["printenv", "SUDO_USER"], check=False).status == 1
        assert pool.get("ns0").run(["printenv", "SUDO_USER"], sudo=True, check=False).status == 1
        with via_sudo.open_process(["sh", "-c", "printenv SUDO_USER; cat"], sudo=True) as proc:
            assert proc.readline(timeout=10) == b"root\n"


def test_put_file_uploads_with_mode_and_sftp_is_cached(session: SSHSession, tmp_path: Path) -> None:
    # The namespaces share the file system, so the upload is visible here.
    local = tmp_path / "payload.bin"
    local.write_bytes(os.urandom(300_000))
    remote = tmp_path / "uploaded.bin"
    session.put_file(local, str(remote), mode=0o600)
    assert remote.read_bytes() == local.read_bytes()
    assert remote.stat().st_mode & 0o777 == 0o600
    assert not Path(f"{remote}.part").exists()
    assert session.sftp() is session.sftp()


def test_put_file_to_a_missing_directory_says_where(session: SSHSession, tmp_path: Path) -> None:
    local = tmp_path / "f"
    local.write_text("x")
    with pytest.raises(SSHError, match=f"ns0: cannot upload {local} to /nonexistent/dir/f"):
        session.put_file(local, "/nonexistent/dir/f")


def test_a_channel_whose_close_fails_does_not_hide_the_commands_end(
    session: SSHSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host gone away (a panicked guest's QEMU) fails the channel's close with EOFError;
    the command's own result, or the error that ended it, still comes out."""

    close = paramiko.Channel.close

    def failing_close(chan: paramiko.Channel) -> None:
        close(chan)
        raise EOFError()

    monkeypatch.setattr(paramiko.Channel, "close", failing_close)
    assert session.run(["echo", "done"]).stdout == "done\n"
    with pytest.raises(CommandTimeout):
        session.run(["sleep", "5"], timeout=0.5)
