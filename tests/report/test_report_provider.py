"""environment.properties says what the pair really runs, read at setup (hil.report.plugin)."""

from __future__ import annotations

from types import SimpleNamespace

from hil.report.plugin import provider_properties
from hil.run.provider import HostProvider, Provider


def test_a_siw_fallback_and_a_chelsio_host_are_each_named() -> None:
    provider = Provider(
        (
            HostProvider(
                "t6a", "cxgb4_0", "iw_cxgb4", False, {"ep_timeout_secs": "10"}, "iw_cxgb4"
            ),
            HostProvider("t6b", "siw_eth1", "siw", True, {"tcp_retries2": "5"}, "iw_cxgb4"),
        )
    )
    run = SimpleNamespace(provider=provider)
    assert provider_properties(run, "iw_cxgb4+siw") == {  # type: ignore[arg-type]
        "provider": "iw_cxgb4+siw",
        "profile": "iw_cxgb4+siw",
        "t6a.provider": "iw_cxgb4 on cxgb4_0, ep_timeout_secs=10",
        "t6b.provider": "siw on siw_eth1, tcp_retries2=5 "
        "(siw fallback on t6b: the inventory says iw_cxgb4)",
    }
