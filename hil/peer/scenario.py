"""Peer scenarios as data: a typed step list, read from and written to YAML, sent to the agent.

A scenario is what the reference peer does on one connection with the DUT
(issue 26, docs/peer-scenarios.md): the peer's ``role`` ("active": it connects
to the DUT's listener; "passive": it listens and the DUT connects), the name of
the expected DUT reaction (``expectation``, a class of hil/judge/peerexpect.py)
and its steps:

- :class:`Send`: a frame (``mpa_request``, ``mpa_reply``, ``fpdu``, or a close
  ``fin``/``rst``) with field overrides, and how its bytes go out (``segments``,
  ``gap``, ``coalesce_with_next``, ``truncate``);
- :class:`Expect`: a frame or close the DUT must send within a time, with the
  field values it must carry;
- :class:`Dut`: an action of the DUT's CM endpoint (listen, accept, ...);
- :class:`Sleep`: a pause.

One format serves the file, the agent and the fuzzer's replay files: a step is
the dict the agent's peer op takes (:func:`to_agent`), and a file is a mapping
of ``name``, ``role``, ``expectation``, ``description`` and ``steps``.
:func:`parse` checks every name and value against :mod:`hil.peer.vocab`; a bad
one is an InputError naming the file, the step (counted from 1) and the field.
Every value a scenario holds is immutable, so a scenario can key a cache
(the shrinker's).

A field of a send step may name a value the DUT shares at run time instead of a
number: ``{dut: stag}`` (YAML; ``{"dut": "stag"}`` as data) is the STag of the
region the last ``reg_mr`` step before it registered, ``{dut: base+len-2}`` a sum of
its ``stag``, ``base`` (the region's first byte's address, its TO) and ``len`` and
whole numbers (:class:`DutRef`, :data:`REF_NAMES`).  The loader refuses an unknown
name and a reference that no ``reg_mr`` step precedes; :func:`resolve` puts the
numbers in once the DUT's step has run (hil/peer/run.py).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias, cast, get_args

import yaml

from hil.errors import InputError
from hil.peer.vocab import FIELDS, REQUIRED, Value

Role = Literal["active", "passive"]
SendFrame = Literal["mpa_request", "mpa_reply", "fpdu", "fin", "rst"]
ExpectFrame = Literal["mpa_request", "mpa_reply", "fpdu", "fin", "rst", "close"]
# The DUT's side: its CM endpoint through the agent (hil/agent/remote/cm). "recv" waits for
# a receive completion (args: payload, the bytes it must hold): a name this module adds.
DutAction = Literal["listen", "connect", "accept", "reject", "post_recv", "reg_mr", "recv", "close"]
REF_NAMES = ("stag", "base", "len")  # what a reg_mr step shares (hil/peer/run.py)
_REF_TERM = re.compile(r"\s*([+-]?)\s*([a-z_]+|[0-9]+)\s*")


@dataclass(frozen=True)
class DutRef:
    """A field's value the DUT shares at run time: ``expr``, a sum of :data:`REF_NAMES`
    and whole numbers (``base+len-2``), read from the last ``reg_mr`` step's region."""

    expr: str

    def value(self, shared: Mapping[str, int]) -> int:
        """The number ``expr`` makes of the values ``shared`` (each of REF_NAMES)."""
        return sum(
            sign * (shared[t] if t in shared else int(t)) for sign, t in ref_terms(self.expr)
        )


def ref_terms(expr: str) -> list[tuple[int, str]]:
    """``expr``'s terms as (sign, name or digits); ValueError naming what is wrong."""
    terms: list[tuple[int, str]] = []
    at = 0
    while at < len(expr):
        m = _REF_TERM.match(expr, at)
        if m is None or m.end() == at or (terms and not m.group(1)):
            raise ValueError(f"cannot read {expr!r} from {expr[at:]!r} on")
        name = m.group(2)
        if not name.isdigit() and name not in REF_NAMES:
            raise ValueError(f"{name!r} is not a value the DUT shares ({', '.join(REF_NAMES)})")
        terms.append((-1 if m.group(1) == "-" else 1, name))
        at = m.end()
    if not terms:
        raise ValueError("an empty reference")
    return terms


Fields: TypeAlias = tuple[tuple[str, Value | DutRef], ...]
Arg = int | float | str | bool
STEP_KEYS = ("segments", "gap", "coalesce_with_next", "truncate")
FILE_KEYS = ("name", "role", "expectation", "description", "steps")


@dataclass(frozen=True)
class Send:
    """Send one frame: the codec's normal frame of ``frame`` with ``fields`` overridden.

    ``segments``: write the step's bytes in writes of these sizes, the rest in one;
    ``gap``: seconds between those writes (a frame that arrives in pieces over time);
    ``coalesce_with_next``: write them together with the next send step's;
    ``truncate``: write only the first that many bytes, never the rest.
    """

    frame: SendFrame
    fields: Fields = ()
    segments: tuple[int, ...] = ()
    coalesce_with_next: bool = False
    truncate: int | None = None
    gap: float = 0.0


@dataclass(frozen=True)
class Expect:
    """Wait at most ``within`` seconds for ``frame`` from the DUT; it must carry ``fields``."""

    frame: ExpectFrame
    within: float
    fields: Fields = ()


@dataclass(frozen=True)
class Dut:
    """An action of the DUT's CM endpoint, with its arguments."""

    action: DutAction
    args: tuple[tuple[str, Arg], ...] = ()


@dataclass(frozen=True)
class Sleep:
    """Wait ``seconds`` (give the DUT time to act on what it got)."""

    seconds: float


Step: TypeAlias = Send | Expect | Dut | Sleep


@dataclass(frozen=True)
class Scenario:
    """One connection's script: the peer's role, its steps and the expected reaction's class."""

    name: str
    role: Role
    expectation: str
    steps: tuple[Step, ...]
    description: str = ""


def to_agent(scenario: Scenario) -> list[dict[str, Any]]:
    """The step list the agent's peer op takes (JSON-able dicts, the shared format)."""
    return [_step_data(s) for s in scenario.steps]


def to_data(scenario: Scenario) -> dict[str, Any]:
    """The scenario as a YAML/JSON-able mapping (what :func:`parse` reads back)."""
    data: dict[str, Any] = {"name": scenario.name, "role": scenario.role}
    data["expectation"] = scenario.expectation
    if scenario.description:
        data["description"] = scenario.description
    data["steps"] = to_agent(scenario)
    return data


def _step_data(step: Step) -> dict[str, Any]:
    if isinstance(step, Send):
        fields = {n: {"dut": v.expr} if isinstance(v, DutRef) else v for n, v in step.fields}
        data: dict[str, Any] = {"step": "send", "frame": step.frame, **fields}
        if step.segments:
            data["segments"] = list(step.segments)
        if step.gap:
            data["gap"] = step.gap
        if step.coalesce_with_next:
            data["coalesce_with_next"] = True
        if step.truncate is not None:
            data["truncate"] = step.truncate
        return data
    if isinstance(step, Expect):
        data = {"step": "expect", "frame": step.frame, "within": step.within}
        return {**data, "fields": dict(step.fields)} if step.fields else data
    if isinstance(step, Dut):
        data = {"step": "dut", "action": step.action}
        return {**data, "args": dict(step.args)} if step.args else data
    return {"step": "sleep", "seconds": step.seconds}


def resolve(steps: list[dict[str, Any]], shared: Mapping[str, int]) -> list[dict[str, Any]]:
    """``steps`` (:func:`to_agent`'s) with each ``{"dut": expr}`` value made a number of
    the region ``shared`` (its ``stag``, ``base``, ``len``)."""
    return [
        {k: DutRef(v["dut"]).value(shared) if _is_ref(v) else v for k, v in step.items()}
        for step in steps
    ]


def _is_ref(value: object) -> bool:
    return isinstance(value, dict) and list(value) == ["dut"]


def load(path: str | os.PathLike[str]) -> Scenario:
    """The scenario in the YAML file ``path``; InputError naming the file when unusable."""
    file = os.fspath(path)
    try:
        data = yaml.safe_load(Path(file).read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"{file}: cannot read the scenario: {e.strerror or e}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise InputError(f"{file}: not a YAML scenario: {e}") from None
    if not isinstance(data, dict):
        raise InputError(f"{file}: a scenario is a mapping of {', '.join(FILE_KEYS)}")
    return parse(data, file, default_name=Path(file).stem)


def save(scenario: Scenario, path: str | os.PathLike[str]) -> None:
    """Write ``scenario`` to ``path`` as YAML that :func:`load` reads back equal."""
    text = yaml.safe_dump(to_data(scenario), sort_keys=False, default_flow_style=None)
    Path(path).write_text(text, encoding="utf-8")


def parse(data: Mapping[str, Any], where: str, default_name: str = "") -> Scenario:
    """A checked :class:`Scenario` from its mapping; ``where`` (a file) starts every error."""
    _only(data, FILE_KEYS, where)
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise InputError(f"{where}: name: expected a non-empty string, got {name!r}")
    steps = data.get("steps")
    if not isinstance(steps, list) or not steps:
        raise InputError(f"{where}: steps: expected a non-empty list of steps, got {steps!r}")
    parsed = tuple(_step(raw, f"{where}: step {i}") for i, raw in enumerate(steps, 1))
    _shared_before_use(parsed, where)
    return Scenario(
        name=name,
        role=cast(Role, _among(data.get("role"), get_args(Role), f"{where}: role")),
        expectation=_text(data.get("expectation"), f"{where}: expectation"),
        steps=parsed,
        description=_description(data.get("description", ""), where),
    )


def _shared_before_use(steps: tuple[Step, ...], where: str) -> None:
    """InputError for a ``{dut: ...}`` value that no ``reg_mr`` step comes before."""
    registered = False
    for i, step in enumerate(steps, 1):
        registered = registered or (isinstance(step, Dut) and step.action == "reg_mr")
        refs = (
            [n for n, v in step.fields if isinstance(v, DutRef)] if isinstance(step, Send) else []
        )
        if refs and not registered:
            raise InputError(
                f"{where}: step {i}: field {refs[0]!r}: names a value of the DUT's region, "
                "but no reg_mr step comes before it to register one"
            )


def _step(raw: object, where: str) -> Step:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a mapping with 'step', got {raw!r}")
    kind = _among(raw.get("step"), ("send", "expect", "dut", "sleep"), f"{where}: step")
    if kind == "send":
        return _send(raw, where)
    if kind == "expect":
        _only(raw, ("step", "frame", "within", "fields"), where)
        frame = cast(
            ExpectFrame, _among(raw.get("frame"), get_args(ExpectFrame), f"{where}: frame")
        )
        fields = raw.get("fields", {})
        if not isinstance(fields, dict):
            raise InputError(f"{where}: fields: expected a mapping, got {fields!r}")
        if any(isinstance(v, dict) for v in fields.values()):
            raise InputError(f"{where}: fields: only a send step's fields may be {{dut: EXPR}}")
        vocabulary = FIELDS.get(frame, {})
        return Expect(frame, _seconds(raw, "within", where), _fields(fields, vocabulary, where))
    if kind == "dut":
        _only(raw, ("step", "action", "args"), where)
        action = _among(raw.get("action"), get_args(DutAction), f"{where}: action")
        return Dut(cast(DutAction, action), _args(raw.get("args", {}), where))
    _only(raw, ("step", "seconds"), where)
    return Sleep(_seconds(raw, "seconds", where))


def _send(raw: dict[str, Any], where: str) -> Send:
    frame = cast(SendFrame, _among(raw.get("frame"), get_args(SendFrame), f"{where}: frame"))
    vocabulary = FIELDS[frame]
    _only(raw, ("step", "frame", *STEP_KEYS, *vocabulary), where, f"for a {frame} send")
    overrides = {k: v for k, v in raw.items() if k in vocabulary}
    for name in REQUIRED.get(frame, ()):
        if name not in overrides:
            raise InputError(f"{where}: field {name!r}: a {frame} send must name it")
    segments = raw.get("segments", [])
    if not isinstance(segments, list) or not all(_positive(n) for n in segments):
        raise InputError(f"{where}: field 'segments': expected a list of byte counts >= 1")
    coalesce = raw.get("coalesce_with_next", False)
    if not isinstance(coalesce, bool):
        raise InputError(f"{where}: field 'coalesce_with_next': expected true or false")
    truncate = raw.get("truncate")
    if truncate is not None and not (_positive(truncate) or truncate == 0):
        raise InputError(f"{where}: field 'truncate': expected a byte count >= 0")
    gap = _seconds(raw, "gap", where) if "gap" in raw else 0.0
    if gap and not segments:
        raise InputError(f"{where}: field 'gap': a gap lies between 'segments'; name them")
    fields = _fields(overrides, vocabulary, where)
    return Send(frame, fields, tuple(segments), coalesce, truncate, gap)


def _fields(values: Mapping[str, Any], vocabulary: Mapping[str, Any], where: str) -> Fields:
    _only(values, vocabulary, where)
    fields = []
    for name, value in values.items():
        if isinstance(value, dict):
            fields.append((name, _ref(value, vocabulary[name].kind, f"{where}: field {name!r}")))
            continue
        problem = vocabulary[name].problem(value)
        if problem:
            raise InputError(f"{where}: field {name!r}: {problem}")
        fields.append((name, value.lower() if vocabulary[name].kind == "hex" else value))
    return tuple(fields)


def _ref(value: Mapping[Any, Any], kind: str, where: str) -> DutRef:
    """A ``{dut: expr}`` value, checked (a number field only; known names)."""
    expr = value.get("dut")
    if list(value) != ["dut"] or not isinstance(expr, str):
        raise InputError(f"{where}: expected a value or {{dut: EXPR}}, got {dict(value)!r}")
    if kind != "int":
        raise InputError(f"{where}: {{dut: {expr}}}: only a number field can name the DUT's region")
    try:
        ref_terms(expr)
    except ValueError as e:
        raise InputError(f"{where}: {{dut: {expr}}}: {e}") from None
    return DutRef(expr)


def _args(raw: object, where: str) -> tuple[tuple[str, Arg], ...]:
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, int | float | str | bool) for k, v in raw.items()
    ):
        raise InputError(f"{where}: args: expected a mapping of names to single values")
    return tuple(raw.items())


def _only(data: Mapping[Any, Any], allowed: Collection[str], where: str, what: str = "") -> None:
    """InputError for the first key of ``data`` not in ``allowed`` (with the nearest one)."""
    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), list(allowed), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            suffix = f" {what}" if what else ""
            raise InputError(f"{where}: field {key!r}: unknown{suffix}{hint}")


def _among(value: object, allowed: tuple[str, ...], where: str) -> str:
    if value not in allowed:
        raise InputError(f"{where}: expected one of {', '.join(allowed)}, got {value!r}")
    return str(value)


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"{where}: expected a non-empty string, got {value!r}")
    return value


def _description(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{where}: description: expected a string, got {value!r}")
    return value


def _seconds(raw: Mapping[str, Any], key: str, where: str) -> float:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise InputError(f"{where}: field {key!r}: expected seconds >= 0, got {value!r}")
    return float(value)


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
