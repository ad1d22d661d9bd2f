"""Fencing tokens in the SQL stores.

Every lease granted (a new one or a takeover) gets the next number of one
counter per store, kept in ``hil_settings``: a lease granted later always has
a larger token, so a holder whose lease was taken over holds a token smaller
than the pair's current one.  ``Store.fence`` checks the id and the token in
the same transaction as the action it guards (see docs/reliability.md,
"Fencing").
"""

from __future__ import annotations

from hil.reservation.sqltx import Tx

_SETTING = "fence_token"


def next_token(tx: Tx) -> int:
    """The next fencing token; call inside the write transaction that grants the lease."""
    # The larger of the counter and the largest token held: a store whose
    # counter row was lost must still never hand out a token twice.
    [(last, highest)] = tx.q(
        "SELECT (SELECT value FROM hil_settings WHERE name = ?),"
        " (SELECT COALESCE(MAX(token), 0) FROM hil_leases)",
        (_SETTING,),
    )
    token = max(int(last or 0), int(highest)) + 1
    tx.q(
        "INSERT INTO hil_settings (name, value) VALUES (?, ?)"
        " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        (_SETTING, str(token)),
    )
    return token


def stale(lease_id: str, pair: str, held: int, current: int) -> str:
    """The message for a fencing token that is not the lease's own."""
    return (
        f"fencing token {held} is not lease {lease_id}'s (pair {pair}, token {current}): "
        "the caller holds a token of another grant; stop using the hosts and reserve again"
    )
