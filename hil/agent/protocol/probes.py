"""One-shot experiments the agent runs by itself: a raw TCP exchange (probe.py),
clock probes between the hosts of a pair (clockpeer.py), and closing an event
channel under rdma_resolve_route (cm/close.py)."""

from __future__ import annotations

from typing import Literal, TypedDict

from .spec import Method

__all__ = [
    "TcpExchangeParams", "TcpExchangeReply", "ClockEchoParams", "ClockEchoReply",
    "ClockProbeParams", "ClockProbeReply", "CloseRaceParams", "CloseRound", "CloseRaceReply",
    "TcpEnd", "TCP_EXCHANGE", "CM_CLOSE_RACE", "CLOCK_ECHO", "CLOCK_PROBE",
]  # fmt: skip


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


# -- closing an event channel under rdma_resolve_route (cm/close.py) -----------------


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


TCP_EXCHANGE = Method("tcp_exchange", TcpExchangeParams, TcpExchangeReply)
CM_CLOSE_RACE = Method("cm_close_race", CloseRaceParams, CloseRaceReply)
CLOCK_ECHO = Method("clock_echo", ClockEchoParams, ClockEchoReply)
CLOCK_PROBE = Method("clock_probe", ClockProbeParams, ClockProbeReply)
