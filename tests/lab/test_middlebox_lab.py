"""The middlebox lab (``hil lab up --middlebox``): guest M bridges the cable between A and B.

On a three-guest lab booted by this module:

- its inventory passes ``hil inventory check`` (which refuses a middlebox that does not
  face both of the link's ends) and M really bridges the two netdevs it names, with
  GRO, GSO, TSO and LRO off on both;
- an impairment of A to B sits on M's port toward B, not on A, and the suite's own
  effectiveness probe (``ImpairControl.prove``) shows it on the path;
- a bulk TCP stream from A to B enters M as A sent it: no frame M receives is larger
  than one MTU's, so M has nothing to re-segment (GRO off: a merged frame would show
  here, tcpdump taps a received frame after GRO, net/core/dev.c
  ``__netif_receive_skb_core``, Linux 6.1), and B receives every byte.

Cost: the boot of three TCG guests (docs/impairment.md, "The middlebox lab"); it runs
with ``HIL_LAB_KERNEL_TESTS=1`` (kernel_labs.py), not in .ci/run.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_labs import opted_in
from vlab import VirtualLab, booted_lab, lab_pair_run

from hil import tools
from hil.host.hosts import Hosts
from hil.host.impair import ImpairControl, offloads_on
from hil.host.impairkinds import Impairment
from hil.host.netdelay import root_qdisc
from hil.lab.bootfiles import BRIDGE
from hil.lab.inventory import DATA_MTU
from hil.run import PairRun

pytestmark = [pytest.mark.lab, pytest.mark.timeout(1800)]

PORT = 5001  # the TCP sink's on B
STREAM = 4 << 20  # bytes A sends: ~2900 full frames, far more than tcpdump counts
FRAMES = 300  # frames M's tcpdump reads of the stream
ETHERNET_HEADER = 14
FRAME_LENGTH = re.compile(r"ethertype IPv4 \(0x0800\), length (\d+):")
SINK = (
    "import socket, sys\n"
    "s = socket.create_server((sys.argv[1], int(sys.argv[2])))\n"
    "c, _ = s.accept()\n"
    "n = 0\n"
    "while d := c.recv(65536):\n"
    "    n += len(d)\n"
    "print(n)\n"
)
SEND = (
    "import socket, sys, time\n"
    "for _ in range(100):\n"
    "    try:\n"
    "        c = socket.create_connection((sys.argv[1], int(sys.argv[2])))\n"
    "        break\n"
    "    except OSError:\n"
    "        time.sleep(0.2)\n"
    "c.sendall(b'x' * int(sys.argv[3]))\n"
    "c.close()\n"
)


@pytest.fixture(scope="module")
def mbox_lab(pytestconfig: pytest.Config) -> Iterator[VirtualLab]:
    opted_in("docs/impairment.md, 'The middlebox lab'", "of three guests")
    with booted_lab(pytestconfig, middlebox=True) as lab:
        yield lab


@pytest.fixture
def run(mbox_lab: VirtualLab, tmp_path: Path) -> Iterator[PairRun]:
    with lab_pair_run(mbox_lab, tmp_path, "middlebox lab test") as r:
        yield r


def test_the_inventory_check_passes_and_m_bridges_the_netdevs_it_names(
    mbox_lab: VirtualLab,
) -> None:
    inventory = mbox_lab.inventory.path
    out = subprocess.run(
        [sys.executable, "-m", "hil", "inventory", "check", str(inventory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    impair = mbox_lab.pair.link.impair
    assert impair.mode == "middlebox" and impair.host is not None
    with Hosts(mbox_lab.inventory) as hosts:
        agent = hosts.agent(impair.host)
        got = agent.run(tools.argv("ip", "-j", "link", "show", "master", BRIDGE), check=True)
        assert sorted(link["ifname"] for link in json.loads(got.stdout)) == sorted(
            netdev for _, netdev in impair.toward
        )
        for _, netdev in impair.toward:
            features = agent.run(tools.argv("ethtool", "-k", netdev), check=True).stdout
            assert offloads_on(features) == [], f"{netdev}: offloads on"


def test_an_impairment_on_m_is_effective_and_on_m_only(run: PairRun) -> None:
    link = run.pair.link
    ctl = ImpairControl(run.hosts, run.journal)
    point = ctl.point(link, "a>b")
    assert (point.host, point.netdev) == (link.impair.host, link.impair.netdev_toward(link.b))
    a_port = run.hosts.host(link.a.host).rnic(link.a.port).netdev
    with ctl.impaired(link, "a>b", [Impairment("loss", percent=10)]) as probes:
        # prove() ran: it raises "impairment not effective" when the probes show no loss.
        (probe,) = probes
        print(f"{link.name} a>b through {point.host}:{point.netdev}: {probe.to_text()}")
        assert root_qdisc(run.hosts.agent(point.host), point.host, point.netdev)[0] == "netem"
        assert root_qdisc(run.hosts.agent(link.a.host), link.a.host, a_port)[0] != "netem"
    assert not ctl.entries(link)


def test_a_to_b_traffic_passes_m_unsegmented(run: PairRun) -> None:
    link = run.pair.link
    assert link.impair.host is not None
    b_address = run.hosts.host(link.b.host).rnic(link.b.port).address
    assert b_address is not None
    b = str(b_address.ip)
    results: dict[str, str] = {}

    def on(host: str, key: str, argv: list[str]) -> threading.Thread:
        def call() -> None:
            results[key] = run.hosts.session(host).run(argv, timeout=120).stdout

        t = threading.Thread(target=call)
        t.start()
        return t

    toward_a = link.impair.netdev_toward(link.a)  # M's port A's frames enter on
    tcpdump = ["tcpdump", "-i", toward_a, "-Q", "in", "-nn", "-e", "-l", "-c", str(FRAMES)]
    threads = [
        on(link.b.host, "sink", tools.argv("python3", "-c", SINK, b, str(PORT))),
        on(link.impair.host, "m", tools.argv(*tcpdump, "tcp", "port", str(PORT))),
    ]
    time.sleep(3)  # the sink listening and tcpdump capturing before A sends
    on(link.a.host, "send", tools.argv("python3", "-c", SEND, b, str(PORT), str(STREAM))).join()
    for t in threads:
        t.join()
    assert results["sink"].strip() == str(STREAM)
    lengths = [int(n) for n in FRAME_LENGTH.findall(results["m"])]
    assert len(lengths) == FRAMES, results["m"][-2000:]
    print(f"M's ingress {toward_a}: {len(lengths)} frames, longest {max(lengths)} bytes")
    assert max(lengths) <= DATA_MTU + ETHERNET_HEADER
    assert lengths.count(DATA_MTU + ETHERNET_HEADER) > FRAMES // 2  # A's full segments
