"""irdma's profile (Intel E810/X722, iWARP): its values' sources, its registration, and
mixed pairs (siw+irdma, iw_cxgb4+irdma) judged by each host's own profile."""

from __future__ import annotations

import errno
import inspect
import re
from pathlib import Path

import pytest
from cmtimelines import HOSTS, close_with_peer_status, qp_err_close, rejected
from contractcheck import breaks, conforms

from hil.errors import InputError
from hil.inventory import load
from hil.judge import irdmaprofile
from hil.judge.irdmaprofile import CM_RETRANS_S, IRDMA, irdma_profile
from hil.judge.profile import bound_fields
from hil.judge.profiles import IW_CXGB4, SIW, PairProfile, Profile, profile_for, provider_named
from hil.wire.plan import capture_plan

EXAMPLE = Path(__file__).resolve().parents[2] / "inventory" / "example-lab.yaml"
# A driver line as the profile cites it: file:line, or :line after a named file.
CITE = re.compile(r"(\w+\.[ch]:\d+|:\d+)")


def pair(a: Profile, b: Profile) -> PairProfile:
    """Host A judged by ``a``, host B by ``b``."""
    return PairProfile(((HOSTS["a"], a), (HOSTS["b"], b)))


def test_every_bound_cites_a_driver_line_or_says_it_is_inferred() -> None:
    assert IRDMA.provenance_problems() == []
    for name in bound_fields():
        prov = IRDMA.provenance_of(name)
        assert prov is not None and prov.kind in ("src", "inferred"), name
        if prov.kind == "src":
            assert CITE.search(prov.basis) and "6.1.192" in prov.basis, (name, prov.basis)


def test_every_value_of_the_profile_is_marked_src_or_inferred_with_a_line() -> None:
    # Each keyword of the Profile(...) call carries a comment, the block above it, a
    # provenance, or a constant whose comment cites the driver.
    source = inspect.getsource(irdmaprofile)
    assert source.count("[src") + source.count("[inferred") >= 12
    assert len(CITE.findall(source)) >= 40
    assert "Linux 6.1.192" in source and "6.1.192-3" in source
    assert "6.1.192" in IRDMA.private_data.broken
    assert all("[src]" in p.source for _, p in IRDMA.pull_ports)


def test_the_cm_retransmit_schedule_is_the_drivers() -> None:
    # IRDMA_RETRY_TIMEOUT 1 s, then HZ << n capped at IRDMA_MAX_TIMEOUT 12 s, 32 resends.
    steps = [1.0] + [min(2.0**n, 12.0) for n in range(1, 33)]
    assert sum(steps) == CM_RETRANS_S == 363.0
    assert IRDMA.conn_sent_destroy_bound_s == IRDMA.unreachable_bound_s == 368.0


def test_what_irdma_promises_where_the_contract_leaves_room() -> None:
    assert IRDMA.reject_status == -errno.ECONNREFUSED
    assert not IRDMA.no_listener_connect_error and IRDMA.no_listener_events == {"REJECTED"}
    assert IRDMA.orderly_close_statuses == IRDMA.abort_statuses == {0}
    assert IRDMA.mpa_v1_retry and not IRDMA.abortive_peer_looks_orderly
    assert IRDMA.statuses_of("CONNECT_ERROR") == frozenset()
    assert IRDMA.statuses_of("DISCONNECTED") == frozenset({0})
    assert IRDMA.link_pull_bound_s("carrier", traffic=False) is None
    assert IRDMA.link_pull_bound_s("admin", traffic=True) == IRDMA.pull_traffic_bound_s
    port = IRDMA.port_promise("carrier")
    assert port is not None and port.state == "DOWN" and port.down == ()


def test_private_data_limits_and_wire() -> None:
    pd = IRDMA.private_data
    assert [pd.of(c) for c in ("connect", "accept", "reject")] == [251, 251, 251]
    assert pd.taken_by("accept") == 255 and pd.refusal == "EINVAL"
    assert IRDMA.wire.mpa_revisions == {1, 2} and IRDMA.wire.crc and IRDMA.wire.enhanced
    assert "FIN" not in IRDMA.wire.abortive_signals


def test_the_capture_plan_treats_irdma_as_offloaded() -> None:
    t6 = load(EXAMPLE).pair("t6-pair-1")
    plan = capture_plan(t6, "irdma")
    assert not plan.usable and "irdma runs its TCP on the RNIC" in plan.reason
    mixed = capture_plan(t6, "siw+irdma")
    assert [p.host for p in mixed.points] == [t6.hosts[0].name]


@pytest.mark.parametrize("driver", ["irdma", "ice", "i40e"])
def test_irdma_is_known_by_its_name_and_its_pci_functions_drivers(driver: str) -> None:
    assert provider_named(driver).driver == "irdma"
    assert profile_for(driver) is IRDMA
    assert irdma_profile() == IRDMA


def test_irdma_takes_no_settings_and_never_claims_a_node_desc() -> None:
    spec = provider_named("ice")
    assert spec.settings == {}
    # irdma writes no node_desc: sysfs prints an empty line, which must not name irdma.
    assert not "".startswith(spec.node_desc) and not "rxe".startswith(spec.node_desc)
    with pytest.raises(InputError, match="irdma takes no setting ep_timeout_secs.*none"):
        profile_for("irdma", ep_timeout_secs=10)


SIW_IRDMA = pair(SIW, IRDMA)
IRDMA_CXGB4 = pair(IRDMA, IW_CXGB4)


def test_mixed_pairs_are_named_and_answer_each_host() -> None:
    assert SIW_IRDMA.name == "siw+irdma" and IRDMA_CXGB4.name == "irdma+iw_cxgb4"
    assert SIW_IRDMA.of("lab-b") is IRDMA and IRDMA_CXGB4.of("lab-b") is IW_CXGB4


def test_rejected_is_judged_by_the_connecting_hosts_profile() -> None:
    refused = rejected("irdma+iw_cxgb4", status=-errno.ECONNREFUSED)
    conforms(refused, IRDMA_CXGB4)
    breaks(refused, SIW_IRDMA, "reject-status", "expected REJECTED(-104)")


def test_an_irdma_close_status_is_judged_on_the_irdma_host() -> None:
    # B's DISCONNECTED(-ETIMEDOUT): iw_cxgb4's late close; irdma's CLOSE always carries 0.
    tl = close_with_peer_status("irdma+iw_cxgb4", -errno.ETIMEDOUT)
    conforms(tl, IRDMA_CXGB4)
    breaks(
        tl,
        pair(IW_CXGB4, IRDMA),
        "close-status",
        "peer got DISCONNECTED(-110), expected one of [0]",
    )


def test_the_peer_of_an_irdma_abort_sees_its_own_abort_status() -> None:
    # irdma resets (RST): its own DISCONNECTED 0; a cxgb4 peer's -ECONNRESET.
    conforms(qp_err_close("irdma+iw_cxgb4", local=0, peer=-errno.ECONNRESET), IRDMA_CXGB4)
    conforms(qp_err_close("siw+irdma", local=0, peer=0), SIW_IRDMA)
    breaks(
        qp_err_close("irdma+iw_cxgb4", local=-errno.ECONNRESET, peer=-errno.ECONNRESET),
        IRDMA_CXGB4,
        "close-status",
        "initiator got DISCONNECTED(-104), expected one of [0]",
    )


def test_a_mixed_pairs_link_pull_bound_is_the_later_promise() -> None:
    assert SIW_IRDMA.link_pull_bound_s("admin", traffic=False) == SIW.admin_down_bound_s
    assert IRDMA_CXGB4.link_pull_bound_s("carrier", traffic=True) == max(
        IRDMA.pull_traffic_bound_s or 0, IW_CXGB4.pull_traffic_bound_s or 0
    )
