"""``categories.json``: how Allure sorts failures into lab, contract and product problems.

The agreement with suites and the CM engine (see the package docstring):

- a **contract violation** is a failure whose message contains
  ``contract violation:`` or ``contract FAILED`` (what ``Verdict.to_text()``
  starts with), e.g. ``assert verdict.ok, verdict.to_text()``;
- a **wire rule broken** is a failure whose message contains ``wire FAILED``
  (what ``WireVerdict.to_text()`` starts with; the wire fixture fails a
  test with it);
- a **host crashed** failure is a test whose host panicked, oopsed or
  stopped answering under it (the crash plugin fails it with
  ``hil: HostCrashed: ...``, :meth:`hil.host.liveness.Crash.message`); it is in no other
  category;
- a **lab / infrastructure error** is an exception of the ``hil.errors.HilError``
  tree (SSH, agent, reservation, lab), the hil plugin's ``hil: <Class>: ...``
  fixture failures, or a pytest-timeout: the test could
  not judge the product;
- any other assertion failure is a **product failure**; any other exception
  a **test defect** (a bug in the suite or the framework);
- a failure of a test in the quarantine list (:mod:`hil.report.quarantine`)
  is **known flaky** and only that: the report plugin starts its message
  with ``known flaky: `` and every other category excludes such messages;
- a **fuzz finding** is a result ``hil peer fuzz --alluredir`` wrote for a case that
  failed on the DUT (:mod:`hil.report.fuzz`): its message starts with
  ``fuzz finding: `` and it is in that category only, as a known-flaky one is.

Allure matches ``messageRegex`` against the whole message (Java ``matches``),
whose first line is ``module.Class: text`` for exceptions outside builtins.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hil.errors import HilError

CONTRACT_MARKERS = ("contract violation:", "contract FAILED")
WIRE_MARKER = "wire FAILED"
TIMEOUT_MESSAGE = "Failed: Timeout"
# The hil plugin's fixtures turn a HilError into pytest.fail("hil: <Class>: ...").
FIXTURE_FAILURE = r"Failed: hil: \w+: "
INFRASTRUCTURE = "Lab / infrastructure errors"
HOST_CRASHED = "Host crashed"
# A crashed test's failure (hil.host.liveness.MESSAGE_PREFIX), as pytest.fail words it.
CRASH_FAILURE = r"Failed: hil: HostCrashed: "
KNOWN_FLAKY = "Known flaky"
KNOWN_FLAKY_PREFIX = "known flaky: "
FUZZ_FINDING = "Fuzz findings"
FUZZ_FINDING_PREFIX = "fuzz finding: "


def infrastructure_classes() -> list[str]:
    """The qualified names of every HilError subclass imported so far."""
    seen: list[str] = []
    todo: list[type] = [HilError]
    while todo:
        cls = todo.pop()
        name = f"{cls.__module__}.{cls.__qualname__}"
        if name not in seen:
            seen.append(name)
            todo.extend(cls.__subclasses__())
    return sorted(seen)


def _infra_regex() -> str:
    names = "|".join(re.escape(n) for n in infrastructure_classes())
    return rf"(?:(?:{names}): .*|{FIXTURE_FAILURE}.*|{re.escape(TIMEOUT_MESSAGE)}.*)"


def categories() -> list[dict[str, Any]]:
    """The categories, most specific first."""
    contract = "|".join(re.escape(m) for m in CONTRACT_MARKERS)
    wire = re.escape(WIRE_MARKER)
    judged = f"{contract}|{wire}"  # a verdict's failure, never a product or test defect
    infra = _infra_regex()
    known = re.escape(KNOWN_FLAKY_PREFIX)
    fuzz = re.escape(FUZZ_FINDING_PREFIX)
    # A known-flaky failure and a fuzz finding are each in their own category only.
    apart = f"(?!{known}|{fuzz})"
    crash = CRASH_FAILURE
    return [
        {
            "name": KNOWN_FLAKY,
            "description": "A test of the quarantine list (suites/known-flaky.yaml) failed: "
            "counted and shown apart; it does not fail the run.",
            "matchedStatuses": ["failed", "broken"],
            "messageRegex": rf"(?s){known}.*",
        },
        {
            "name": FUZZ_FINDING,
            "description": "A fuzz case (hil peer fuzz) failed on the DUT: see the replay "
            "scenario, the kernel log and why it failed, attached (docs/peer.md, Fuzzing).",
            "matchedStatuses": ["failed"],
            "messageRegex": rf"(?s){fuzz}.*",
        },
        {
            "name": HOST_CRASHED,
            "description": "A host panicked, oopsed or stopped answering during the test: "
            "the test was ended; see the host's last kernel log lines attached.",
            "matchedStatuses": ["failed", "broken"],
            "messageRegex": rf"(?s){apart}{crash}.*",
        },
        {
            "name": "Contract violations",
            "description": "The RNIC broke the iWARP CM contract (see the verdict attachment).",
            "matchedStatuses": ["failed", "broken"],
            "messageRegex": rf"(?s){apart}(?!{crash}).*(?:{contract}).*",
        },
        {
            "name": "Wire rules broken",
            "description": "The packets on the wire broke a wire rule (see the wire verdict "
            "and the exchange attachments).",
            "matchedStatuses": ["failed", "broken"],
            "messageRegex": rf"(?s){apart}(?!{crash}).*(?:{wire}).*",
        },
        {
            "name": INFRASTRUCTURE,
            "description": "SSH, agent, reservation or lab failure: the product was not judged.",
            "matchedStatuses": ["failed", "broken"],
            "messageRegex": rf"(?s){apart}(?!{crash}){infra}",
        },
        {
            "name": "Product failures",
            "description": "A check on the product failed outside the CM contract.",
            "matchedStatuses": ["failed"],
            "messageRegex": rf"(?s){apart}(?!.*(?:{judged}))(?!{infra}).*",
        },
        {
            "name": "Test defects",
            "description": "An unexpected exception in a suite or in hil itself.",
            "matchedStatuses": ["broken"],
            "messageRegex": rf"(?s){apart}(?!.*(?:{judged}))(?!{infra}).*",
        },
    ]


def write_categories(alluredir: Path) -> Path:
    """Write ``categories.json`` into the results directory."""
    path = alluredir / "categories.json"
    path.write_text(json.dumps(categories(), indent=1))
    return path


def category_in(cats: list[dict[str, Any]], status: str, message: str) -> str | None:
    """The first of ``cats`` (a ``categories.json``) that Allure gives a result, in Python."""
    for cat in cats:
        if status in cat.get("matchedStatuses", []) and re.fullmatch(cat["messageRegex"], message):
            return str(cat["name"])
    return None


def category_of(status: str, message: str) -> str | None:
    """The category name Allure will give a result (what the regexes say, in Python)."""
    return category_in(categories(), status, message)
