"""RDMA operations: the real error paths here, the parsing against a stand-in tool.

This host's kernel has no RDMA, so the real ``rdma`` tool fails; the agent
must say so clearly.  The success path runs against real siw in the virtual
lab (tests/lab); here a stand-in ``rdma`` on PATH prints the JSON the real
tool prints, to check what the agent makes of it and the argv it passes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from agenttest import HOST_PYTHON, StrictAgent

from hil.agent import Agent, AgentCallError, RdmaDevice, RdmaLink

GUID = "5254:00ff:fe12:3456"
DEV_SHOW = [{"ifindex": 0, "ifname": "siw0", "node_type": "rnic", "node_guid": GUID}]
LINK_SHOW = [
    {
        "ifindex": 0,
        "ifname": "siw0",
        "port": 1,
        "state": "ACTIVE",
        "physical_state": "LINK_UP",
        "netdev": "eth1",
        "netdev_index": 3,
    }
]
QP_SHOW = [{"ifindex": 0, "ifname": "siw0", "lqpn": 1}, {"ifindex": 0, "ifname": "siw0", "lqpn": 2}]
CM_ID_SHOW = [{"ifindex": 0, "ifname": "siw0", "state": "LISTEN"}]
# `rdma -j resource show`: each device's summary, ifindex and ifname, then one key per
# type the kernel tracks (iproute2 rdma/res.c `res_no_args_parse_cb`, `res_print_summary`:
# the kernel's names, nldev.c `fill_res_info`).  iproute2 6.1 on a lab guest
# printed [{"ifindex":0,"ifname":"siw_data0","pd":0,"cq":0,"qp":0,"cm_id":0,"mr":0,
# "ctx":0,"srq":0}].
SUMMARY = [
    {
        "ifindex": 0,
        "ifname": "siw0",
        "pd": 1,
        "cq": 2,
        "qp": 2,
        "cm_id": 1,
        "mr": 1,
        "ctx": 1,
        "srq": 0,
    },
    {
        "ifindex": 1,
        "ifname": "siw1",
        "pd": 1,
        "cq": 0,
        "qp": 0,
        "cm_id": 0,
        "mr": 0,
        "ctx": 0,
        "srq": 1,
    },
]
# An older kernel's summary: its fill_res_info names pd, cq, qp, cm_id and mr only (the
# 4.x restrack, before ctx and srq were tracked).
OLD_SUMMARY = [{"ifindex": 0, "ifname": "siw0", "pd": 1, "cq": 2, "qp": 2, "cm_id": 1, "mr": 0}]


def _fake_rdma(summary: list[dict[str, object]]) -> str:
    return f"""#!/bin/sh
echo "$*" >> "$(dirname "$0")/calls"
case "$*" in
"-j dev show") echo '{json.dumps(DEV_SHOW)}' ;;
"-j link show") echo '{json.dumps(LINK_SHOW)}' ;;
"-j resource show qp") echo '{json.dumps(QP_SHOW)}' ;;
"-j resource show cm_id") echo '{json.dumps(CM_ID_SHOW)}' ;;
"-j resource show") echo '{json.dumps(summary)}' ;;
"-j resource show "*) echo '[]' ;;
"link add siw0 type siw netdev eth1") ;;
*) echo "error: no such link: $*" >&2; exit 1 ;;
esac
"""


def _kernel_has_rdma() -> bool:
    return Path("/sys/class/infiniband").is_dir() or (
        shutil.which("rdma") is not None
        and subprocess.run(["rdma", "link", "show"], capture_output=True, timeout=10).returncode
        == 0
    )


@pytest.fixture
def fake_rdma(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[StrictAgent, Path]]:
    """The agent with a stand-in ``rdma`` (its summary: SUMMARY, or the test's parameter)."""
    tool = tmp_path / "rdma"
    tool.write_text(_fake_rdma(getattr(request, "param", SUMMARY)))
    tool.chmod(0o755)
    argv = ["env", f"PATH={tmp_path}:/usr/bin:/bin", HOST_PYTHON]
    with StrictAgent.local(argv, name="fakerdma") as a:
        yield a, tmp_path / "calls"


def test_kernel_without_rdma_netlink_is_a_structured_error(host_agent: Agent) -> None:
    if shutil.which("rdma") is None or _kernel_has_rdma():
        pytest.skip("this kernel has RDMA (or no rdma tool): the error path cannot be reached")
    for call in (host_agent.rdma_links, host_agent.rdma_devices, host_agent.rdma_resources):
        with pytest.raises(
            AgentCallError, match=r"testhost: agent rdma_\w+: the kernel has no RDMA netlink"
        ) as e:
            call()
        assert e.value.kind == "rdma_unavailable"
    with pytest.raises(AgentCallError, match="no RDMA netlink") as e:
        host_agent.add_siw("siwtest0", "lo")


def test_missing_rdma_tool_is_a_structured_error() -> None:
    with Agent.local(["env", "PATH=/nonexistent", HOST_PYTHON], name="bare") as agent:
        with pytest.raises(
            AgentCallError, match=r"bare: agent rdma_links: the rdma tool is not installed"
        ) as e:
            agent.rdma_links()
    assert e.value.kind == "rdma_unavailable"


def test_devices_links_and_resource_counts_from_rdma_json(
    fake_rdma: tuple[StrictAgent, Path],
) -> None:
    agent, calls = fake_rdma
    assert agent.rdma_devices() == [RdmaDevice("siw0", 0, "rnic", None, GUID)]
    assert agent.rdma_links() == [RdmaLink("siw0", 1, "ACTIVE", "LINK_UP", "eth1")]
    counts = {"cm_id": 1, "qp": 2, "cq": 2, "mr": 1, "pd": 2, "ctx": 1, "srq": 1}
    assert agent.rdma_resources() == counts
    # One rdma process for all the counts: the devices' summaries, summed.
    assert calls.read_text().splitlines().count("-j resource show") == 1
    assert agent.rdma_resources(["qp", "srq"]) == {"qp": 2, "srq": 1}
    with pytest.raises(AgentCallError, match=r"unknown RDMA resource types \['xrcd'\]"):
        agent.rdma_resources(["xrcd"])
    assert {"rdma_devices", "rdma_links", "rdma_resources"} <= agent.checked


@pytest.mark.parametrize("fake_rdma", [OLD_SUMMARY], indirect=True)
def test_a_type_the_summary_does_not_list_is_left_out_not_zero(
    fake_rdma: tuple[StrictAgent, Path],
) -> None:
    agent, _calls = fake_rdma
    assert agent.rdma_resources() == {"cm_id": 1, "qp": 2, "cq": 2, "mr": 0, "pd": 1}
    assert agent.rdma_resources(["srq", "qp"]) == {"qp": 2}


@pytest.mark.parametrize("fake_rdma", [[]], indirect=True)
def test_no_device_holds_nothing_of_any_type(fake_rdma: tuple[StrictAgent, Path]) -> None:
    agent, _calls = fake_rdma
    assert agent.rdma_resources() == dict.fromkeys(
        ("cm_id", "qp", "cq", "mr", "pd", "ctx", "srq"), 0
    )


def test_resource_rows_are_the_tools_json_rows(fake_rdma: tuple[StrictAgent, Path]) -> None:
    agent, calls = fake_rdma
    assert agent.rdma_resource_rows("qp") == QP_SHOW
    assert agent.rdma_resource_rows("cm_id") == CM_ID_SHOW
    assert agent.rdma_resource_rows("mr") == []
    with pytest.raises(AgentCallError, match=r"unknown RDMA resource type 'xrcd'"):
        agent.rdma_resource_rows("xrcd")
    assert "rdma_resource_rows" in agent.checked
    assert "-j resource show qp" in calls.read_text().splitlines()


def test_siw_add_and_delete_pass_the_right_argv(fake_rdma: tuple[StrictAgent, Path]) -> None:
    agent, calls = fake_rdma
    agent.add_siw("siw0", "eth1")
    with pytest.raises(
        AgentCallError, match=r"rdma link delete siw0 exited 1: error: no such link"
    ) as e:
        agent.delete_rdma_link("siw0")
    assert e.value.kind == "command_failed" and e.value.details["status"] == 1
    assert calls.read_text().splitlines() == [
        "link add siw0 type siw netdev eth1",
        "link delete siw0",
    ]
    assert "rdma_add_siw" in agent.checked
