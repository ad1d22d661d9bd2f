"""``hil cm``: bad input is one line and exit 1, before any pair is reserved."""

from __future__ import annotations

import pytest

from hil.cli import main


@pytest.mark.parametrize(
    "argv, says",
    [
        (["cm", "run", "nope"], "no CM sequence 'nope' (known: abort, close, connect,"),
        (["cm", "run", "close", "-p", "count=3"], "sequence close takes no count (it takes: by)"),
        (["cm", "run", "storm", "-p", "count"], "-p 'count': write KEY=VALUE"),
        (["cm", "run", "connect", "--mode", "admin"], "sequence connect takes no mode"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


def test_list_names_every_sequence(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cm", "list"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == sorted(
        [
            "abort",
            "close",
            "connect",
            "destroy_conn_sent",
            "link_pull",
            "listener_destroy",
            "no_listener",
            "reject",
            "remote_access_error",
            "storm",
        ]
    )


def test_help_documents_the_contract_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "4  a rule was violated: the RDMA CM contract (hil cm run), a wire rule" in out
    assert "(hil wire judge)" in out
