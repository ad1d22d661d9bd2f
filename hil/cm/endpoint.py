"""The controller's proxy of one CM endpoint: a worker process on a host, via its agent.

Every call is recorded (into a :class:`~hil.cm.interfaces.Recorder`: the
run's :class:`~hil.cm.recording.Recording`) as an
:class:`~hil.judge.timeline.Action` stamped with the HOST's time of the call
(not the SSH round trip) moved onto the controller's time base, and every
event the endpoint's channel delivered as an :class:`~hil.judge.timeline.Event`.

A call that fails in librdmacm (``rdma_connect`` -> ECONNREFUSED) is a
result, not an exception: it is recorded with the errno's name and returned
as an :class:`Outcome` whose ``ok`` is False.  So is a call that overran its
timeout (result ``"timeout"``).  Lost agents and dead workers raise.

cm_ids are named ``"<side>:<endpoint>.<handle>"`` (``"b:2.4"``), unique
within a run even with several endpoints on one host.

Requests and replies are those ``hil.agent.protocol`` declares (``wire``
here): each reply is decoded against its declaration before it is used.

The calls, names, time and the event log are in :mod:`hil.cm.endpointcore`;
here are the CM operations and the worker's lifetime.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from hil.agent import protocol as wire
from hil.agent.client import call_bound, request
from hil.cm.endpointcore import EndpointCore, Outcome, P, T
from hil.errors import RemoteError
from hil.judge.timeline import Action, ClockOffset

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.cm.interfaces import Recorder

__all__ = ["OPEN_TIMEOUT", "Endpoint", "Outcome"]

# What a connect's or accept's action shows of its reply: the id's rdma_get_local_addr
# and rdma_get_peer_addr, which the contract's event-addresses-are-the-ids compares with
# its events'.
ADDRESSES = ("local", "remote")
OPEN_TIMEOUT = 30.0  # python start and librdmacm load in a TCG guest (or the agent layer's)
# A payload check's whole run past its one wait that failed (its steps took 0.1-0.5 s on
# the lab's TCG guests; docs/contract.md, "Payload").
PAYLOAD_SLACK_S = 30.0


class Endpoint(EndpointCore):
    """One CM endpoint (an event channel in its own process) on one side of the pair."""

    @classmethod
    def open(
        cls, rec: Recorder, side: str, host: str, agent: Agent, offset: ClockOffset
    ) -> Endpoint:
        """Start a worker with its own event channel on ``host``."""
        # A raised agent call layer (--hil-timeout-agent: a debug lab's) raises this too.
        got = request(agent, wire.CM_OPEN, wire.NoParams(), max(OPEN_TIMEOUT, call_bound(None)))
        return cls(rec, side, host, agent, offset, got["endpoint"], got["pid"])

    # -- CM operations -------------------------------------------------------

    def listen(
        self,
        address: str,
        port: int,
        backlog: int = 16,
        auto: wire.AutoAnswer | None = None,
        private_data: bytes = b"",
    ) -> Outcome:
        """A listener; ``auto="accept"|"reject"`` answers its requests in the worker."""
        params = wire.ListenParams(
            address=address, port=port, backlog=backlog, auto=auto, private_data=private_data.hex()
        )
        return self.act(
            "listen",
            wire.OP_LISTEN,
            params,
            record={"address": address, "port": port, "backlog": backlog, "auto": auto},
        )

    def connect(
        self,
        dst: str,
        port: int,
        src: str | None = None,
        private_data: bytes = b"",
        timeout: float = 10.0,
        listener: bool = True,
        ird: int = 1,
        ord: int = 1,
    ) -> Outcome:
        """Resolve, make a QP and rdma_connect asking for ``ird`` and ``ord``;
        ``listener=False`` marks a no-listener try."""
        params = wire.ConnectParams(
            dst=dst,
            port=port,
            src=src,
            private_data=private_data.hex(),
            resolve_timeout=timeout,
            ird=ird,
            ord=ord,
        )
        return self.act(
            "connect",
            wire.OP_CONNECT,
            params,
            record={
                "dst": dst,
                "port": port,
                "private_data": private_data.hex(),
                "listener": listener,
                "ird": ird,
                "ord": ord,
            },
            keep=ADDRESSES,
            timeout=timeout + 5,
        )

    def accept(self, cm_id: str, private_data: bytes = b"", ird: int = 1, ord: int = 1) -> Outcome:
        """rdma_accept a CONNECT_REQUEST (with a fresh QP) with ``ird`` and ``ord``."""
        params = wire.AcceptParams(
            id=self.handle(cm_id), private_data=private_data.hex(), ird=ird, ord=ord
        )
        return self.act(
            "accept",
            wire.OP_ACCEPT,
            params,
            cm_id,
            record={"private_data": private_data.hex(), "ird": ird, "ord": ord},
            keep=ADDRESSES,
        )

    def reject(self, cm_id: str, private_data: bytes = b"") -> Outcome:
        """rdma_reject a CONNECT_REQUEST with private data."""
        params = wire.AnswerParams(id=self.handle(cm_id), private_data=private_data.hex())
        return self.act(
            "reject", wire.OP_REJECT, params, cm_id, record={"private_data": private_data.hex()}
        )

    def disconnect(self, cm_id: str) -> Outcome:
        """rdma_disconnect: orderly close."""
        return self.act("disconnect", wire.OP_DISCONNECT, self._id(cm_id), cm_id)

    def qp_err(self, cm_id: str) -> Outcome:
        """Move the QP to ERR: abortive close."""
        return self.act("qp_err", wire.OP_QP_ERR, self._id(cm_id), cm_id)

    def destroy(self, cm_id: str, timeout: float | None = None) -> Outcome:
        """rdma_destroy_id; the action's duration is how long it blocked on the host."""
        params = wire.DestroyParams(id=self.handle(cm_id))
        return self.act("destroy", wire.OP_DESTROY, params, cm_id, timeout=timeout)

    def stream_start(
        self,
        cm_id: str,
        mode: wire.StreamMode = "write",
        size: int = 4096,
        depth: int = 4,
        remote: Mapping[str, int] | None = None,
    ) -> Outcome:
        """Keep SENDs or RDMA WRITEs in flight on the connection (``sink`` receives);
        ``remote`` is the peer's buffer (``addr``, ``rkey``) for RDMA WRITEs."""
        buffer = wire.RemoteBuffer(addr=remote["addr"], rkey=remote["rkey"]) if remote else None
        params = wire.StreamStartParams(
            id=self.handle(cm_id), mode=mode, size=size, depth=depth, remote=buffer
        )
        return self.act(
            "traffic", wire.OP_STREAM_START, params, cm_id, record={"mode": mode, "size": size}
        )

    def write(
        self,
        cm_id: str,
        addr: int,
        rkey: int,
        length: int = 64,
        timeout: float = 10.0,
        **note: str,
    ) -> Outcome:
        """One signaled RDMA WRITE of ``length`` bytes to ``addr``/``rkey`` and its completion.

        Recorded as action ``write`` whose params show the target, ``note``
        (``how="bad_rkey"``) and the completion's ``wc_status`` and
        ``wc_status_name``; no completion within ``timeout`` is result ETIMEDOUT.
        """
        params = wire.WriteParams(
            id=self.handle(cm_id),
            remote=wire.RemoteBuffer(addr=addr, rkey=rkey),
            length=length,
            wait=timeout,
        )
        return self.act(
            "write",
            wire.OP_WRITE,
            params,
            cm_id,
            record={"addr": addr, "rkey": rkey, "length": length, **note},
            keep=("wc_status", "wc_status_name", "vendor_err"),
            timeout=timeout + 5,
        )

    def payload(
        self,
        cm_id: str,
        first: bool,
        peer: Mapping[str, int],
        peer_address: str,
        seed: int,
        wait: float = 10.0,
    ) -> Outcome:
        """This end's part of the payload check (both ends run theirs at once): recorded
        as action ``payload`` whose params keep the agreed ``mtu`` and ``sizes``, every
        check this end made and the ``error`` that stopped it, if any."""
        params = wire.PayloadParams(
            id=self.handle(cm_id),
            first=first,
            peer=_qp_info(peer),
            peer_address=peer_address,
            seed=seed,
            wait=wait,
        )
        keep = ("mtu", "sizes", "checks", "error")
        return self._qp_work(wire.OP_PAYLOAD, params, cm_id, keep, wait, seed=seed)

    def flushed(self, cm_id: str, wait: float = 10.0) -> Outcome:
        """Drain the QP's CQ after it went to ERR: recorded as action ``flushed`` whose
        params keep the work requests ``posted`` (and not yet completed) when the drain
        began, every completion the CQ gave (``wr_id``, ``status``) and the ``error``
        that stopped the drain, if any; the contract's ``abort-flushes`` judges it."""
        params = wire.FlushedParams(id=self.handle(cm_id), wait=wait)
        keep = ("posted", "completions", "error")
        return self._qp_work(wire.OP_FLUSHED, params, cm_id, keep, wait)

    def last_sends(self, cm_id: str, count: int, seed: int, wait: float = 10.0) -> Outcome:
        """Post ``count`` SENDs of distinct lengths and patterns and wait for them, right
        before this end closes: recorded as action ``last_sends`` whose params keep their
        ``lengths`` and the ``error`` that stopped them, if any."""
        params = wire.LastSendsParams(id=self.handle(cm_id), count=count, seed=seed, wait=wait)
        keep = ("lengths", "error")
        return self._qp_work(wire.OP_LAST_SENDS, params, cm_id, keep, wait, count=count, seed=seed)

    def last_receives(self, cm_id: str, count: int, seed: int, wait: float = 10.0) -> Outcome:
        """The receiving end of the peer's :meth:`last_sends` and close: recorded as action
        ``last_receives`` whose params keep the ``lengths`` sent, the first ``count``
        ``completions`` (status, length, ``poll_us``), ``event_us`` and ``seen_us``
        (host times: this end's DISCONNECTED, and the first poll after the agent saw
        it), the ``checks`` of each SEND's bytes and the ``error``; the contract's
        ``close-delivers`` judges it."""
        params = wire.LastReceivesParams(id=self.handle(cm_id), count=count, seed=seed, wait=wait)
        keep = ("lengths", "completions", "event_us", "seen_us", "checks", "error")
        return self._qp_work(
            wire.OP_LAST_RECEIVES, params, cm_id, keep, wait, count=count, seed=seed
        )

    def reads(
        self, cm_id: str, reader: bool, peer: Mapping[str, int], count: int, seed: int
    ) -> Outcome:
        """This end's part of ``count`` concurrent RDMA READs by the ``reader`` end of the
        other end's buffer (both ends run theirs at once): recorded as action ``reads``
        whose params keep the ``size`` of each, the reader's ``checks`` and the ``error``
        that stopped it, if any."""
        params = wire.ReadsParams(
            id=self.handle(cm_id), reader=reader, peer=_qp_info(peer), count=count, seed=seed
        )
        # No wait in the params: the worker's own (10 s) bounds each completion.
        keep = ("size", "checks", "error")
        return self._qp_work(
            wire.OP_READS, params, cm_id, keep, 10.0, reader=reader, count=count, seed=seed
        )

    def received(self, cm_id: str, wait: float = 10.0, size: int = 0, seed: int = 0) -> Outcome:
        """The next receive completion on the id's QP: action ``received`` keeping its
        ``status`` (-1: none within ``wait``), ``byte_len``, ``data`` (hex, at most
        256 bytes), ``error`` and, when ``size`` names the bytes the peer SENT filled
        with the pattern of ``seed``, the whole message's ``checks`` (the contract's
        ``payload-intact`` judges them)."""
        params = wire.ReceivedParams(id=self.handle(cm_id), wait=wait, size=size, seed=seed)
        keep = ("status", "byte_len", "data", "error", "checks")
        return self._qp_work(wire.OP_RECEIVED, params, cm_id, keep, wait)

    def messages(
        self, cm_id: str, count: int, size: int, send_first: bool, wait: float = 10.0
    ) -> Outcome:
        """rdma-core's ucmatose exchange served on the id's QP: ``count`` SENDs of ``size``
        bytes each way, this end's first when ``send_first``: action ``messages`` keeping
        the ``received`` lengths in order, the SENDs ``sent`` and the ``error``."""
        params = wire.MessagesParams(
            id=self.handle(cm_id), count=count, size=size, send_first=send_first, wait=wait
        )
        keep = ("received", "sent", "error")
        return self._qp_work(
            wire.OP_MESSAGES, params, cm_id, keep, wait, count=count, size=size, first=send_first
        )

    def rping(
        self, cm_id: str, role: wire.RpingRole, count: int, size: int = 0, wait: float = 10.0
    ) -> Outcome:
        """rdma-core's rping protocol played as its ``role`` for ``count`` pings of ``size``
        bytes (a client's; a server takes the client's): action ``rping`` keeping each
        ping's ``checks``, its ``text`` and the ``error``."""
        params = wire.RpingParams(
            id=self.handle(cm_id), role=role, count=count, size=size, wait=wait
        )
        keep = ("checks", "text", "error")
        return self._qp_work(
            wire.OP_RPING, params, cm_id, keep, wait, role=role, count=count, size=size
        )

    def send_bw(
        self,
        cm_id: str,
        phase: wire.SendBwPhase,
        data_id: str | None = None,
        iters: int = 0,
        wait: float = 10.0,
    ) -> Outcome:
        """perftest's ib_send_bw -R served as its server (agent cm/perftest.py): ``setup``,
        the control exchanges on ``cm_id`` before the data connection; ``run``, those
        after it around the client's ``iters`` SENDs on ``data_id``: action ``send_bw``
        keeping what the client sent (``control`` lengths, ``version``, ``cycle_buffer``,
        ``cache_line``, ``mtu``, ``dest``, ``received``), the ``credits`` written back
        and the ``error``."""
        params = wire.SendBwParams(id=self.handle(cm_id), phase=phase, wait=wait)
        if data_id is not None:
            params["data"], params["iters"] = self.handle(data_id), iters
        keep = (
            "control", "version", "cycle_buffer", "cache_line", "mtu", "dest", "received",
            "credits", "error",
        )  # fmt: skip
        return self._qp_work(
            wire.OP_SEND_BW, params, cm_id, keep, wait, phase=phase, data=data_id, iters=iters
        )

    def query_qp(self, cm_id: str) -> Outcome:
        """ibv_query_qp's RDMA READ depths of the id's QP: action ``query_qp`` keeping
        ``max_rd_atomic`` and ``max_dest_rd_atomic``."""
        return self.act(
            "query_qp",
            wire.OP_QUERY_QP,
            self._id(cm_id),
            cm_id,
            keep=("max_rd_atomic", "max_dest_rd_atomic"),
        )

    def reg_mr(
        self, cm_id: str, length: int, access: Sequence[wire.RegionAccess] = wire.REGION_ACCESS
    ) -> Outcome:
        """Register a region of ``length`` bytes with ``access`` on the id's PD (ibv_reg_mr):
        action ``reg_mr`` keeping its ``stag``, ``base`` and ``length``; the region lives
        as long as the id's QP."""
        params = wire.RegMrParams(id=self.handle(cm_id), length=length, access=list(access))
        return self.act(
            "reg_mr",
            wire.OP_REG_MR,
            params,
            cm_id,
            record={"length": length, "access": list(access)},
            keep=("stag", "base", "length"),
        )

    def stream_stop(self, cm_id: str) -> wire.StreamStopReply:
        """Stop the stream; its counts (not recorded as an action)."""
        return self._call(wire.OP_STREAM_STOP, self._id(cm_id))

    def pause(self, on: bool = True) -> None:
        """Stop (or resume) reading events, leaving requests unretrieved in the kernel."""
        self._call(wire.OP_PAUSE, wire.PauseParams(on=on))

    def handles(self) -> list[str]:
        """The live cm_ids of this endpoint."""
        ids = self._call(wire.OP_HANDLES, wire.NoParams())["ids"]
        return [n for h in ids if (n := self.name(h))]

    def _id(self, cm_id: str) -> wire.IdParams:
        return wire.IdParams(id=self.handle(cm_id))

    def _qp_work(
        self,
        op: wire.CMOp[P, T],
        params: P,
        cm_id: str,
        keep: tuple[str, ...],
        wait: float,
        /,
        **record: object,
    ) -> Outcome:
        """Run one of the operations that post work on the id's QP and wait ``wait`` for
        each completion: recorded as an action of the op's name showing ``record`` and
        the reply's ``keep``, bounded by ``wait`` and the check's slack."""
        return self.act(
            op.name, op, params, cm_id, record=record, keep=keep, timeout=wait + PAYLOAD_SLACK_S
        )

    # -- lifetime ------------------------------------------------------------

    def kill(self, ids: tuple[str, ...] = ()) -> Action:
        """SIGKILL the worker; recorded as a ``kill`` of each of ``ids`` (its connections)."""
        self.collect()
        got = request(self.agent, wire.CM_KILL, wire.EndpointParams(endpoint=self.number))
        self.alive = False
        t_us = self.to_controller(got["t_us"])
        actions = [Action(t_us, self.side, "kill", i, {"pid": self.pid}) for i in ids or (None,)]
        for a in actions:
            self.rec.add_action(a)
        return actions[0]

    def release(self) -> None:
        """End this recording's use of the worker but keep the worker (an
        :class:`hil.cm.endpointpool.EndpointPool`'s): collect the last events, destroy
        every cm_id it still holds (each a ``destroy`` action, as a close destroys them),
        collect again.  RemoteError when one is not destroyed: the worker is of no more
        use then, and the caller closes it."""
        self.collect()
        for cm_id in self.handles():
            out = self.destroy(cm_id)
            if not out.ok:
                raise RemoteError(
                    self.host, f"CM endpoint {self.number}: destroy {cm_id}: {out.action.result}"
                )
        self.collect()

    def rebind(self, rec: Recorder, offset: ClockOffset) -> None:
        """Hand the worker to another recording: its actions and events go there, on that
        recording's clock offset; events fetched before are no longer waited on."""
        self.rec, self.offset = rec, offset
        self._seen, self._claimed = [], set()

    def close(self, timeout: float | None = None) -> None:
        """Collect the last events, then end the worker in order (killed at the timeout)."""
        if not self.alive:
            return
        try:
            self.collect()
        finally:
            self.alive = False
            request(self.agent, wire.CM_CLOSE, wire.EndpointParams(endpoint=self.number), timeout)


def _qp_info(peer: Mapping[str, int]) -> wire.QPInfo:
    """The peer's QP and buffer as the protocol carries them."""
    return wire.QPInfo(
        qp_num=peer["qp_num"], addr=peer["addr"], rkey=peer["rkey"], length=peer["length"]
    )
