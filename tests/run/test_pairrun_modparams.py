"""A pair run on the recorded T6 pair pins the link's module parameters (and the
request's overrides) before it reads the provider, so the profile follows them, and
restores them when it closes; on the recorded E810 pair, the link's devlink parameters."""

from __future__ import annotations

import pytest
from fake_hosts import FakeHosts, e810_inventory, t6_inventory

from hil.errors import InputError
from hil.host.devlinkparams import read_devlink
from hil.inventory.model import PinnedDevlink, PinnedParam
from hil.reservation import Store
from hil.run import PairRequest, PairRun

TIMEOUT = "/sys/module/iw_cxgb4/parameters/ep_timeout_secs"
PINNED = (PinnedParam("iw_cxgb4", "ep_timeout_secs", "10"),)


def _value(hosts: FakeHosts, host: str) -> str:
    return hosts.recorded(host).file(TIMEOUT).read_text().strip()


def test_the_links_parameters_are_pinned_before_the_provider_is_read_and_restored(
    store: Store, fakes: dict[str, FakeHosts]
) -> None:
    with PairRun(t6_inventory(module_params=PINNED), store, PairRequest(pair="t6")) as run:
        hosts = fakes["hosts"]
        assert [_value(hosts, h) for h in ("t6a", "t6b")] == ["10", "10"]
        assert run.pinned == {h: {"iw_cxgb4.ep_timeout_secs": "10"} for h in ("t6a", "t6b")}
        assert [h.settings["ep_timeout_secs"] for h in run.provider.hosts] == ["10", "10"]
    assert [_value(hosts, h) for h in ("t6a", "t6b")] == ["60", "60"]


def test_an_override_replaces_the_links_value(store: Store, fakes: dict[str, FakeHosts]) -> None:
    request = PairRequest(pair="t6", module_params=("iw_cxgb4.ep_timeout_secs=7",))
    with PairRun(t6_inventory(module_params=PINNED), store, request) as run:
        assert run.module_params == (PinnedParam("iw_cxgb4", "ep_timeout_secs", "7"),)
        assert _value(fakes["hosts"], "t6b") == "7"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "siw.x=1",
            "module parameter 'siw.x=1': siw has no module parameters",
        ),
        (
            "iw_cxgb4.c4iw_wr_log=1",
            "module parameter 'iw_cxgb4.c4iw_wr_log=1': iw_cxgb4.c4iw_wr_log can only change "
            "at module load",
        ),
    ],
)
def test_a_bad_override_fails_before_anything_changes(
    store: Store, fakes: dict[str, FakeHosts], override: str, message: str
) -> None:
    request = PairRequest(pair="t6", module_params=(override,))
    with pytest.raises(InputError) as e, PairRun(t6_inventory(), store, request):
        pass
    assert str(e.value).startswith(message)
    hosts = fakes["hosts"]
    assert [m for m, _ in hosts.agent("t6a").calls if m != "links"] == []


def test_the_links_devlink_parameters_are_pinned_recorded_and_restored(
    store: Store, fakes: dict[str, FakeHosts]
) -> None:
    pins = (PinnedDevlink("local_forwarding", "disabled"),)

    def forwarding(hosts: FakeHosts, host: str) -> str:
        return read_devlink(hosts.agent(host), host, "pci/0000:17:00.0")["local_forwarding"][0]

    with PairRun(e810_inventory(devlink_params=pins), store, PairRequest(pair="e810")) as run:
        hosts = fakes["hosts"]
        assert run.pinned == {
            h: {"devlink.local_forwarding": "disabled"} for h in ("e810a", "e810b")
        }
        assert [forwarding(hosts, h) for h in ("e810a", "e810b")] == ["disabled", "disabled"]
        assert run.provider.driver == "irdma"
    assert [forwarding(hosts, h) for h in ("e810a", "e810b")] == ["enabled", "enabled"]
