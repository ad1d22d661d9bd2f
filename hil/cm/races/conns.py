"""Connections and listeners a race's rounds start from, made by host-side scripts.

A race round needs its own connection (or listener); making each from the
controller costs round trips of tens of milliseconds on the lab, so the
active side connects a batch in one script and the passive listener
accepts in its worker.  Each connection's two ids are tied together by the
private data its connect carried (its tag).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hil.cm import steps
from hil.cm.scenario import Script, Step, run
from hil.cm.steps import StepFailed

if TYPE_CHECKING:
    from hil.cm.endpoint import Endpoint
    from hil.cm.recording import Recording
    from hil.cm.steps import Listener


@dataclass(frozen=True)
class Pair:
    """One established connection of a race round: its tag and both sides' ids."""

    tag: str
    active_id: str
    passive_id: str


def dial(rec: Recording, listener: Listener, tag: str) -> dict[str, object]:
    """The params of a connect to ``listener`` that carries ``tag`` as its private data."""
    return dial_port(rec, listener.ep.side, listener.port, tag)


def dial_port(rec: Recording, side: str, port: int, tag: str) -> dict[str, object]:
    """The params of a connect from the active side to ``side``'s ``port``, carrying
    ``tag`` as its private data (a listener a script makes)."""
    s = rec.session
    return {
        "dst": s.address(side),
        "port": port,
        "src": s.address(s.active),
        "private_data": tag.encode().hex(),
    }


def request_of(rec: Recording, tag: str) -> str | None:
    """The passive id of the CONNECT_REQUEST that carried ``tag`` (None: none came)."""
    for e in rec.events():
        if e.type == "CONNECT_REQUEST" and e.private_bytes.startswith(tag.encode()):
            return e.id
    return None


def connect_all(
    rec: Recording, active: Endpoint, listener: Listener, tags: list[str]
) -> list[Pair]:
    """Connect once per tag (one script) to an auto-accepting ``listener``; both sides
    ESTABLISHED, else :class:`StepFailed` naming the tag and what was seen."""
    script = tuple(
        Step("connect", name=f"c{i}", params=dial(rec, listener, tag)) for i, tag in enumerate(tags)
    )
    got = run(active, Script(script, deadline_s=steps.waits(rec.session).reply_s))
    pairs = []
    for tag, step in zip(tags, got.steps, strict=True):
        if not step.ok or step.id is None:
            raise StepFailed(active.host, f"race connect {tag}: {step.result}")
        steps.expect(active, "ESTABLISHED", step.id, f"race connect {tag}")
        passive = request_of(rec, tag) or _await_request(rec, listener, tag)
        steps.expect(listener.ep, "ESTABLISHED", passive, f"race accept {tag}")
        rec.label(tag, step.id, passive)
        pairs.append(Pair(tag, step.id, passive))
    return pairs


def _await_request(rec: Recording, listener: Listener, tag: str) -> str:
    steps.expect(listener.ep, "CONNECT_REQUEST", None, f"race request {tag}")
    found = request_of(rec, tag)
    while found is None:  # another round's request came first: the next one
        steps.expect(listener.ep, "CONNECT_REQUEST", None, f"race request {tag}")
        found = request_of(rec, tag)
    return found
