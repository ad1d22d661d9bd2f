"""The ``carrier`` pull through hil's real QMP client, against a QMP socket
speaking the protocol in-process (QEMU itself runs in the virtual-lab tests).
The agent is faked at its boundary for the carrier wait after the restore."""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from fake_hosts import FakeHosts, two_host_inventory

from hil.errors import LabError
from hil.host.journal import Journal, replay
from hil.host.linkctl import LinkControl
from hil.inventory.model import LinkEnd, Pull
from hil.reservation import Store


class QmpServer:
    """Accepts QMP sessions on a unix socket; records each command after the handshake."""

    def __init__(self, path: Path, fail: str | None = None) -> None:
        self.path = path
        self.fail = fail
        self.commands: list[tuple[str, dict[str, Any]]] = []
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(path))
        self._sock.listen(4)
        self._sock.settimeout(0.1)  # so that the accept loop sees close() soon
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            conn.settimeout(10)
            with conn, conn.makefile("rwb") as f:
                f.write(b'{"QMP": {"version": {}, "capabilities": []}}\n')
                f.flush()
                for line in f:
                    msg = json.loads(line)
                    if msg["execute"] != "qmp_capabilities":
                        self.commands.append((msg["execute"], msg.get("arguments", {})))
                    if msg["execute"] == self.fail:
                        f.write(b'{"error": {"class": "GenericError", "desc": "injected"}}\n')
                    else:
                        f.write(b'{"return": {}}\n')
                    f.flush()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(timeout=5)
        self._sock.close()


def _carrier_hosts(store: Store, qmp: Path) -> FakeHosts:
    inv = two_host_inventory()
    pull = Pull("carrier", end=LinkEnd("b", "p0"), qmp=str(qmp), qmp_netdev="data0")
    link = dataclasses.replace(inv.links["ab"], pulls=(pull,))
    return FakeHosts(dataclasses.replace(inv, links={"ab": link}), store)


def test_carrier_pull_unplugs_the_qemu_nic_and_restore_plugs_it_back(
    tmp_path: Path, store: Store
) -> None:
    server = QmpServer(tmp_path / "qmp.sock")
    try:
        hosts = _carrier_hosts(store, server.path)
        ctl = LinkControl(hosts, Journal(hosts, store, "lease-1"))  # type: ignore[arg-type]
        ctl.pull("ab")
        assert server.commands == [("set_link", {"name": "data0", "up": False})]
        assert [e.entry["kind"] for e in store.journal_entries("b")] == ["qmp"]
        assert len(ctl.restore("ab").undone) == 1
        assert server.commands[-1] == ("set_link", {"name": "data0", "up": True})
        assert ("wait_link", {"netdev": "eth1", "carrier": True}) in hosts.agents["b"].calls
        assert store.journal_entries("b") == []
    finally:
        server.close()


def test_a_carrier_pull_left_by_a_dead_run_is_replayed(tmp_path: Path, store: Store) -> None:
    server = QmpServer(tmp_path / "qmp.sock")
    try:
        hosts = _carrier_hosts(store, server.path)
        LinkControl(hosts, Journal(hosts, store, "dead")).pull("ab")  # type: ignore[arg-type]
        report = replay(hosts, hosts.inventory.pair("ab"))  # type: ignore[arg-type]
        assert report.undone == ("b: plug the cable of link ab back in (QMP data0)",)
        assert server.commands[-1] == ("set_link", {"name": "data0", "up": True})
    finally:
        server.close()


def test_a_failed_carrier_pull_whose_undo_fails_stays_journaled_for_restore(
    tmp_path: Path, store: Store
) -> None:
    server = QmpServer(tmp_path / "qmp.sock", fail="set_link")
    try:
        hosts = _carrier_hosts(store, server.path)
        ctl = LinkControl(hosts, Journal(hosts, store, "lease-1"))  # type: ignore[arg-type]
        with pytest.raises(LabError, match="set_link failed: injected"):
            ctl.pull("ab")
        # The undo of the half-done pull failed too (same injected error): it is kept.
        assert len(store.journal_entries("b")) == 1
        server.fail = None
        assert len(ctl.restore("ab").undone) == 1
        assert store.journal_entries("b") == []
    finally:
        server.close()
