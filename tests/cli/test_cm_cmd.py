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
            "race_destroy_listen",
            "race_destroy_reply",
            "race_destroy_terminate",
            "race_disconnects",
            "race_reject_request",
            "regress_cxgb4_ep_timeout_under_flood",
            "regress_iwcm_peer_vanishes",
            "regress_iwcm_refused_child",
            "regress_siw_mpareq_failure",
            "regress_siw_netdev_removed",
            "regress_siw_reject_racing_mpareq",
            "regress_ucma_close_during_resolve_route",
            "reject",
            "remote_access_error",
            "storm",
            "unreachable",
        ]
    )


def test_help_documents_the_contract_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "4  a rule was violated: the RDMA CM contract (hil cm run), a wire rule" in out
    assert "(hil wire judge)" in out


def test_the_timeout_options_set_the_agent_call_and_step_layers_for_the_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import hil.inventory
    import hil.reservation
    from hil.errors import InputError
    from hil.timeouts import DEFAULTS, Timeouts, active

    seen: list[Timeouts] = []

    def store(url: str | None) -> None:
        seen.append(active())
        raise InputError("stopped here by the test")

    monkeypatch.setattr(hil.inventory, "load_from_args", lambda path: None)
    monkeypatch.setattr(hil.reservation, "open_store", store)
    argv = ["cm", "run", "close", "--timeout-agent", "7", "--timeout-step-slack", "2.5"]
    assert main(argv) == 1
    assert (seen[0].agent_call_s, seen[0].step_slack_s) == (7, 2.5)
    assert active() == DEFAULTS  # for the run only
    assert "stopped here by the test" in capsys.readouterr().err


def test_a_timeout_that_is_no_number_of_seconds_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as e:
        main(["cm", "run", "close", "--timeout-agent", "soon"])
    assert e.value.code != 0
    assert "--timeout-agent: not a number of seconds: 'soon'" in capsys.readouterr().err
