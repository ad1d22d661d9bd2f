"""The built-in CM sequences: each runs on a pair's sides and returns a Timeline.

Each registers itself under its name (:func:`hil.cm.registry.sequence`) and is
here by that name: ``session.run(sequences.close, **params)`` on a
:class:`~hil.cm.session.CMSession` (``session.run("close")`` from the CLI), or
``sequences.close(sides, **params) -> Timeline`` on any
:class:`~hil.cm.sides.PairSides`.  "active" and "passive" follow the
session's direction.  Every sequence destroys what it made and closes its
endpoints; its timeline carries both hosts' events, the controller's
actions, the clock offsets, the resource counts before/after, the kernel log
and ``metrics`` (µs unless named otherwise).

One module per kind (each registers its sequences when this package is
imported): :mod:`~hil.cm.sequences.connection` (connect, close, abort, reject,
no_listener, remote_access_error), :mod:`~hil.cm.sequences.linkpull`,
:mod:`~hil.cm.sequences.impaired` (late_mpa_reply, link_flap),
:mod:`~hil.cm.sequences.destroys` (destroy_conn_sent, listener_destroy),
:mod:`~hil.cm.sequences.listeners` (reject_then_accept, listener_addresses),
:mod:`~hil.cm.sequences.pdata` (private_data), :mod:`~hil.cm.sequences.irdord`
(ird_ord); what
they share is :mod:`~hil.cm.sequences.common`.

Each, with its parameters, its steps and the metrics it records:

- ``connect`` (``private_data``): listen, connect, accept, ESTABLISHED both,
  close by active. Metrics: ``connect_us``.
- ``close`` (``by`` = active/passive): connect, rdma_disconnect by ``by``,
  DISCONNECTED both. Metrics: ``connect_us``, ``close_us``.
- ``abort`` (``how`` = qp_err/destroy/kill, ``by``): connect, abortive close,
  peer DISCONNECTED. Metrics: ``detection_us``.
- ``reject`` (``private_data``): listen, connect, rdma_reject with data,
  REJECTED. Metrics: ``reject_us``.
- ``no_listener``: connect to a port nobody listens on.
- ``link_pull`` (``mode``, ``traffic``, ``hold_s``): connect, (traffic), pull,
  wait DISCONNECTED or hold, restore, reconnect. Metrics: ``detection_us``,
  ``traffic_ops``, ``reconnect_us``.
- ``late_mpa_reply``: under the caller's delay of the passive host's frames, connect
  and accept; the MPA reply comes after the active side's MPA timer; the passive
  side's close awaited, all destroyed. Metrics: ``mpa_timer_us``.
- ``link_flap`` (``every_s``, ``down_s``, ``flaps``): connect, traffic, the active
  host's path flapping (an impairment), then the payload checked and closed, or what
  is left dropped; reconnect. Metrics: ``traffic_ops``, ``detection_us``, ``reconnect_us``.
- ``destroy_conn_sent`` (``order`` = qp_first/id_first): listener never
  answers, connect, destroy in CONN_SENT (a host-side script). Metrics:
  ``destroy_blocked_us``, ``qp_destroy_us`` (id_first: the QP's after the id's).
- ``listener_destroy`` (``pending``, ``accepted``): accept some, leave others
  unretrieved, destroy the listener. Metrics: ``destroy_blocked_us``.
- ``reject_then_accept``: listen, connect, reject, connect again, accept on the same
  listener, ESTABLISHED both, close.
- ``listener_addresses`` (``kind`` = addresses/wildcard): two listeners on the passive
  host (one port, two addresses, the second added for the run; or the wildcard and a
  specific one), a connection to each, closed.
- ``remote_access_error`` (``how`` = bad_rkey/past_end, ``length``): connect, one
  signaled RDMA WRITE by the active side with a wrong rkey or one byte past the
  end of the peer's buffer (action ``write``: its completion's ``wc_status``),
  DISCONNECTED both. Metrics: ``detection_us``.
- ``private_data`` (``call`` = connect/accept/reject, ``length``): one connection
  whose ``call`` carries ``length`` bytes of private data, the others none; a
  refused call (past the provider's limit) is recorded and cleaned up.
- ``ird_ord`` (``ird``, ``ord``, ``accept_ird``, ``accept_ord``): one connection
  asking those IRD/ORD on connect and accept; both QPs' depths read
  (``query_qp``), the active side's concurrent RDMA READs within and one past its
  ORD (``reads``), closed; a refused call is recorded and cleaned up.
"""

from hil.cm.sequences import connection, destroys, impaired, irdord, linkpull, listeners, pdata
from hil.cm.sequences.connection import (
    abort,
    close,
    connect,
    no_listener,
    reject,
    remote_access_error,
)
from hil.cm.sequences.destroys import destroy_conn_sent, listener_destroy
from hil.cm.sequences.impaired import late_mpa_reply, link_flap
from hil.cm.sequences.irdord import ird_ord
from hil.cm.sequences.linkpull import link_pull
from hil.cm.sequences.listeners import listener_addresses, reject_then_accept
from hil.cm.sequences.pdata import private_data

__all__ = [
    "abort",
    "close",
    "connect",
    "connection",
    "destroy_conn_sent",
    "destroys",
    "impaired",
    "ird_ord",
    "irdord",
    "late_mpa_reply",
    "link_flap",
    "link_pull",
    "linkpull",
    "listener_addresses",
    "listener_destroy",
    "listeners",
    "no_listener",
    "pdata",
    "private_data",
    "reject",
    "reject_then_accept",
    "remote_access_error",
]
