"""A fake of the agent boundary for the CM engine's controller side.

``FakeCMWorld`` plays two hosts' agents answering ``cm_*`` calls the way the
real agent and its workers do on siw (events with status and private data,
ECONNREFUSED with no listener, REJECTED -104, DISCONNECTED 0 on both sides),
each host with its own clock, so sequences, endpoints, recordings and the
clock offset can be tested without a lab.  The real thing is tested in
test_sequences_lab.py.
"""

from __future__ import annotations

import errno
import ipaddress
import itertools
from dataclasses import dataclass, field
from typing import Any

from hil.agent import protocol
from hil.agent.client import AgentCallError
from hil.agent.remote.cm.payload import last_lengths
from hil.agent.types import CommandResult, KernelLog
from hil.cm.clock import controller_us
from hil.inventory.model import Host, Link, LinkEnd, Pair, Rnic, SshConfig
from hil.judge.profiles import SIW

ADDRS = {"h0": "198.18.0.1", "h1": "198.18.0.2"}
SKEW_US = {"h0": -5_000_000, "h1": 7_000_000}  # host clock = controller clock + skew
WILDCARD = "0.0.0.0"


@dataclass
class Cid:
    """One fake cm_id."""

    ep: FakeEp
    handle: int
    state: str = "idle"
    peer: Cid | None = None
    listen_on: tuple[str, int] | None = None
    local: str = ""  # "ip:port", as the real agent reports an id's addresses
    remote: str = ""
    qpn: int | None = None
    depths: tuple[int, int] = (1, 1)  # (IRD, ORD): asked on connect, negotiated once up


@dataclass
class FakeEp:
    """One fake endpoint worker: its ids and its log."""

    host: FakeAgent
    number: int
    log: list[protocol.CMLogEntry] = field(default_factory=list)
    ids: dict[int, Cid] = field(default_factory=dict)
    next_handle: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def new_id(self) -> Cid:
        cid = Cid(self, next(self.next_handle))
        self.ids[cid.handle] = cid
        return cid

    def event(
        self,
        cid: Cid,
        kind: protocol.CMEventType,
        status: int = 0,
        pdata: bytes = b"",
        listen: Cid | None = None,
        depths: tuple[int, int] = (0, 0),
    ) -> None:
        """Log an event; ``depths``: its responder_resources and initiator_depth."""
        self.log.append(
            {
                "kind": "event",
                "type": kind,
                "status": status,
                "id": cid.handle,
                "listen_id": listen.handle if listen else None,
                "private_data": pdata.hex(),
                "host_t_us": self.host.now(),
                "local": cid.local,
                "remote": cid.remote,
                "responder_resources": depths[0],
                "initiator_depth": depths[1],
                "seq": len(self.log) + 1,
            }
        )


class FakeAgent:
    """One host's agent: cm_* calls, resource counts and an empty kernel log."""

    def __init__(self, world: FakeCMWorld, name: str) -> None:
        self.world, self.name = world, name
        self.bad_payload: set[str] = set()  # ops whose payload checks op_payload fails
        self.flush_twice = False  # op_flushed completes a receive twice
        self.last_late = False  # op_last_receives polls the last SEND past DISCONNECTED
        self.eps: dict[int, FakeEp] = {}
        self.numbers = itertools.count(1)
        self.calls: list[str] = []

    @property
    def host(self) -> str:
        return self.name

    def now(self) -> int:
        return controller_us() + SKEW_US[self.name]

    def call(self, method: str, timeout: float = 30.0, **params: Any) -> Any:
        self.calls.append(method if method != "cm_call" else params["op"])
        if method == "cm_call":
            op = getattr(self, "op_" + params["op"])
            return op(self.eps[params["endpoint"]], **params["params"])
        return getattr(self, method)(**params)

    # -- agent methods ---------------------------------------------------------

    def cm_now(self) -> protocol.ClockReply:
        return {"t_us": self.now()}

    def clock_echo(self, address: str, port: int) -> protocol.ClockEchoReply:
        return {"answered": 0}  # clock_probe below plays both ends

    def clock_probe(
        self, src: str, dst: str, port: int, count: int, budget_s: float
    ) -> protocol.ClockProbeReply:
        """Probes to the other host (at ``dst``, of either family): 40 µs one way, 10 µs
        turnaround."""
        peer = next(a for name, a in self.world.agents.items() if name != self.name)
        samples = []
        for _ in range(count):
            # Both stamps from one reading: a scheduling delay between two readings would
            # shift each window and narrow their intersection (seen in .ci/run under load).
            now = controller_us()
            t1, t2 = now + SKEW_US[self.name], now + SKEW_US[peer.name] + 40
            samples.append([t1, t2, t2 + 10, t1 + 90])
        return {"samples": samples, "sent": count}

    def cm_open(self) -> protocol.EndpointReply:
        n = next(self.numbers)
        self.eps[n] = FakeEp(self, n)
        return {"endpoint": n, "pid": 1000 + n}

    def cm_close(self, endpoint: int) -> protocol.CloseReply:
        self._drop_all(self.eps.pop(endpoint))
        return {"status": 0, "killed": False}

    def cm_kill(self, endpoint: int) -> protocol.KillReply:
        t_us = self.now()
        self._drop_all(self.eps.pop(endpoint))
        return {"t_us": t_us, "pid": 1000 + endpoint}

    def _drop_all(self, ep: FakeEp) -> None:
        for cid in list(ep.ids.values()):
            self._destroy(cid)

    def rdma_resources(self, types: list[str] | None = None) -> dict[str, int]:
        n = sum(len(ep.ids) for ep in self.eps.values())
        return {"cm_id": n, "qp": 0, "cq": 0, "mr": 0}

    def run(self, argv: list[str], timeout: float = 60.0, check: bool = False) -> CommandResult:
        """No command runs on the fake host but what a test scripts here (monkeypatch)."""
        raise AssertionError(f"the fake CM host runs no commands a test did not script: {argv}")

    def rdma_resource_rows(self, kind: str, timeout: float | None = None) -> list[dict[str, Any]]:
        """Only QPs: one per id that has one, ERR once closed."""
        assert kind == "qp", kind
        return [
            {"ifname": "siw_data0", "lqpn": c.qpn, "state": "ERR" if c.state == "closed" else "RTS"}
            for ep in self.eps.values()
            for c in ep.ids.values()
            if c.qpn is not None
        ]

    def kmsg_cursor(self) -> int:
        return 1

    def kmsg_read(self, cursor: int) -> KernelLog:
        return KernelLog((), 0)

    def kmsg_close(self, cursor: int) -> None:
        return None

    # -- worker ops ----------------------------------------------------------

    def _timed(self) -> protocol.TimedReply:
        return {"t_us": self.now(), "us": 50}

    def _rdma_error(self, op: str, err: int, handle: int | None = None) -> AgentCallError:
        details: protocol.CMErrorDetails = {
            "errno": err,
            "errno_name": errno.errorcode[err],
            "t_us": self.now(),
            "us": 40,
        }
        if handle is not None:  # the worker names an id only when it made one
            details["handle"] = handle
        return AgentCallError(
            self.name, "cm_call", "rdma", f"cm {op}: {errno.errorcode[err]}", dict(details)
        )

    def _pdata_taken(self, call: str, private_data: str, handle: int) -> None:
        """Refuse private data longer than siw's ``call`` takes, EINVAL (its profile)."""
        if len(private_data) // 2 > SIW.private_data.taken_by(call):
            raise self._rdma_error(call, errno.EINVAL, handle)

    def _depths_taken(self, call: str, ird: int, ord: int, handle: int) -> tuple[int, int]:
        """``ird``, ``ord`` (255: the maximum); past siw's maximum EINVAL (its profile)."""
        limits = SIW.ird_ord
        assert limits is not None
        if (ird != 255 and ird > limits.max_ird) or (ord != 255 and ord > limits.max_ord):
            raise self._rdma_error(call, errno.EINVAL, handle)
        return (limits.max_ird if ird == 255 else ird, limits.max_ord if ord == 255 else ord)

    def op_listen(
        self,
        ep: FakeEp,
        address: str,
        port: int,
        backlog: int,
        auto: protocol.AutoAnswer | None,
        private_data: str,
    ) -> protocol.IdTimedReply:
        # rdma_cm's cma_check_port (6.1): the wildcard shares a port with no other listener.
        if any(p == port and WILDCARD in (a, address) for a, p in self.world.listeners):
            raise self._rdma_error("listen", errno.EADDRNOTAVAIL)
        cid = ep.new_id()
        cid.state, cid.listen_on = "listen", (address, port)
        self.world.listeners[(address, port)] = (cid, auto)
        return {**self._timed(), "id": cid.handle}

    def op_connect(
        self,
        ep: FakeEp,
        dst: str,
        port: int,
        src: str | None,
        private_data: str,
        resolve_timeout: float = 10.0,
        ird: int = 1,
        ord: int = 1,
    ) -> protocol.ConnectReply:
        cid = ep.new_id()
        cid.depths = self._depths_taken("connect", ird, ord, cid.handle)
        cid.local, cid.remote = f"{src or ADDRS[self.name]}:{40000 + cid.handle}", f"{dst}:{port}"
        ep.event(cid, "ADDR_RESOLVED")
        ep.event(cid, "ROUTE_RESOLVED")
        found = self.world.listeners.get((dst, port)) or self.world.listeners.get((WILDCARD, port))
        if found is None:
            raise self._rdma_error("connect", errno.ECONNREFUSED, cid.handle)
        self._pdata_taken("connect", private_data, cid.handle)
        qp: protocol.QPInfo = {"addr": 1, "rkey": 2, "qp_num": 3, "length": 64}
        result: protocol.ConnectReply = {
            **self._timed(),
            "id": cid.handle,
            "qp": qp,
            "local": cid.local,
            "remote": cid.remote,
        }
        cid.qpn = 3
        self.world.tick()
        listener, auto = found
        child = listener.ep.new_id()
        cid.state, child.state, cid.peer, child.peer = "sent", "recv", child, cid
        child.local, child.remote = cid.remote, cid.local
        listener.ep.event(
            child,
            "CONNECT_REQUEST",
            pdata=bytes.fromhex(private_data),
            listen=listener,
            depths=(cid.depths[1], cid.depths[0]),  # the request, mirrored (cma.c:2556)
        )
        if auto == "accept":
            listener.ep.host.op_accept(listener.ep, child.handle, "")
        return result

    def op_accept(
        self, ep: FakeEp, id: int, private_data: str, ird: int = 1, ord: int = 1
    ) -> protocol.AcceptReply:
        child = ep.ids[id]
        assert child.peer is not None
        if child.peer.state == "gone":  # the peer gave the connect up: as siw_accept
            raise self._rdma_error("accept", errno.ECONNRESET, id)
        self._pdata_taken("accept", private_data, id)
        ird, ord = self._depths_taken("accept", ird, ord, id)
        # siw's relaxed negotiation: the IRD raised to the initiator's ORD, the ORD lowered
        # to its IRD; the initiator mirrors the reply's words (swapped: the mutant's).
        child.depths = max(ird, child.peer.depths[1]), min(ord, child.peer.depths[0])
        reply = child.depths if self.world.swapped_reply else child.depths[::-1]
        child.peer.depths = (reply[0], reply[1])
        qp: protocol.QPInfo = {"addr": 4, "rkey": 5, "qp_num": 6, "length": 64}
        result: protocol.AcceptReply = {
            **self._timed(),
            "qp": qp,
            "local": child.local,
            "remote": child.remote,
        }
        child.state = child.peer.state = "up"
        child.qpn = 6
        # ESTABLISHED: initiator_depth the IRD, responder_resources the ORD (siw, cma.c:2504).
        child.ep.event(child, "ESTABLISHED", depths=child.depths[::-1])
        # The active side's ESTABLISHED carries the accept's private data (siw, lab).
        child.peer.ep.event(
            child.peer,
            "ESTABLISHED",
            pdata=bytes.fromhex(private_data),
            depths=child.peer.depths[::-1],
        )
        return result

    def op_reject(self, ep: FakeEp, id: int, private_data: str) -> protocol.TimedReply:
        self._pdata_taken("reject", private_data, id)
        result = self._timed()
        child = ep.ids[id]
        assert child.peer is not None
        child.peer.ep.event(child.peer, "REJECTED", -errno.ECONNRESET, bytes.fromhex(private_data))
        child.state = child.peer.state = "idle"
        return result

    def op_disconnect(self, ep: FakeEp, id: int) -> protocol.TimedReply:
        result = self._timed()
        self._close(ep.ids[id])
        return result

    op_qp_err = op_disconnect

    def op_write(
        self, ep: FakeEp, id: int, remote: protocol.RemoteBuffer, length: int, wait: float
    ) -> protocol.WriteReply:
        """As siw: the WRITE completes once sent; one outside the acceptor's buffer
        (addr 4, rkey 5, 64 bytes: op_accept's) ends the connection on both sides."""
        result: protocol.WriteReply = {
            **self._timed(),
            "wr_id": 1,
            "wc_status": 0,
            "wc_status_name": "IBV_WC_SUCCESS",
            "vendor_err": 0,
        }
        if remote["rkey"] != 5 or not 4 <= remote["addr"] <= 4 + 64 - length:
            self.world.tick()
            self._close(ep.ids[id])
        return result

    def op_payload(
        self,
        ep: FakeEp,
        id: int,
        first: bool,
        peer: protocol.QPInfo,
        peer_address: str,
        seed: int = 0,
        mtu: int = 0,
        wait: float = 10.0,
    ) -> protocol.PayloadReply:
        """As a sound end: every op at every size (those that fit the 64-byte buffers)
        checked and right, but the ops in ``bad_payload`` (this host's checks of them
        wrong at offset 1, expected 0x11, got 0xee)."""
        if id not in ep.ids:
            raise self._rdma_error("payload", errno.EBADF)
        sizes = [1, peer["length"]]
        checks: list[protocol.PayloadCheck] = []
        for op in protocol.PAYLOAD_OPS:
            for n in sizes:
                bad = op in self.bad_payload and n > 1
                checks.append(
                    {
                        "op": op,
                        "size": n,
                        "ok": not bad,
                        "offset": 1 if bad else -1,
                        "expected": 0x11 if bad else -1,
                        "got": 0xEE if bad else -1,
                    }
                )
        return {**self._timed(), "mtu": 1500, "sizes": sizes, "checks": checks, "error": None}

    def op_flushed(self, ep: FakeEp, id: int, wait: float = 10.0) -> protocol.FlushedReply:
        """As siw after ibv_modify_qp to ERR: each of the two receives posted flushed
        once, or ``flush_twice`` (the first one completed twice)."""
        if id not in ep.ids:
            raise self._rdma_error("flushed", errno.EBADF)
        posted = [1, 2]
        done = [1, 1, 2] if self.flush_twice else posted
        completions: list[protocol.FlushedWC] = [{"wr_id": w, "status": 5} for w in done]
        return {**self._timed(), "posted": posted, "completions": completions, "error": None}

    def op_last_sends(
        self, ep: FakeEp, id: int, count: int, seed: int = 0, wait: float = 10.0
    ) -> protocol.LastSendsReply:
        """As a sound end: every SEND posted and completed."""
        if id not in ep.ids:
            raise self._rdma_error("last_sends", errno.EBADF)
        return {**self._timed(), "lengths": last_lengths(count), "error": None}

    def op_last_receives(
        self, ep: FakeEp, id: int, count: int, seed: int = 0, wait: float = 10.0
    ) -> protocol.LastReceivesReply:
        """As a sound end: every SEND received, right and in order, each polled before
        the DISCONNECTED; the last one polled late when ``last_late``."""
        if id not in ep.ids:
            raise self._rdma_error("last_receives", errno.EBADF)
        lengths, now = last_lengths(count), self.now()
        done: list[protocol.LastWC] = [
            {"status": 0, "byte_len": n, "poll_us": now + i} for i, n in enumerate(lengths)
        ]
        if self.last_late:
            done[-1]["poll_us"] = now + 5000
        checks: list[protocol.PayloadCheck] = [
            {"op": "send", "size": n, "ok": True, "offset": -1, "expected": -1, "got": -1}
            for n in lengths
        ]
        return {
            **self._timed(),
            "lengths": lengths,
            "completions": done,
            "event_us": now + 100,
            "seen_us": now + 150,
            "checks": checks,
            "error": None,
        }

    def op_query_qp(self, ep: FakeEp, id: int) -> protocol.QueryQPReply:
        """As siw_query_qp: max_rd_atomic the IRD, max_dest_rd_atomic the ORD, each a
        power of two."""
        ird, ord = (1 << (d - 1).bit_length() if d else 0 for d in ep.ids[id].depths)
        return {**self._timed(), "max_rd_atomic": ird, "max_dest_rd_atomic": ord}

    def op_reads(
        self,
        ep: FakeEp,
        id: int,
        reader: bool,
        peer: protocol.QPInfo,
        count: int,
        seed: int = 0,
        wait: float = 10.0,
    ) -> protocol.ReadsReply:
        """As a sound end: every READ's slice right."""
        size = peer["length"] // max(count, 1)
        ok: protocol.PayloadCheck = {
            "op": "read", "size": size, "ok": True, "offset": -1, "expected": -1, "got": -1
        }  # fmt: skip
        checks = [ok] * count if reader else []
        return {**self._timed(), "count": count, "size": size, "checks": checks, "error": None}

    def _close(self, cid: Cid) -> None:
        for c in (cid, cid.peer):
            if c is not None and c.state == "up":
                c.state = "closed"
                c.ep.event(c, "DISCONNECTED")

    def _destroy(self, cid: Cid) -> None:
        if cid.state == "recv" and cid.peer is not None and cid.peer.state == "sent":
            # A request destroyed unanswered is rejected (iwcm.c destroy_cm_id: iw_cm_reject).
            cid.peer.state = "idle"
            cid.peer.ep.event(cid.peer, "REJECTED", -errno.ECONNRESET)
        if cid.peer is not None and cid.peer.state == "up":
            cid.peer.state = "closed"
            cid.peer.ep.event(cid.peer, "DISCONNECTED")
        if cid.listen_on:
            self.world.listeners.pop(cid.listen_on, None)
        cid.ep.ids.pop(cid.handle, None)

    def op_destroy(
        self, ep: FakeEp, id: int, order: protocol.DestroyOrder = "qp_first"
    ) -> protocol.DestroyReply:
        if id not in ep.ids:
            raise self._rdma_error("destroy", errno.EBADF)
        timed = self._timed()
        result: protocol.DestroyReply = {"t_us": timed["t_us"], "us": timed["us"]}
        if order != "qp_first":
            result["qp_us"] = 30
        cid = ep.ids[id]
        self._destroy(cid)
        cid.state = "gone"
        return result

    def op_scenario(
        self,
        ep: FakeEp,
        steps: list[protocol.ScenarioStep],
        after: int = 0,
        linger_s: float = 0.0,
        deadline_s: float = 30.0,
        start_us: int | None = None,
    ) -> protocol.ScenarioReply:
        """Each step at once, in order (no trigger but the previous step's end), as
        the worker's script runs them (cm/script.py): results, and the log since ``after``."""
        names: dict[str, int] = {}
        results: list[protocol.ScenarioStepResult] = []
        start = self.now()
        for i, step in enumerate(steps):
            params = dict(step.get("params", {}))
            if "id_of" in step or "id" in step:
                params["id"] = names[step["id_of"]] if "id_of" in step else step["id"]
            res: protocol.ScenarioStepResult = {"index": i, "op": step["op"], "result": "ok"}
            try:
                reply = getattr(self, "op_" + step["op"])(ep, **params)
            except AgentCallError as e:
                res.update({"result": e.details["errno_name"], "t_us": e.details["t_us"], "us": 40})
                results.append(res)
                continue
            res.update({"t_us": reply["t_us"], "us": reply["us"]})
            res["id"] = reply.get("id", params.get("id"))
            if "name" in step:
                res["name"] = step["name"]
                names[step["name"]] = res["id"]
            if "qp_us" in reply:
                res["reply"] = {"qp_us": reply["qp_us"]}
            results.append(res)
        return {"t_us": start, "end_us": self.now(), "steps": results, "log": ep.log[after:]}

    def op_events(
        self,
        ep: FakeEp,
        after: int,
        wait: float,
        types: list[protocol.CMEventType] | None,
        id: int | None,
    ) -> protocol.EventsReply:
        return {"log": ep.log[after:], "t_us": self.now()}

    def op_handles(self, ep: FakeEp) -> protocol.HandlesReply:
        return {"ids": sorted(ep.ids)}

    def op_pause(self, ep: FakeEp, on: bool) -> protocol.TimedReply:
        return self._timed()


class FakeCMWorld:
    """Two fake hosts, h0 and h1, joined by link l01; ``hosts`` stands for hil.host.hosts.Hosts."""

    def __init__(self) -> None:
        self.listeners: dict[tuple[str, int], tuple[Cid, str | None]] = {}
        self.agents = {name: FakeAgent(self, name) for name in ADDRS}
        self.swapped_reply = False  # the accept's IRD/ORD words swapped (ird-ord-swapped)
        hosts = [
            Host(
                name,
                SshConfig(host="127.0.0.1"),
                rnics=(
                    Rnic("p0", "data0", "siw", "siw_data0", ipaddress.ip_interface(f"{addr}/24")),
                ),
            )
            for name, addr in ADDRS.items()
        ]
        link = Link("l01", LinkEnd("h0", "p0"), LinkEnd("h1", "p0"))
        self.pair = Pair(link, hosts[0], hosts[1])

    def tick(self) -> None:
        """Let the controller clock move on (events come after the call that caused them)."""
        start = controller_us()
        while controller_us() == start:
            pass

    def agent(self, name: str) -> FakeAgent:
        return self.agents[name]
