"""A CM peer for trying hil.agent.remote.librdmacm on real RDMA hosts (the lab's siw guests).

Run with the host's own python3, next to a copy of the ``librdmacm`` package
in a package named by ``--pkg`` (default ``cm.remote``: ``cm/`` laid out as the
zipapp's ``hil_agent/``, with ``remote/librdmacm/`` and ``protocol/``):

    python3 cmpeer.py server 198.18.0.2 7471 accept
    python3 cmpeer.py client 198.18.0.2 7471 --pdata c0ffee --disconnect
    python3 cmpeer.py client 198.18.0.2 7471 --abort          # QP to ERR instead
    python3 cmpeer.py server 198.18.0.2 7471 ignore           # never answer, and
    python3 cmpeer.py client 198.18.0.2 7471 --destroy-after 1  # destroy in CONN_SENT

Prints one JSON object a line: ``{"event": {...}}`` for each CM event and
``{"action": NAME, "result": "ok" | ERRNO_NAME, "us": DURATION}`` for each
call, so a test can build a timeline from it.  Every wait has a timeout.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import json
import os
import sys
import time
from typing import Any

RESOLVE_MS = 2000


def emit(**item: Any) -> None:
    """Print one JSON line, flushed (the reader is a remote pipe)."""
    print(json.dumps(item, sort_keys=True), flush=True)


def act(name: str, fn: Any, *args: Any) -> Any:
    """Run one call, print it with its result and duration, return its value or None."""
    start = time.monotonic_ns()
    try:
        value = fn(*args)
    except OSError as exc:
        emit(
            action=name,
            result=errno.errorcode.get(exc.errno or 0, str(exc.errno)),
            us=(time.monotonic_ns() - start) // 1000,
            message=str(exc),
        )
        return None
    emit(action=name, result="ok", us=(time.monotonic_ns() - start) // 1000)
    return value if value is not None else True


def wait(ch: Any, types: set[str], timeout_s: float) -> dict[str, Any] | None:
    """Print events until one of ``types`` comes (returned) or the timeout passes."""
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        ev: dict[str, Any] | None = ch.poll_event(left)
        if ev is None:
            continue
        emit(event=ev)
        if ev["type"] in types:
            return ev
    emit(timeout=sorted(types), after_s=timeout_s)
    return None


def server(ch: Any, args: argparse.Namespace) -> None:
    """Listen; accept, reject or ignore each request; after accepting, wait for DISCONNECTED."""
    listener = ch.create_id()
    act("bind", ch.bind, listener, args.addr, args.port)
    act("listen", ch.listen, listener, 8)
    emit(ready=True)
    for _ in range(args.count):
        req = wait(ch, {"CONNECT_REQUEST"}, args.timeout)
        if req is None:
            return
        if args.mode == "reject":
            act("reject", ch.reject, req["id"], b"no thanks")
            continue
        if args.mode == "ignore":
            wait(ch, {"never"}, args.timeout)  # print whatever comes
            continue
        act("create_qp", ch.create_qp, req["id"])
        act("post_recv", ch.post_recv, req["id"], 4)
        act("accept", ch.accept, req["id"], b"welcome")
        wait(ch, {"DISCONNECTED"}, args.timeout)
        act("destroy", ch.destroy_id, req["id"])


def client(ch: Any, args: argparse.Namespace) -> None:
    """Resolve, connect with private data, send a little, maybe disconnect, destroy."""
    h = ch.create_id()
    act("resolve_addr", ch.resolve_addr, h, args.addr, args.port, None, RESOLVE_MS)
    if not wait(ch, {"ADDR_RESOLVED", "ADDR_ERROR"}, args.timeout):
        return
    act("resolve_route", ch.resolve_route, h, RESOLVE_MS)
    if not wait(ch, {"ROUTE_RESOLVED", "ROUTE_ERROR"}, args.timeout):
        return
    act("create_qp", ch.create_qp, h)
    connecting = act("connect", ch.connect, h, bytes.fromhex(args.pdata))
    if connecting and args.destroy_after:
        time.sleep(args.destroy_after)
    elif connecting:
        reply = wait(ch, {"ESTABLISHED", "REJECTED", "UNREACHABLE", "CONNECT_ERROR"}, args.timeout)
        if reply and reply["type"] == "ESTABLISHED":
            act("post_send", ch.post_send, h, 1024)
            time.sleep(0.2)
            emit(completions=ch.poll_cq(h))
            if args.abort:
                act("qp_err", ch.qp_to_error, h)
                wait(ch, {"DISCONNECTED"}, args.timeout)
            elif args.disconnect:
                act("disconnect", ch.disconnect, h)
                wait(ch, {"DISCONNECTED"}, args.timeout)
                act("disconnect_again", ch.disconnect, h)
    emit(destroy_us=act("destroy", ch.destroy_id, h))


def main() -> int:
    """Parse arguments, open a channel, run the role."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pkg", default="cm.remote", help="package holding the librdmacm package")
    parser.add_argument("--timeout", type=float, default=15.0)
    sub = parser.add_subparsers(dest="role", required=True)
    srv = sub.add_parser("server")
    srv.add_argument("addr")
    srv.add_argument("port", type=int)
    srv.add_argument("mode", choices=("accept", "reject", "ignore"))
    srv.add_argument("--count", type=int, default=1)
    cli = sub.add_parser("client")
    cli.add_argument("addr")
    cli.add_argument("port", type=int)
    cli.add_argument("--pdata", default="")
    cli.add_argument("--disconnect", action="store_true")
    cli.add_argument("--abort", action="store_true", help="move the QP to ERR")
    cli.add_argument(
        "--destroy-after",
        type=float,
        default=0.0,
        help="destroy this many seconds after connect, without waiting",
    )
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    lib = importlib.import_module(f"{args.pkg}.librdmacm")
    try:
        with lib.CMChannel() as ch:
            (server if args.role == "server" else client)(ch, args)
    except lib.RdmaError as exc:
        emit(error=str(exc))
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
