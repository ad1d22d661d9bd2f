"""Remote access errors as a contract rule: an RDMA WRITE the peer must refuse.

The ``remote_access_error`` sequence records action ``write`` with params
``how`` (one of :data:`ACCESS_ERRORS`) and the completion's ``wc_status``
and ``wc_status_name``; the rule holds the completion and both sides'
DISCONNECTED against the profiles: the completion against the writer's, each
DISCONNECTED against its host's.  A timeline with no such write finds
nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

from hil.judge.profiles import Profiles
from hil.judge.rule import Finding, actor, reporter, rule
from hil.judge.timeline import SIDES, Timeline

# How a write is made to fail: a wrong rkey, or one byte past the peer's buffer.
ACCESS_ERRORS = ("bad_rkey", "past_end")


@rule(
    "remote-access-error-completes-and-disconnects",
    None,
    "An RDMA WRITE the peer must refuse (wrong rkey, past the end of its buffer) completes "
    "with a status the profile allows, and then both sides get DISCONNECTED with the "
    "profile's status",
    "[lab] siw: the WRITE completes IBV_WC_SUCCESS (siw_qp_sq_process completes on transmit), "
    "DISCONNECTED(0) on both sides; [inferred] cxgb4 cq.c, cm.c terminate()",
)
def _remote_access_error(tl: Timeline, profile: Profiles) -> Iterator[Finding]:
    for act in (a for a in tl.actions if a.name == "write" and a.id):
        how = act.params.get("how")
        if how not in ACCESS_ERRORS:
            continue
        what = f"the {how} RDMA WRITE on {act.id}"
        status = act.params.get("wc_status")
        writer = actor(profile, tl, act)  # the writer's provider completes the WRITE
        if not act.ok:
            yield Finding(f"{what} got no completion ({act.result})", (), (act,))
        elif status not in writer.remote_access_write_statuses:
            name = act.params.get("wc_status_name", "")
            yield Finding(
                f"{what} completed with {name}({status}), expected one of "
                f"{sorted(writer.remote_access_write_statuses)}",
                (),
                (act,),
            )
        conn = tl.conn_of(act.id)
        events = tl.events_of_conn(conn) if conn else tl.events_for(act.id)
        for side in SIDES if conn else (act.side,):
            got = [e for e in events if e.side == side and e.type == "DISCONNECTED"]
            if not got:
                yield Finding(f"{what}: side {side} got no DISCONNECTED", (), (act,))
                continue
            allowed = reporter(profile, got[0]).remote_access_statuses
            if got[0].status not in allowed:
                yield Finding(
                    f"{what}: side {side} got DISCONNECTED({got[0].status}), expected one of "
                    f"{sorted(allowed)}",
                    (got[0],),
                    (act,),
                )


RULES = (_remote_access_error,)
