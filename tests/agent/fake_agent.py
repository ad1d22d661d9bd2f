"""A stand-in agent for protocol tests: misbehaves on purpose, as argv[1] says.

- ``mismatch``: announces a protocol version nobody speaks.
- ``mute``: handshakes, then never answers.
- ``die``: handshakes, then on the first request writes to stderr and exits 3.
- ``nohello``: never handshakes (but exits when its stdin closes).
- ``noisy``: prints lines that are not protocol, then answers "ok" to all.
"""

import json
import sys

from hil.agent.protocol import PROTOCOL_VERSION


def hello(protocol: int) -> None:
    msg = {
        "agent": "hil",
        "protocol": protocol,
        "hash": "fake",
        "pid": 1,
        "python": "3",
        "kernel": "k",
        "uid": 0,
        "methods": ["ping"],
    }
    print(json.dumps(msg), flush=True)


mode = sys.argv[1]
if mode == "nohello":
    sys.stdin.read()
    sys.exit(0)
hello(999 if mode == "mismatch" else PROTOCOL_VERSION)
if mode == "noisy":
    print("a library talking\n42", flush=True)
for line in sys.stdin:
    if mode == "noisy":
        print(json.dumps({"id": json.loads(line)["id"], "result": "ok"}), flush=True)
    if mode == "die":
        print("Traceback: fake agent crashed on purpose", file=sys.stderr, flush=True)
        sys.exit(3)
