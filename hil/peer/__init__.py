"""The reference peer, controller side: scenarios as data, the fuzzer's engine.

:mod:`hil.peer.vocab` is the frame field vocabulary, :mod:`hil.peer.scenario`
the scenario model and its YAML files, :mod:`hil.peer.builtin` the built-in
scenarios, :mod:`hil.peer.fuzz` and :mod:`hil.peer.shrink` the fuzzer's
mutations and its shrinking of a failing case (docs/peer-scenarios.md).  The
peer itself runs on a lab host inside the agent (hil/agent/remote/peer).

:mod:`hil.peer.builtin_errors` adds its scenarios to :mod:`hil.peer.builtin`'s registry;
it is imported here, so that whoever reads that registry finds them (it imports
``builtin``'s steps, so ``builtin`` cannot import it: tests/test_layers.py's no-cycle rule).
"""

from hil.peer import builtin_errors  # noqa: F401  (registers its scenarios)
