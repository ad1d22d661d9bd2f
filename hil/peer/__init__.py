"""The reference peer, controller side: scenarios as data, the fuzzer's engine.

:mod:`hil.peer.vocab` is the frame field vocabulary, :mod:`hil.peer.scenario`
the scenario model and its YAML files, :mod:`hil.peer.builtin` the built-in
scenarios, :mod:`hil.peer.fuzz` and :mod:`hil.peer.shrink` the fuzzer's
mutations and its shrinking of a failing case (docs/peer-scenarios.md).  The
peer itself runs on a lab host inside the agent (hil/agent/remote/peer).
"""
