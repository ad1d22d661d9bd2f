"""The leak search of tests/secretscan.py finds a planted secret, in each encoding.

Without these, the lab test that finds no secret in a run's outputs
(tests/test_secrets_lab.py) could pass because the search sees nothing.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from secretscan import Leak, encodings, find_leaks

SECRET = "hil pass'phr\"ase\\Xq7core9Z"
SECRETS = {"key passphrase": SECRET, "CI_JOB_TOKEN": "glcbt-64_Tok3nValue"}


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """An Allure results directory with harmless files."""
    d = tmp_path / "allure"
    d.mkdir()
    (d / "environment.properties").write_text("provider=siw\nprofile=siw\n")
    (d / "abc-attachment.txt").write_text("ssh.key_passphrase ($HIL_KEY_PASSPHRASE)\n")
    (d / "abc-result.json").write_text(json.dumps({"name": "test_storm", "status": "passed"}))
    return d


def test_clean_outputs_have_no_leak(results: Path) -> None:
    assert find_leaks([results], SECRETS) == []


@pytest.mark.parametrize(
    ("written", "encoding"),
    [
        (SECRET, "raw"),
        (repr({"passphrase": SECRET}), "repr"),
        (json.dumps({"passphrase": SECRET}), "json"),
        (json.dumps({"msg": repr({"passphrase": SECRET})}), "json(repr)"),
        ('<failure message="' + SECRET.replace('"', "&quot;") + '"/>', "xml"),
        # A writer whose escaping the search does not know: the core still shows.
        (SECRET.replace("'", "&apos;"), "core"),
    ],
)
def test_a_planted_secret_is_found_in_an_attachment(
    results: Path, written: str, encoding: str
) -> None:
    attachment = results / "def-attachment.txt"
    attachment.write_text(f"log line before\n{written}\nlog line after\n")
    (leak,) = find_leaks([results], SECRETS)
    assert (leak.path, leak.label, leak.encoding) == (attachment, "key passphrase", encoding)


@pytest.mark.parametrize("before", [b"", b"x", b"xy", b"xyz"])
def test_a_secret_inside_base64_is_found_at_any_alignment(results: Path, before: bytes) -> None:
    blob = base64.b64encode(before + SECRETS["CI_JOB_TOKEN"].encode() + b"tail")
    (results / "blob-attachment.json").write_bytes(b'{"data": "' + blob + b'"}')
    leaks = find_leaks([results], SECRETS)
    assert [(leak.label, leak.encoding[:7]) for leak in leaks] == [("CI_JOB_TOKEN", "base64+")]


def test_a_secret_in_a_file_name_is_found(results: Path) -> None:
    named = results / f"token-{SECRETS['CI_JOB_TOKEN']}.txt"
    named.write_text("nothing\n")
    assert find_leaks([results], SECRETS) == [Leak(named, "CI_JOB_TOKEN", "raw", -1)]


def test_a_report_of_a_leak_never_repeats_the_secret(results: Path) -> None:
    (results / "x.log").write_text(SECRET)
    (leak,) = find_leaks([results], SECRETS)
    assert str(leak) == f"{results / 'x.log'}: key passphrase (raw) at byte 0"
    assert "Xq7core9Z" not in str(leak) + repr(leak)


def test_every_encoding_of_a_secret_holds_its_core() -> None:
    forms = encodings(SECRET)
    assert forms["raw"] == SECRET.encode()
    assert forms["repr"] == b"hil pass\\'phr\"ase\\\\Xq7core9Z"
    assert forms["json"] == b"hil pass'phr\\\"ase\\\\Xq7core9Z"
    assert forms["core"] == b"Xq7core9Z"
    assert {"base64+0", "base64+1", "base64+2"} <= set(forms)
