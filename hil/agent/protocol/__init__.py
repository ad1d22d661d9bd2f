"""The agent protocol, declared once: every message, method, request and reply.

Both ends import this package: the controller as ``hil.agent.protocol``,
the agent on the host as ``hil_agent.protocol`` (the zipapp bundles it
beside ``hil/agent/remote/``, as ``hil_agent/remote/``).  The declarations are
``TypedDict``s, so the wire stays plain JSON objects; ``Literal`` types name
the closed sets (methods, error kinds, CM operations, CM event types).
Callers import the package; it names every module's public declarations
(each module's ``__all__``).  One module per topic:

- ``names``: the closed sets (``MethodName``, ``ErrorKind``, ``CMEventType``, ...);
- ``envelope``: the handshake, a request, a result or an error answer;
- ``host``: the host's methods (system, netlink, ethtool, rdma, kmsg);
- ``endpoints``: the CM endpoints' methods (``cm_open``, ``cm_call``, ...), the clock;
- ``probes``: raw TCP exchanges, clock probes, the event channel close race;
- ``cmops``: a CM endpoint's operations (``cm_call``'s ``op``);
- ``cmevents``: a CM endpoint's log (events, its own actions) and ``events``;
- ``scenario``: scripts an endpoint runs by itself; ``storm``: storms;
- ``payload``: a connection's payload checked byte for byte;
- ``peer``: the reference peer's scenario runs (remote/peer/);
- the peer's frame codec: ``frames``, frames as fields, field overrides,
  ``FrameError``; ``mpa``, MPA request and reply frames and the v2 IRD/ORD words
  (RFC 5044 7.1, RFC 6581 5); ``crc32c``, MPA's CRC (RFC 3385); ``fpdu``, MPA
  framing of an FPDU (RFC 5044 4); ``ddp``, DDP tagged and untagged headers (RFC
  5041 4); ``rdmap``, RDMAP messages, a whole ULPDU (RFC 5040 4).  The peer sends
  them, and the controller's fuzzer rebuilds what a scenario puts on the stream
  (hil/peer/triggers.py); imported by module name, not named here;
- ``spec``: :class:`Method` and :class:`CMOp`, and their tables;
- ``checks``: checking a value against its declaration.

Each agent method is a :class:`Method`: its wire name, the ``TypedDict`` of
its params and the type of its reply; declaring one registers it in
``METHODS``.  The agent's own table (``main.METHODS``) must have exactly these
names, with functions whose parameters and return annotations are the
declared ones (tests/agent/test_protocol_spec.py checks both).  The
operations of a CM endpoint (``cm_call``'s ``op``) are :class:`CMOp`\\s in
``CM_OPS``, checked against ``cm.worker.OPS`` the same way.

A reply is decoded with :meth:`Method.decode`: the value, checked against its
declared type (required keys present, every known key of the right type,
literals one of theirs) and typed for the caller; keys it does not declare
are ignored (``strict=True``, as the tests decode, refuses them).  A mismatch
raises :class:`ProtocolMismatch` naming the path (``log[3].type``).
Decoding evaluates the annotations, ``X | None`` included, so it needs
python >= 3.10: the controller decodes; the agent (python >= 3.9) only
declares and builds.

Runs on the host's python (>= 3.9), stdlib only: these modules import nothing
but the stdlib and each other, and their annotations stay strings (``from
__future__ import annotations``) until a decoder evaluates them, in the module
that declares them: each imports every name its annotations use.
"""

from .checks import *  # noqa: F403
from .cmevents import *  # noqa: F403
from .cmops import *  # noqa: F403
from .endpoints import *  # noqa: F403
from .envelope import *  # noqa: F403
from .host import *  # noqa: F403
from .names import *  # noqa: F403
from .payload import *  # noqa: F403
from .peer import *  # noqa: F403
from .probes import *  # noqa: F403
from .scenario import *  # noqa: F403
from .spec import *  # noqa: F403
from .storm import *  # noqa: F403
