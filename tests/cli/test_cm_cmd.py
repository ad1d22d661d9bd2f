"""``hil cm``: bad input is one line and exit 1, before any pair is reserved."""

from __future__ import annotations

import pytest

from hil.cli import main

BAD_INPUT = [
    (["cm", "run", "nope"], "no CM sequence 'nope' (known: abort, close, connect,"),
    (["cm", "run", "close", "-p", "count=3"], "sequence close takes no count (it takes: by)"),
    (["cm", "run", "storm", "-p", "count"], "-p 'count': write KEY=VALUE"),
    (["cm", "run", "connect", "--mode", "admin"], "sequence connect takes no mode"),
    # The values' types come from the sequence's annotations (storm's count: int).
    (
        ["cm", "run", "storm", "-p", "count=many"],
        "sequence storm: count takes a whole number, not 'many'",
    ),
    (
        ["cm", "run", "storm", "-p", "hold_s=soon"],
        "sequence storm: hold_s takes a number, not 'soon'",
    ),
    (["cm", "run", "link_pull", "-p", "traffic=yes"], "traffic takes true or false, not 'yes'"),
    (["cm", "run", "race_disconnects", "-p", "rounds=2.5"], "rounds takes a whole number"),
    # The mode against the pull modes registered (hil.host.linkctl, and entry points).
    (
        ["cm", "run", "link_pull", "--mode", "pdu"],
        "no link pull registered for mode 'pdu' (known: admin, blackhole, carrier, command)",
    ),
    (["cm", "run", "unreachable", "-p", "mode=cable"], "no link pull registered for mode 'cable'"),
]


@pytest.mark.parametrize("argv, says", BAD_INPUT)
def test_bad_input_is_one_line_and_exit_1_before_any_pair_is_reserved(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import hil.inventory
    import hil.reservation
    from hil.cli import build_parser

    # Every command module imported first: one imported under the patch below would keep
    # the stand-in for good (a module-level "from hil.reservation import open_store").
    build_parser()

    def reserve(*args: object) -> None:
        raise AssertionError("hil cm run opened the inventory or the store on bad input")

    monkeypatch.setattr(hil.inventory, "load_from_args", reserve)
    monkeypatch.setattr(hil.reservation, "open_store", reserve)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_family_other_than_ipv4_or_ipv6_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["cm", "run", "connect", "--family", "ipv5"])
    assert done.value.code == 1
    err = capsys.readouterr().err
    assert "argument --family: invalid choice: 'ipv5' (choose from" in err
    assert "Traceback" not in err


def test_good_parameters_take_their_annotated_types() -> None:
    from hil.cli.cm_cmd import sequence_params

    assert sequence_params("storm", ["count=4", "hold_s=2"], None) == {"count": 4, "hold_s": 2.0}
    assert sequence_params("close", ["by=1"], None) == {"by": "1"}  # by is text
    assert sequence_params("reject", ["private_data=7"], None) == {"private_data": b"7"}
    assert sequence_params("link_pull", ["traffic=false"], "carrier") == {
        "traffic": False,
        "mode": "carrier",  # registered by the virtual lab's entry point
    }


def test_list_names_every_sequence(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cm", "list"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == sorted(
        [
            "abort",
            "close",
            "connect",
            "destroy_conn_sent",
            "ird_ord",
            "late_mpa_reply",
            "link_flap",
            "link_pull",
            "listener_addresses",
            "listener_destroy",
            "no_listener",
            "private_data",
            "race_destroy_listen",
            "race_destroy_reply",
            "race_destroy_terminate",
            "race_disconnects",
            "race_reject_request",
            "regress_cxgb4_ep_timeout_under_churn",
            "regress_iwcm_connect_disconnect_storm",
            "regress_iwcm_peer_vanishes",
            "regress_iwcm_refused_child",
            "regress_siw_going_down",
            "regress_siw_mpareq_failure",
            "regress_siw_netdev_port_query",
            "regress_siw_netdev_removed",
            "regress_siw_reject_racing_mpareq",
            "regress_siw_sendpages_slab",
            "regress_siw_zero_ird_ord",
            "regress_ucma_close_during_resolve_route",
            "reject",
            "reject_then_accept",
            "remote_access_error",
            "storm",
            "unreachable",
        ]
    )


def test_help_documents_the_contract_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "4  a rule was violated: the RDMA CM contract, a wire rule or the after-test" in out
    assert "checks (hil cm run), a wire rule (hil wire judge)" in out


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
