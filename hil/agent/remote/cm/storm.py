"""A connection storm run inside a CM worker: N connections at the speed of ctypes calls.

The controller sends one request (``protocol.StormParams``, ``cm_call`` op
``storm``) and gets one answer (``protocol.StormReply``).  Two roles:

- ``connect`` (stormconnect.py): ``count`` connections to ``dst:port``,
  step by step for all of them as rdma-core's ``cmtime`` does, reading the
  channel in this thread (create ids; resolve every address; every route; a
  QP each; connect, every ``rdma_connect`` from this thread, or from
  ``parallel`` threads when asked, then every reply;
  optionally ``traffic`` SENDs each; disconnect all, each as cmtime's
  disconnect step: ``rdma_disconnect`` then ``rdma_destroy_qp``; destroy
  all).  Each connection's private data is ``tag`` + its index (4 digits),
  which ties it to the passive side's CONNECT_REQUEST.
- ``serve`` (stormserve.py): answer the requests of listener ``listen_id``
  (made before with op ``listen``), reading the channel in this thread:
  accept each, and destroy each id once its DISCONNECTED came; stop when
  ``count`` were served, or ``idle_s`` after the last event once none is
  open (before the first request: ``wait_s``).  ``hold_s`` keeps the
  channel unread at first, so that requests queue in the kernel past the
  listener's backlog.

Without traffic a connection's QP is cmtime's: bare (no buffer, no
receive), on the worker's one PD and CQ; with traffic it has its own PD, CQ
and buffer, as deep as the traffic.

Every step of every connection is stamped on this host's CLOCK_MONOTONIC:
``[t_us, us]`` = when the call began and how long until its completion (the
call's return, or the event that ends the step).  Events are read and stamped
by the storm's thread (the worker's poller paused meanwhile, stamping as it
does) and returned in ``log``; the CM calls come back as
``actions`` for the controller to record, so the contract judges a storm
like any other run.
"""

from __future__ import annotations

import gc
import sys
from typing import TYPE_CHECKING

from ...protocol import StormParams, StormReply
from .script import SWITCH_INTERVAL_S
from .stormbase import (
    DEFAULT_DEADLINE_S,
    DEFAULT_IDLE_S,
    DEFAULT_WAIT_S,
    StormError,
    problems,
)
from .stormconnect import Connect
from .stormserve import Serve

if TYPE_CHECKING:
    from .state import WorkerState

__all__ = ["DEFAULT_DEADLINE_S", "DEFAULT_IDLE_S", "DEFAULT_WAIT_S", "StormError", "run"]


def run(worker: WorkerState, params: StormParams) -> StormReply:
    """Check and run one storm role on ``worker``; :class:`StormError` when malformed."""
    wrong = problems(params)
    if wrong:
        raise StormError("; ".join(wrong))
    old = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    # No collection pause inside a timed step (a full one walks every object the worker
    # imported: milliseconds on a TCG guest); a storm's garbage is bounded by its count.
    collecting = gc.isenabled()
    gc.disable()
    try:
        if params["role"] == "serve":
            return Serve(worker, params).run()
        return Connect(worker, params).run()
    finally:
        sys.setswitchinterval(old)
        if collecting:
            gc.enable()
