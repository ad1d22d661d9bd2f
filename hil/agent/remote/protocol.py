"""The agent protocol, declared once: every message, method, request and reply.

Both ends import this module: the controller as ``hil.agent.remote.protocol``,
the agent on the host as ``hil_agent.protocol`` (it is bundled in the
zipapp with the rest of ``hil/agent/remote/``).  The declarations are
``TypedDict``s, so the wire stays plain JSON objects; ``Literal`` types name
the closed sets (methods, error kinds, CM operations, CM event types).

Each agent method is a :class:`Method`: its wire name, the ``TypedDict`` of
its params and the type of its reply.  ``METHODS`` lists them all; the
agent's own table (``main.METHODS``) must have exactly these names, with
functions whose parameters and return annotations are the declared ones
(tests/agent/test_agent_protocol.py checks both).  The operations of a CM
endpoint (``cm_call``'s ``op``) are :class:`CMOp`\\s in ``CM_OPS``, checked
against ``cmworker.OPS`` the same way.

A reply is decoded with :meth:`Method.decode`: the value, checked against its
declared type (required keys present, every known key of the right type,
literals one of theirs) and typed for the caller; keys it does not declare
are ignored (``strict=True``, as the tests decode, refuses them).  A mismatch
raises :class:`ProtocolMismatch` naming the path (``log[3].type``).
Decoding evaluates the annotations below, ``X | None`` included, so it needs
python >= 3.10: the controller decodes; the agent (python >= 3.9) only
declares and builds.

Runs on the host's python (>= 3.9), stdlib only: this module imports nothing
but ``typing``, and its annotations stay strings (``from __future__ import
annotations``) until a decoder evaluates them.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    TypedDict,
    TypeVar,
    Union,
    get_args,
    get_origin,
)

if TYPE_CHECKING:
    from typing import TypeGuard  # python >= 3.10; annotations here stay strings

# Bump on any change that an older client or agent would misread: a method
# whose params or reply change meaning, a key that changes type.  A new
# method (announced in the handshake's ``methods``) does not.
PROTOCOL_VERSION = 1

MethodName = Literal[
    # system.py
    "ping",
    "run",
    "sysctl_get",
    "sysctl_set",
    # netlink.py
    "links",
    "link",
    "addresses",
    "set_link",
    "add_address",
    "delete_address",
    "flush_addresses",
    "wait_link",
    "add_link",
    "delete_link",
    # ethtool.py
    "ethtool_drvinfo",
    # rdma.py
    "rdma_devices",
    "rdma_links",
    "rdma_add_siw",
    "rdma_delete_link",
    "rdma_resources",
    # kmsg.py
    "kmsg_cursor",
    "kmsg_read",
    "kmsg_close",
    # cm.py
    "cm_now",
    "clock_pair",
    "cm_open",
    "cm_call",
    "cm_kill",
    "cm_close",
    "cm_endpoints",
    # probe.py
    "tcp_exchange",
    # clockpeer.py
    "clock_echo",
    "clock_probe",
    # cmclose.py
    "cm_close_race",
]

# The ``type`` of an error answer (raised on the agent as ``OpError(kind, ...)``).
ErrorKind = Literal[
    "timeout",  # a bounded operation overran (or the watchdog answered for it)
    "wait_timeout",  # a wanted state did not come (wait_link)
    "netlink",  # the kernel refused a netlink request: details.errno
    "not_found",  # no such interface, sysctl, cursor or CM endpoint
    "rdma_unavailable",  # no rdma tool, no RDMA netlink, no librdmacm or RDMA device
    "command_failed",  # an rdma command exited non-zero: details.status, details.stderr
    "os",  # a system call failed: details.errno
    "bad_request",  # a line that is not a request
    "bad_params",  # params the method does not take
    "unknown_method",  # details.known lists the methods
    "internal",  # an agent bug: details.traceback
    "rdma",  # a CM operation failed in librdmacm/libibverbs: CMErrorDetails
    "cm_worker_died",  # a CM endpoint's process is gone: details.status
]

# enum rdma_cm_event_type (rdma/rdma_cma.h), in its order: the index is the value.
CMEventType = Literal[
    "ADDR_RESOLVED",
    "ADDR_ERROR",
    "ROUTE_RESOLVED",
    "ROUTE_ERROR",
    "CONNECT_REQUEST",
    "CONNECT_RESPONSE",
    "CONNECT_ERROR",
    "UNREACHABLE",
    "REJECTED",
    "ESTABLISHED",
    "DISCONNECTED",
    "DEVICE_REMOVAL",
    "MULTICAST_JOIN",
    "MULTICAST_ERROR",
    "ADDR_CHANGE",
    "TIMEWAIT_EXIT",
]

CMOpName = Literal[
    "listen",
    "connect",
    "accept",
    "reject",
    "disconnect",
    "qp_err",
    "destroy",
    "stream_start",
    "stream_stop",
    "stream_stats",
    "write",
    "events",
    "pause",
    "handles",
    "scenario",
    "storm",
]
# The operations a scenario step may run (the worker's ops of these names).
ScenarioOpName = Literal[
    "listen", "connect", "accept", "reject", "disconnect", "qp_err", "destroy", "pause", "write"
]
AutoAnswer = Literal["accept", "reject"]  # a listener answering its requests itself
StreamMode = Literal["write", "send", "sink"]
# destroy: the QP before the id (rdma_cm's documented order), or the id while its QP
# still exists (librdmacm's rdma_destroy_id leaves it; the QP is destroyed after).
DestroyOrder = Literal["qp_first", "id_first"]
ResourceType = Literal["cm_id", "qp", "cq", "mr"]

METHOD_NAMES: tuple[MethodName, ...] = get_args(MethodName)
CM_EVENT_TYPES: tuple[CMEventType, ...] = get_args(CMEventType)
CM_OP_NAMES: tuple[CMOpName, ...] = get_args(CMOpName)
SCENARIO_OP_NAMES: tuple[ScenarioOpName, ...] = get_args(ScenarioOpName)
STREAM_MODES: tuple[StreamMode, ...] = get_args(StreamMode)
DESTROY_ORDERS: tuple[DestroyOrder, ...] = get_args(DestroyOrder)
RESOURCE_TYPES: tuple[ResourceType, ...] = get_args(ResourceType)


def is_method_name(name: str) -> TypeGuard[MethodName]:
    """True when ``name`` is an agent method this protocol declares."""
    return name in METHOD_NAMES


# -- the envelope ---------------------------------------------------------------


class Handshake(TypedDict):
    """agent -> client, the first line."""

    agent: Literal["hil"]
    protocol: int
    hash: str  # sha256 of the zipapp the agent runs from
    pid: int
    python: str
    kernel: str
    uid: int
    methods: list[str]


class Request(TypedDict):
    """client -> agent: one call."""

    id: int
    method: str
    params: dict[str, Any]
    timeout: float


class ErrorBody(TypedDict):
    """What failed: ``type`` for programs, ``message`` for people, ``details`` JSON."""

    type: ErrorKind
    message: str
    details: dict[str, Any]


class ResultReply(TypedDict):
    """agent -> client: the call's result (its method's reply)."""

    id: int
    result: Any


class ErrorReply(TypedDict):
    """agent -> client: the call failed (``id`` is None for a line that was no request)."""

    id: int | None
    error: ErrorBody


# -- params and replies ------------------------------------------------------------


class NoParams(TypedDict):
    """A method that takes no params (besides the request's timeout)."""


class PingReply(TypedDict):
    pid: int


class _RunRequired(TypedDict):
    argv: list[str]


class RunParams(_RunRequired, total=False):
    input: str | None


class RunReply(TypedDict):
    status: int
    stdout: str
    stderr: str


class SysctlGetParams(TypedDict):
    name: str


class SysctlSetParams(TypedDict):
    name: str
    value: str


class NetdevParams(TypedDict):
    netdev: str


class AddressesParams(TypedDict, total=False):
    netdev: str | None


class SetLinkParams(NetdevParams, total=False):
    up: bool | None
    mtu: int | None


class AddressParams(TypedDict):
    netdev: str
    address: str  # with prefix: 198.18.0.1/24


class FlushAddressesParams(NetdevParams, total=False):
    family: int | None  # 4, 6, or None for both


class WaitLinkParams(NetdevParams, total=False):
    operstate: str | None
    carrier: bool | None


class _AddLinkRequired(TypedDict):
    name: str
    kind: str


class AddLinkParams(_AddLinkRequired, total=False):
    peer: str | None


class NameParams(TypedDict):
    name: str


class AddSiwParams(TypedDict):
    name: str
    netdev: str


class ResourcesParams(TypedDict, total=False):
    types: list[str] | None  # of RESOURCE_TYPES; None for all


class CursorParams(TypedDict):
    cursor: int


class _CMCallRequired(TypedDict):
    endpoint: int
    op: CMOpName


class CMCallParams(_CMCallRequired, total=False):
    params: dict[str, Any] | None  # the op's params (CM_OPS[op].params)


class EndpointParams(TypedDict):
    endpoint: int


class LinkReply(TypedDict):
    """A network link as rtnetlink reports it."""

    name: str
    index: int
    mtu: int
    operstate: str  # UP, DOWN, LOWERLAYERDOWN, UNKNOWN, ...
    carrier: bool
    up: bool  # IFF_UP
    mac: str | None
    kind: str | None  # veth, dummy, ... (None for physical NICs)


class AddressReply(TypedDict):
    netdev: str
    address: str  # with prefix
    family: int  # 4 or 6
    scope: int  # 0 global, 253 link, 254 host


class DrvInfoReply(TypedDict):
    netdev: str
    driver: str
    version: str
    firmware: str
    bus_info: str


class RdmaDeviceReply(TypedDict):
    name: str
    index: int
    node_type: str | None
    fw: str | None
    node_guid: str | None


class RdmaLinkReply(TypedDict):
    device: str
    port: int
    state: str | None
    physical_state: str | None
    netdev: str | None


class KmsgRecordReply(TypedDict):
    seq: int
    usec: int  # since boot
    priority: int  # 0 emerg .. 7 debug
    facility: int
    message: str


class KmsgReadReply(TypedDict):
    records: list[KmsgRecordReply]
    lost: int  # records the ring buffer overwrote before they were read


class ClockReply(TypedDict):
    t_us: int  # the host's CLOCK_MONOTONIC, µs


class ClockPairReply(TypedDict):
    """The host's CLOCK_REALTIME read between two reads of its CLOCK_MONOTONIC (µs)."""

    mono_us: int  # the two monotonic reads' midpoint
    wall_us: int  # CLOCK_REALTIME, since the epoch
    spread_us: int  # half the two monotonic reads' difference: wall_us is mono_us +/- this


class EndpointReply(TypedDict):
    endpoint: int
    pid: int


class KillReply(TypedDict):
    t_us: int  # when SIGKILL was sent (host clock)
    pid: int


class CloseReply(TypedDict):
    status: int | None  # the worker's exit status; None when it was killed
    killed: bool


# -- raw TCP exchanges (probe.py: the regression corpus's malformed MPA) -------------


class _TcpExchangeRequired(TypedDict):
    address: str
    port: int
    data: str  # hex: the bytes sent


class TcpExchangeParams(_TcpExchangeRequired, total=False):
    src: str | None
    delay_s: float  # between the connect and the send
    wait_s: float  # how long to read the answer
    reset: bool  # close with a RST


TcpEnd = Literal["eof", "reset", "open"]  # the peer closed, aborted, or neither in time


class TcpExchangeReply(TypedDict):
    t_us: int  # host CLOCK_MONOTONIC: the call began
    local: str  # the connection's own end, "198.18.0.1:40001"
    connected_us: int
    sent_us: int
    ended_us: int
    reply: str  # hex: what the peer sent
    ended: TcpEnd  # how the read ended


# -- clock probes between the hosts of a pair (clockpeer.py) --------------------------


class ClockEchoParams(TypedDict):
    address: str  # the echo's own data address, bound for UDP
    port: int


class ClockEchoReply(TypedDict):
    answered: int


class ClockProbeParams(TypedDict):
    src: str  # the prober's own data address
    dst: str  # the echo's
    port: int
    count: int  # probes wanted answered (1..2000)
    budget_s: float  # the measurement's bound from the first answer (which may wait longer)


class ClockProbeReply(TypedDict):
    # Each answered probe's [t1, t2, t3, t4], µs: t1 sent and t4 answer received on the
    # prober's CLOCK_MONOTONIC, t2 received and t3 answered on the echo's.
    samples: list[list[int]]
    sent: int  # probes sent, answered or not


# -- closing an event channel under rdma_resolve_route (cmclose.py) -----------------


class CloseRaceParams(TypedDict):
    dst: str
    port: int
    src: str
    delays_us: list[int]  # one round each: the close this long after rdma_resolve_route


class CloseRound(TypedDict):
    route_us: int  # how long rdma_resolve_route took
    close_after_us: int  # from its return to the close
    queued: bool  # the route's event had reached the file before the close
    t_us: int  # host CLOCK_MONOTONIC of the close


class CloseRaceReply(TypedDict):
    rounds: list[CloseRound]


# -- CM endpoint operations (cm_call) -------------------------------------------------


class _ListenRequired(TypedDict):
    address: str
    port: int


class ListenParams(_ListenRequired, total=False):
    backlog: int
    auto: AutoAnswer | None
    private_data: str  # hex


class _ConnectRequired(TypedDict):
    dst: str
    port: int


class ConnectParams(_ConnectRequired, total=False):
    src: str | None
    private_data: str  # hex
    resolve_timeout: float


class IdParams(TypedDict):
    id: int  # a cm_id handle of the endpoint


class AnswerParams(IdParams, total=False):
    private_data: str  # hex


class DestroyParams(IdParams, total=False):
    order: DestroyOrder  # default qp_first


class RemoteBuffer(TypedDict):
    addr: int
    rkey: int


class StreamStartParams(IdParams, total=False):
    mode: StreamMode
    size: int
    depth: int
    remote: RemoteBuffer | None  # the peer's buffer, for RDMA WRITEs


class _WriteRequired(IdParams):
    remote: RemoteBuffer  # where to write: the peer's buffer, or a wrong rkey or address


class WriteParams(_WriteRequired, total=False):
    length: int
    wait: float  # seconds to wait for the completion


class EventsParams(TypedDict, total=False):
    after: int  # the last log seq already fetched
    wait: float  # seconds to wait for a matching event
    types: list[CMEventType] | None
    id: int | None


class PauseParams(TypedDict, total=False):
    on: bool


class TimedReply(TypedDict):
    """An operation's start (host CLOCK_MONOTONIC, µs) and how long it took (µs)."""

    t_us: int
    us: int


class DestroyReply(TimedReply, total=False):
    """``us``: how long rdma_destroy_id blocked (with the QP's destroy before it, qp_first);
    ``qp_us``: id_first's QP destroy after the id's."""

    qp_us: int


class IdTimedReply(TimedReply):
    id: int  # the cm_id the operation made


class QPInfo(TypedDict):
    """A QP and its registered buffer: what a peer needs for RDMA WRITEs into it."""

    qp_num: int
    addr: int
    rkey: int
    length: int


class ConnectReply(IdTimedReply):
    qp: QPInfo


class AcceptReply(TimedReply):
    qp: QPInfo


class StreamStats(TypedDict):
    mode: StreamMode
    ops: int
    bytes: int
    error: str | None  # the first failed post or completion
    error_t_us: int | None


class StreamStopReply(TimedReply, StreamStats):
    pass


class WriteReply(TimedReply):
    """One signaled RDMA WRITE: posted at ``t_us``, completed ``us`` later with ``wc_status``."""

    wr_id: int
    wc_status: int  # enum ibv_wc_status (0 success, 5 flushed, 10 remote access error)
    wc_status_name: str  # IBV_WC_REM_ACCESS_ERR
    vendor_err: int


class CMEvent(TypedDict):
    """An event the endpoint's channel delivered, stamped when it was read."""

    type: CMEventType
    status: int
    id: int | None  # the cm_id's handle (a CONNECT_REQUEST's is new; a destroyed id's former)
    listen_id: int | None  # its listener's handle (likewise)
    private_data: str  # hex
    host_t_us: int  # the host's CLOCK_MONOTONIC, µs
    local: str  # the id's own address, "ip:port" ("[v6]:port"); "" while unknown
    remote: str  # its peer's, likewise


class CMEventEntry(CMEvent):
    kind: Literal["event"]
    seq: int


class _CMActionRequired(TypedDict):
    kind: Literal["action"]
    seq: int
    name: AutoAnswer
    id: int
    params: dict[str, Any]
    result: str  # "ok" or the errno's name
    t_us: int
    us: int


class CMActionEntry(_CMActionRequired, total=False):
    """What the endpoint did by itself: a listener's automatic accept or reject."""

    qp: QPInfo


class CMErrorEntry(TypedDict):
    """Reading the channel failed."""

    kind: Literal["error"]
    seq: int
    message: str
    t_us: int


# A Union, not ``|``: this alias is evaluated when the module loads (python 3.9).
CMLogEntry = Union[CMEventEntry, CMActionEntry, CMErrorEntry]  # noqa: UP007


class EventsReply(TypedDict):
    log: list[CMLogEntry]
    t_us: int


class HandlesReply(TypedDict):
    ids: list[int]


class CMErrorDetails(TypedDict, total=False):
    """``details`` of an ``rdma`` error: the errno, and when the operation ran."""

    errno: int | None
    errno_name: str
    handle: int  # the cm_id it made before failing (connect)
    t_us: int
    us: int


# -- scenarios: a script a CM endpoint runs by itself (cm_call op "scenario") ----------
# Declared without ``X | None`` so that the agent (python >= 3.9) can check a
# script against these with :func:`check_scenario` before it runs one step.


class _ScenarioStepRequired(TypedDict):
    op: ScenarioOpName


class ScenarioStep(_ScenarioStepRequired, total=False):
    """One step: an operation, the id it acts on, and when it runs (its trigger).

    Trigger: ``at_us`` (a time on the host's CLOCK_MONOTONIC), else ``on`` (the
    first event of that type, for the id bound to ``on_id_of`` if given, that
    the caller had not fetched (after ``after``) and that triggered no step
    before), else the
    end of the previous step (for the first: the script's ``start_us``, else
    its arrival); then
    ``after_us`` more.  ``wait_s`` bounds the wait for an ``on`` event.
    The id: ``id`` (a handle made before the script), or ``id_of``: the id
    bound to an earlier step's ``name``, or ``"event"``, the triggering
    event's id.  ``name`` binds the id the step made (listen, connect) or
    acted on.  ``params``: the op's other params (``CM_OPS[op].params``).
    """

    name: str
    id: int
    id_of: str
    params: dict[str, Any]
    at_us: int
    on: CMEventType
    on_id_of: str
    after_us: int
    wait_s: float


class _ScenarioRequired(TypedDict):
    steps: list[ScenarioStep]


class ScenarioParams(_ScenarioRequired, total=False):
    after: int  # the log seq the caller already has: the reply's log starts after it
    start_us: int  # host CLOCK_MONOTONIC: the first step's time (not before); 0: on arrival
    linger_s: float  # after the last step, keep collecting events this long
    deadline_s: float  # the whole script's bound (triggers included); the rest is skipped


class _ScenarioStepResultRequired(TypedDict):
    index: int
    op: ScenarioOpName
    result: str  # "ok", an errno's name, "timeout" (trigger never came), "skipped", "no_id"


class ScenarioStepResult(_ScenarioStepResultRequired, total=False):
    """What one step did, on the host's clock (all µs)."""

    name: str
    id: int  # the id it made or acted on
    target_us: int  # when the trigger said to run it
    t_us: int  # when the op began
    us: int  # how long the op took
    late_us: int  # t_us - target_us: how late the worker was
    event_seq: int  # the log seq of the event that triggered it
    reply: dict[str, Any]  # of the reply: qp (connect, accept), wc_status (write), qp_us


class ScenarioReply(TypedDict):
    """The whole run in one answer: each step, and the log since ``after``."""

    t_us: int  # when the script began: start_us if given, else when it arrived (host clock)
    end_us: int  # when it ended, linger included
    steps: list[ScenarioStepResult]
    log: list[CMLogEntry]


def scenario_problems(params: Mapping[str, object]) -> list[str]:
    """What is wrong with a script (``ScenarioParams``), [] when nothing: its shape,
    then each step's trigger, id reference and params.  Both ends run this."""
    try:
        check(ScenarioParams, dict(params), "scenario", strict=True)
    except ProtocolMismatch as e:
        return [str(e)]
    steps = typing.cast("list[ScenarioStep]", params["steps"])
    problems: list[str] = []
    names: set[str] = set()
    for i, step in enumerate(steps):
        where = f"scenario step {i} ({step['op']})"
        if "at_us" in step and "on" in step:
            problems.append(f"{where}: at_us and on are two triggers; give one")
        if "wait_s" in step and "on" not in step:
            problems.append(f"{where}: wait_s bounds an 'on' trigger, and it has none")
        if step.get("on_id_of", "") not in names | {""}:
            problems.append(f"{where}: on_id_of {step['on_id_of']!r} names no earlier step")
        ref = step.get("id_of")
        if "id" in step and ref is not None:
            problems.append(f"{where}: id and id_of both given; give one")
        if ref == "event" and "on" not in step:
            problems.append(f"{where}: id_of 'event' needs an 'on' trigger")
        elif ref is not None and ref != "event" and ref not in names:
            problems.append(f"{where}: id_of {ref!r} names no earlier step")
        spec = CM_OPS[step["op"]]
        takes_id = "id" in spec.params.__annotations__
        op_params = dict(step.get("params", {}))
        if takes_id:
            if "id" in op_params or ("id" not in step and ref is None):
                problems.append(f"{where}: the id goes in id or id_of, not params")
            op_params["id"] = 0
        elif "id" in step or ref is not None:
            problems.append(f"{where}: {step['op']} acts on no id")
        try:
            check(spec.params, op_params, f"{where} params", strict=True)
        except ProtocolMismatch as e:
            problems.append(str(e))
        except TypeError:
            pass  # python 3.9 cannot evaluate ``X | None``: the op refuses what it does not take
        if "name" in step:
            names.add(step["name"])
    return problems


# -- storms: N connections driven by a worker itself (cm_call op "storm"; cmstorm.py) --------
StormRole = Literal["connect", "serve"]


class _StormRequired(TypedDict):
    role: StormRole
    count: int  # connect: connections to make; serve: connections to serve


class StormParams(_StormRequired, total=False):
    """A storm's role and its knobs (cmstorm.py's docstring says what each role does)."""

    dst: str  # connect: the listener's address and port, and our source address
    port: int
    src: str
    parallel: int  # connect: threads issuing rdma_connect (siw's blocks for a TCP handshake)
    traffic: int  # SENDs per connection once established (connect), receives posted (serve)
    tag: str  # connect: private data = tag + the connection's index (4 digits)
    listen_id: int  # serve: the listener whose requests it answers
    hold_s: float  # serve: leave the channel unread this long first (requests queue)
    idle_s: float  # serve: stop once nothing is open and no event came this long
    start_us: int  # host CLOCK_MONOTONIC: when the storm begins (0: at once)
    wait_s: float  # one step's bound, all connections together
    deadline_s: float  # the whole storm's bound
    after: int  # the log seq the caller already has: the reply's log starts after it


class _StormConnRequired(TypedDict):
    index: int
    tag: str  # its private data (text): ties the two sides' ids of one connection
    result: str  # "ok", an errno's name, the failing event's type, or why a step gave up


class StormConn(_StormConnRequired, total=False):
    """One connection: its id and each step's ``[t_us, us]`` (host clock): when the
    call began and how long until the step ended (the call's return or its event)."""

    id: int
    steps: dict[str, list[int]]


class StormActionEntry(TypedDict):
    """A CM call the storm made (connect, accept, disconnect, destroy), for the timeline."""

    name: str
    id: int
    t_us: int
    us: int
    result: str  # "ok" or the errno's name
    params: dict[str, Any]


class StormReply(TypedDict):
    t_us: int  # when the storm began (host clock)
    end_us: int
    conns: list[StormConn]
    actions: list[StormActionEntry]
    log: list[CMLogEntry]  # the worker's log after ``after``: every event, stamped


# -- declarations ------------------------------------------------------------------

P = TypeVar("P", bound=Mapping[str, Any])
R = TypeVar("R")


class ProtocolMismatch(ValueError):
    """A message that does not have its declared shape; the message names where."""


class Spec(Generic[P, R]):
    """A request/reply pair: the params ``TypedDict`` and the reply type."""

    name: str

    def __init__(self, params: type[P], reply: type[R]) -> None:
        self.params = params
        self.reply = reply

    def decode(self, value: object, strict: bool = False) -> R:
        """``value`` as this reply, once checked; ``strict`` also refuses undeclared keys."""
        check(self.reply, value, f"{self.name} reply", strict)
        return typing.cast(R, value)

    def check_params(self, params: Mapping[str, object]) -> None:
        """Refuse params this request does not declare (names and types)."""
        check(self.params, dict(params), f"{self.name} params", strict=True)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Method(Spec[P, R]):
    """An agent method: ``{"method": name, "params": P}`` answered by ``R``."""

    def __init__(self, name: MethodName, params: type[P], reply: type[R]) -> None:
        super().__init__(params, reply)
        self.name: MethodName = name


class CMOp(Spec[P, R]):
    """A CM endpoint operation, run by ``cm_call`` (``op`` = name, ``params`` = P)."""

    def __init__(self, name: CMOpName, params: type[P], reply: type[R]) -> None:
        super().__init__(params, reply)
        self.name: CMOpName = name


_NONE = type(None)

PING = Method("ping", NoParams, PingReply)
RUN = Method("run", RunParams, RunReply)
SYSCTL_GET = Method("sysctl_get", SysctlGetParams, str)
SYSCTL_SET = Method("sysctl_set", SysctlSetParams, str)  # the old value
LINKS = Method("links", NoParams, list[LinkReply])
LINK = Method("link", NetdevParams, LinkReply)
ADDRESSES = Method("addresses", AddressesParams, list[AddressReply])
SET_LINK = Method("set_link", SetLinkParams, LinkReply)  # the link before the change
ADD_ADDRESS = Method("add_address", AddressParams, _NONE)
DELETE_ADDRESS = Method("delete_address", AddressParams, _NONE)
FLUSH_ADDRESSES = Method("flush_addresses", FlushAddressesParams, list[AddressReply])
WAIT_LINK = Method("wait_link", WaitLinkParams, LinkReply)
ADD_LINK = Method("add_link", AddLinkParams, LinkReply)
DELETE_LINK = Method("delete_link", NameParams, _NONE)
ETHTOOL_DRVINFO = Method("ethtool_drvinfo", NetdevParams, DrvInfoReply)
RDMA_DEVICES = Method("rdma_devices", NoParams, list[RdmaDeviceReply])
RDMA_LINKS = Method("rdma_links", NoParams, list[RdmaLinkReply])
RDMA_ADD_SIW = Method("rdma_add_siw", AddSiwParams, _NONE)
RDMA_DELETE_LINK = Method("rdma_delete_link", NameParams, _NONE)
RDMA_RESOURCES = Method("rdma_resources", ResourcesParams, dict[str, int])
KMSG_CURSOR = Method("kmsg_cursor", NoParams, int)
KMSG_READ = Method("kmsg_read", CursorParams, KmsgReadReply)
KMSG_CLOSE = Method("kmsg_close", CursorParams, _NONE)
CM_NOW = Method("cm_now", NoParams, ClockReply)
CLOCK_PAIR = Method("clock_pair", NoParams, ClockPairReply)
CM_OPEN = Method("cm_open", NoParams, EndpointReply)
CM_CALL = Method("cm_call", CMCallParams, dict[str, Any])  # the op's reply: CM_OPS[op]
CM_KILL = Method("cm_kill", EndpointParams, KillReply)
CM_CLOSE = Method("cm_close", EndpointParams, CloseReply)
CM_ENDPOINTS = Method("cm_endpoints", NoParams, list[EndpointReply])
TCP_EXCHANGE = Method("tcp_exchange", TcpExchangeParams, TcpExchangeReply)
CM_CLOSE_RACE = Method("cm_close_race", CloseRaceParams, CloseRaceReply)

METHODS: dict[MethodName, Method[Any, Any]] = {
    m.name: m
    for m in (
        PING, RUN, SYSCTL_GET, SYSCTL_SET,
        LINKS, LINK, ADDRESSES, SET_LINK, ADD_ADDRESS, DELETE_ADDRESS, FLUSH_ADDRESSES,
        WAIT_LINK, ADD_LINK, DELETE_LINK,
        ETHTOOL_DRVINFO,
        RDMA_DEVICES, RDMA_LINKS, RDMA_ADD_SIW, RDMA_DELETE_LINK, RDMA_RESOURCES,
        KMSG_CURSOR, KMSG_READ, KMSG_CLOSE,
        CM_NOW, CLOCK_PAIR, CM_OPEN, CM_CALL, CM_KILL, CM_CLOSE, CM_ENDPOINTS,
        TCP_EXCHANGE, CM_CLOSE_RACE,
    )
}  # fmt: skip

CLOCK_ECHO = Method("clock_echo", ClockEchoParams, ClockEchoReply)
CLOCK_PROBE = Method("clock_probe", ClockProbeParams, ClockProbeReply)
METHODS.update({m.name: m for m in (CLOCK_ECHO, CLOCK_PROBE)})

OP_LISTEN = CMOp("listen", ListenParams, IdTimedReply)
OP_CONNECT = CMOp("connect", ConnectParams, ConnectReply)
OP_ACCEPT = CMOp("accept", AnswerParams, AcceptReply)
OP_REJECT = CMOp("reject", AnswerParams, TimedReply)
OP_DISCONNECT = CMOp("disconnect", IdParams, TimedReply)
OP_QP_ERR = CMOp("qp_err", IdParams, TimedReply)
OP_DESTROY = CMOp("destroy", DestroyParams, DestroyReply)
OP_STREAM_START = CMOp("stream_start", StreamStartParams, TimedReply)
OP_STREAM_STOP = CMOp("stream_stop", IdParams, StreamStopReply)
OP_STREAM_STATS = CMOp("stream_stats", IdParams, StreamStats)
OP_WRITE = CMOp("write", WriteParams, WriteReply)
OP_EVENTS = CMOp("events", EventsParams, EventsReply)
OP_PAUSE = CMOp("pause", PauseParams, TimedReply)
OP_HANDLES = CMOp("handles", NoParams, HandlesReply)
OP_SCENARIO = CMOp("scenario", ScenarioParams, ScenarioReply)
OP_STORM = CMOp("storm", StormParams, StormReply)

CM_OPS: dict[CMOpName, CMOp[Any, Any]] = {
    op.name: op
    for op in (
        OP_LISTEN, OP_CONNECT, OP_ACCEPT, OP_REJECT, OP_DISCONNECT, OP_QP_ERR, OP_DESTROY,
        OP_STREAM_START, OP_STREAM_STOP, OP_STREAM_STATS, OP_WRITE, OP_EVENTS, OP_PAUSE,
        OP_HANDLES, OP_SCENARIO, OP_STORM,
    )
}  # fmt: skip


# -- checking a message against its declaration ---------------------------------------


def decode(tp: type[R], value: object, what: str = "message", strict: bool = False) -> R:
    """``value`` as a ``tp`` (a TypedDict, ``list[...]``...), once checked."""
    check(tp, value, what, strict)
    return typing.cast(R, value)


def is_typeddict(tp: object) -> bool:
    """True for a TypedDict class (``typing.is_typeddict`` is python >= 3.10)."""
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


@functools.cache
def fields(td: type) -> dict[str, Any]:
    """A TypedDict's keys and their types, evaluated (inherited keys too)."""
    return typing.get_type_hints(td)


def _name(tp: object) -> str:
    if tp is _NONE or tp is None:
        return "null"
    if isinstance(tp, type) and not get_args(tp):
        return tp.__name__
    return repr(tp).replace("typing.", "").replace(f"{__name__}.", "")


def _mismatch(tp: object, value: object, path: str) -> ProtocolMismatch:
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return ProtocolMismatch(f"{path}: expected {_name(tp)}, got {shown}")


def check(tp: object, value: object, path: str = "message", strict: bool = False) -> None:
    """Raise :class:`ProtocolMismatch` unless ``value`` is a ``tp``.

    ``tp`` is any type these declarations use: a TypedDict, ``list[X]``,
    ``dict[str, X]``, a ``Literal``, a union, ``int``/``float``/``str``/
    ``bool``, None, ``Any``.  Undeclared keys of a TypedDict value are
    ignored unless ``strict``.
    """
    origin = get_origin(tp)
    if tp is Any or tp is object:
        return
    if tp is None or tp is _NONE:
        if value is not None:
            raise _mismatch(tp, value, path)
    elif tp is bool or tp is str:
        if not isinstance(value, tp):
            raise _mismatch(tp, value, path)
    elif tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise _mismatch(tp, value, path)
    elif tp is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise _mismatch(tp, value, path)
    elif origin is Literal:
        if not any(value == v and type(value) is type(v) for v in get_args(tp)):
            raise _mismatch(tp, value, path)
    elif origin is Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        for arm in get_args(tp):
            try:
                check(arm, value, path, strict)
                return
            except ProtocolMismatch:
                continue
        raise _mismatch(tp, value, path)
    elif origin is list:
        if not isinstance(value, list):
            raise _mismatch(tp, value, path)
        (item,) = get_args(tp)
        for i, v in enumerate(value):
            check(item, v, f"{path}[{i}]", strict)
    elif origin is dict:
        if not isinstance(value, dict):
            raise _mismatch(tp, value, path)
        _, item = get_args(tp)
        for k, v in value.items():
            if not isinstance(k, str):
                raise ProtocolMismatch(f"{path}: key {k!r} is not a string")
            check(item, v, f"{path}.{k}", strict)
    elif is_typeddict(tp):
        _check_typeddict(typing.cast(type, tp), value, path, strict)
    else:
        raise TypeError(f"the protocol cannot check values of type {tp!r}")


def _check_typeddict(td: type, value: object, path: str, strict: bool) -> None:
    if not isinstance(value, dict):
        raise _mismatch(td, value, path)
    declared = fields(td)
    missing = [k for k in sorted(vars(td)["__required_keys__"]) if k not in value]
    if missing:
        raise ProtocolMismatch(f"{path}: {td.__name__} lacks {', '.join(missing)}")
    if strict:
        extra = sorted(k for k in value if k not in declared)
        if extra:
            raise ProtocolMismatch(f"{path}: {td.__name__} has no {', '.join(map(str, extra))}")
    for key, tp in declared.items():
        if key in value:
            check(tp, value[key], f"{path}.{key}", strict)
