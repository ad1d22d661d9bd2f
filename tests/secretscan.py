"""Search a run's outputs for secrets, in the encodings a leak would take.

A secret can leave a run as itself, escaped inside a ``repr`` or JSON string
(a logged dict, an Allure attachment), escaped for XML (junit) or a URL, or
inside base64 (at any of the three byte alignments a surrounding blob can
give it); its longest run of letters and digits (8 or more) is searched
too, which no escaping changes.  ``find_leaks`` reads every file under the given roots (and their
names) and reports each place a secret is found, by the secret's label: a
report must never repeat the value.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
import xml.sax.saxutils
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

CORE_MIN = 8  # shorter runs of letters and digits could occur by chance
# Escapings a string meets on its way into a file; two of them can nest
# (a repr inside a JSON attachment, JSON inside a repr'd log record).
_ESCAPES: dict[str, Callable[[str], str]] = {
    "repr": lambda s: repr(s)[1:-1],
    "json": lambda s: json.dumps(s)[1:-1],
    "xml": lambda s: xml.sax.saxutils.escape(s, {'"': "&quot;"}),
    "url": lambda s: urllib.parse.quote_plus(s),
}


@dataclass(frozen=True)
class Leak:
    """A secret (named by its label) found in a file, and in which encoding."""

    path: Path
    label: str
    encoding: str
    offset: int  # -1: in the file's name

    def __str__(self) -> str:
        where = "its name" if self.offset < 0 else f"byte {self.offset}"
        return f"{self.path}: {self.label} ({self.encoding}) at {where}"


def encodings(value: str) -> dict[str, bytes]:
    """The forms of ``value`` to search for, by a name for each (duplicates dropped)."""
    forms = {"raw": value.encode()}
    forms |= {name: escape(value).encode() for name, escape in _ESCAPES.items()}
    forms |= {
        f"{outer}({inner})": escape(wrap(value)).encode()
        for outer, escape in _ESCAPES.items()
        for inner, wrap in _ESCAPES.items()
    }
    # Its longest run of letters and digits: no escaping changes it, whatever
    # a writer does with the quotes and backslashes around it.
    core = max(re.findall(r"[A-Za-z0-9]+", value), key=len, default="")
    if len(core) >= CORE_MIN:
        forms["core"] = core.encode()
    for k, core64 in enumerate(_base64_cores(value.encode())):
        forms[f"base64+{k}"] = core64
        forms[f"base64url+{k}"] = core64.translate(bytes.maketrans(b"+/", b"-_"))
    unique: dict[str, bytes] = {}
    for name, form in forms.items():
        if form not in unique.values():
            unique[name] = form
    return unique


def _base64_cores(data: bytes) -> list[bytes]:
    """The base64 characters that depend only on ``data``, for each alignment 0-2.

    Encoded after k other bytes, the first characters also carry bits of
    those bytes and the last one bits of what follows: both are cut off.
    """
    cores = []
    for k in range(3):
        encoded = base64.b64encode(bytes(k) + data)
        start = (8 * k + 5) // 6  # the first character with no bit of the k bytes before
        end = (8 * (k + len(data))) // 6  # characters whose 6 bits are all known
        cores.append(encoded[start:end])
    return cores


def find_leaks(roots: Iterable[Path], secrets: Mapping[str, str]) -> list[Leak]:
    """Where under ``roots`` (in files and file names) each secret appears.

    ``secrets`` maps a label (what a report may say) to the value.  One leak
    per file, secret and place (content or name): the first encoding found,
    in the order of :func:`encodings` (plain forms before the core and base64).
    """
    leaks = []
    for path in _files(roots):
        data = path.read_bytes()
        name = str(path).encode()
        for label, value in secrets.items():
            forms = encodings(value).items()
            in_name = next((enc for enc, form in forms if form in name), None)
            if in_name is not None:
                leaks.append(Leak(path, label, in_name, -1))
            found = next(((enc, data.find(form)) for enc, form in forms if form in data), None)
            if found is not None:
                leaks.append(Leak(path, label, *found))
    return leaks


def _files(roots: Iterable[Path]) -> list[Path]:
    found = []
    for root in roots:
        if root.is_file():
            found.append(root)
        else:
            found += sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    return found
