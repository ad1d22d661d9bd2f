"""A copy of one ci/ script beside stand-ins for what it calls, for its offline tests.

The stand-ins (``ci/install``, ``.venv/bin/hil``, ``.venv/bin/python``) append
"NAME ARGS" to the copy's calls.log, then run the body a test gives them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUB = """#!/usr/bin/env bash
echo "{name} $*" >>"$(dirname "$0")/{up}calls.log"
{body}
"""


def ci_copy(tmp_path: Path, script: str, hil_body: str = "", python_body: str = "") -> Path:
    """``tmp_path`` holding ci/``script`` and the stand-ins, each with its body."""
    (tmp_path / "ci").mkdir()
    shutil.copy(ROOT / "ci" / script, tmp_path / "ci" / script)
    stubs = {
        "ci/install": ("install", "../", ""),
        ".venv/bin/hil": ("hil", "../../", hil_body),
        ".venv/bin/python": ("python", "../../", python_body),
    }
    for rel, (name, up, body) in stubs.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(STUB.format(name=name, up=up, body=body))
        path.chmod(0o755)
    return tmp_path
