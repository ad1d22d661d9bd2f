"""What the built-in sequences share: a checked choice parameter, one connection
opened (and its connect time recorded) with the listener gone again and its
payload checked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hil.cm import steps
from hil.cm.steps import Conn
from hil.errors import InputError

if TYPE_CHECKING:
    from hil.cm.recording import Recording

BYS = ("active", "passive")


def choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    """``value``, when it is one of ``allowed``; InputError naming them otherwise."""
    if value not in allowed:
        raise InputError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def open_conn(
    rec: Recording, label: str = "c1", private_data: bytes = b"hil", metric: str = "connect_us"
) -> Conn:
    """A connection from the session's active side to a listener on its passive side,
    its connect time recorded as ``metric``; the listener is destroyed again, then the
    connection's payload is checked both ways (:func:`steps.payload`)."""
    s = rec.session
    listener = steps.listen(rec, s.passive)
    conn = steps.establish(rec, rec.endpoint(s.active), listener, label, private_data)
    rec.metric(metric, conn.established_us - conn.connect.action.t_us)
    steps.destroy(listener.ep, listener.id)
    steps.payload(conn)
    return conn
