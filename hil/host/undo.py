"""Undo entries: what one is, the kinds there are, and how one is carried out.

An entry is JSON-safe data, not a closure, so that another process (a
replay after a crash) can carry it out: its ``kind`` names a registered
undo (``agent``, ``ssh``, or one another package registers through
:mod:`hil.host.extensions`), ``what`` says it for people.  Entries are
checked when they are made (:func:`check_entry`, :func:`agent_undo`), not
by a replay days later.  :mod:`hil.host.journal` records and replays them.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hil import tools
from hil.agent.client import decode_reply
from hil.agent.protocol import (
    METHODS,
    MethodName,
    ProtocolMismatch,
    RunReply,
    is_method_name,
)
from hil.errors import AgentError, CommandFailed, InputError
from hil.host.extensions import ExtensionRegistry

if TYPE_CHECKING:
    from hil.host.hosts import Hosts

log = logging.getLogger(__name__)


# Agent error kinds and errnos that mean "what the undo removes is gone already".
_MISSING_KINDS = {"not_found"}
_MISSING_ERRNOS = {"ENOENT", "ENODEV", "EADDRNOTAVAIL", "ESRCH"}
# ``undo(hosts, host, entry, timeout)`` carries out one journal entry of its kind.
UndoFn = Callable[["Hosts", str, dict[str, Any], float], None]
_undo_kinds = ExtensionRegistry[UndoFn]("undo registered for journal entries of kind", "made them")


def register_undo_kind(kind: str, undo: UndoFn) -> None:
    """Let journal entries of ``kind`` be undone by ``undo`` (see :mod:`hil.host.extensions`)."""
    _undo_kinds.register(undo, name=kind)


def undo_kind(kind: str) -> UndoFn:
    """The undo of journal entries of ``kind``; InputError when nothing registered it."""
    return _undo_kinds[kind]


# What tc and ip print when the thing to delete is not there ("handle of zero": tc asked to
# delete a root qdisc where the kernel's default is, i.e. none was added).
_MISSING_TEXT = re.compile(
    r"not found|[Cc]annot find|No such file or directory|does not exist|handle of zero"
)


def agent_undo(method: MethodName, what: str, **params: Any) -> dict[str, Any]:
    """An undo entry that calls agent ``method`` with ``params`` on the entry's host.

    ``method`` is one of the agent protocol's methods (mypy checks the name)
    and ``params`` must be what that method declares, names and types: both
    are checked here, before the change is made, not by a replay days later in
    another process.  The entry is the same JSON as it always was.
    """
    entry = {"kind": "agent", "method": method, "params": params, "what": what}
    _check_agent_entry(entry)
    return entry


def nft_table_name(purpose: str, netdev: str) -> str:
    """hil's nftables ``netdev`` table for ``purpose`` on ``netdev`` (a blackhole pull's,
    an MSS clamp's, an MPA request drop's): a name nft takes, one per netdev."""
    return f"hil_{purpose}_" + re.sub(r"[^A-Za-z0-9_]", "_", netdev)


def nft_table_undo(table: str, what: str, timeout: float) -> dict[str, Any]:
    """The undo of an nftables ``netdev`` table hil is about to load (a blackhole pull's,
    an MSS clamp's): its deletion, done already when the table is gone."""
    argv = tools.argv("nft", "delete", "table", "netdev", table)
    entry = agent_undo("run", what, argv=argv)
    entry.update(timeout=timeout, missing_ok=True)
    return entry


def _check_agent_entry(entry: dict[str, Any]) -> None:
    """Refuse an agent entry whose method the protocol does not declare, or whose
    params that method does not take."""
    method, params = entry.get("method"), entry.get("params")
    if not isinstance(method, str) or not is_method_name(method):
        raise TypeError(
            f"an agent undo entry needs an agent method "
            f"(hil.agent.protocol.MethodName), not {method!r}: {entry!r}"
        )
    if not isinstance(params, dict):
        raise TypeError(f"an agent undo entry needs params as a dict: {entry!r}")
    try:
        METHODS[method].check_params(params)
    except ProtocolMismatch as e:
        raise TypeError(f"undo entry {entry.get('what')!r}: {e}") from None


def ssh_undo(on: str, argv: list[str], what: str) -> dict[str, Any]:
    """An undo entry that runs ``argv`` over SSH on inventory host ``on``."""
    return {"kind": "ssh", "on": on, "argv": list(argv), "what": what}


def check_entry(entry: dict[str, Any]) -> None:
    """Refuse an entry that could not be replayed by another process."""
    if not isinstance(entry.get("kind"), str) or not entry.get("what"):
        raise TypeError(f"an undo entry needs a kind and what: {entry!r}")
    try:
        undo_kind(entry["kind"])
    except InputError as e:
        raise TypeError(str(e)) from None
    if entry["kind"] == "agent":
        _check_agent_entry(entry)
    json.dumps(entry)  # TypeError for anything not JSON-safe (a closure, a set)
    for follow in entry.get("then", ()):
        check_entry(follow)


def _is_missing(error: Exception) -> bool:
    kind = getattr(error, "kind", None)
    details = getattr(error, "details", None) or {}
    if kind in _MISSING_KINDS or details.get("errname") in _MISSING_ERRNOS:
        return True
    return kind == "command_failed" and bool(_MISSING_TEXT.search(str(details.get("stderr", ""))))


def apply_undo(hosts: Hosts, host: str, entry: dict[str, Any], timeout: float) -> None:
    """Carry out one undo entry of ``host`` (and its ``then`` entries)."""
    undo = undo_kind(entry["kind"])
    try:
        undo(hosts, host, entry, timeout)
    except AgentError as e:
        if not (entry.get("missing_ok") and _is_missing(e)):
            raise
        log.info("%s: %s: already undone (%s)", host, entry["what"], e)
    for follow in entry.get("then", ()):
        apply_undo(hosts, host, follow, timeout)


def _ssh_undo(hosts: Hosts, host: str, entry: dict[str, Any], timeout: float) -> None:
    hosts.session(entry["on"]).run(list(entry["argv"]), timeout=timeout, check=True)


def _agent_undo(hosts: Hosts, host: str, entry: dict[str, Any], timeout: float) -> None:
    method, params = entry["method"], entry["params"]
    result = hosts.call(host, method, timeout=entry.get("timeout", timeout), **params)
    if method != "run":
        return
    done = decode_reply(hosts.agent(host), "run reply", RunReply, result)
    if done["status"] != 0:
        if entry.get("missing_ok") and _MISSING_TEXT.search(done["stderr"]):
            log.info("%s: %s: already undone (%s)", host, entry["what"], done["stderr"].strip())
            return
        raise CommandFailed(
            host, list(params["argv"]), done["status"], done["stdout"], done["stderr"]
        )


register_undo_kind("agent", _agent_undo)
register_undo_kind("ssh", _ssh_undo)
