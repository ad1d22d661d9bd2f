"""SSH secrets in the inventory: ``ssh.key_passphrase`` and ``ssh.password``.

Each is ``{env: NAME}`` or literal text; loading never needs the value, and
nothing that prints an inventory (repr, the document, ``hil inventory show``)
prints it: ``$NAME`` / ``{"env": NAME}``, or ``<secret>`` for a literal.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from hil.errors import InventoryError
from hil.inventory import Secret, inventory_document, load

Hil = Callable[..., subprocess.CompletedProcess[str]]

# Quotes and a backslash: escaped in a repr or JSON; the mark is what every escaping keeps.
MARK = "sekr3t-Xq7"
LITERAL = f"{MARK} 'p\"w\\"
INVENTORY = f"""\
hosts:
  a:
    ssh:
      host: a.lab.example
      identity_file: keys/lab
      key_passphrase: {{env: HIL_TEST_PASSPHRASE}}
      password: {json.dumps(LITERAL)}
  b:
    ssh:
      host: b.lab.example
      password: {{env: HIL_TEST_PASSWORD}}
"""


@pytest.fixture
def inventory_file(tmp_path: Path) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY)
    return path


def test_secrets_load_as_env_references_or_literals(
    inventory_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HIL_TEST_PASSPHRASE", raising=False)
    inv = load(inventory_file)  # no variable needed to load
    a, b = inv.hosts["a"].ssh, inv.hosts["b"].ssh
    assert a.key_passphrase == Secret(env="HIL_TEST_PASSPHRASE")
    assert a.key_passphrase.value() is None
    monkeypatch.setenv("HIL_TEST_PASSPHRASE", "from the environment")
    assert a.key_passphrase.value() == "from the environment"
    assert a.password == Secret(literal=LITERAL)
    assert a.password is not None and a.password.value() == LITERAL
    assert b.password == Secret(env="HIL_TEST_PASSWORD")
    assert b.key_passphrase is None


def test_nothing_that_prints_an_inventory_prints_a_literal(inventory_file: Path) -> None:
    inv = load(inventory_file)
    host = inv.hosts["a"]
    shown = [
        repr(inv),
        str(host),
        repr(dataclasses.asdict(host)),
        str(host.ssh.password),
        f"{host.ssh.password}",
        json.dumps(inventory_document(inv)),
    ]
    for text in shown:
        assert MARK not in text
    assert "Secret(<secret>)" in repr(host)
    assert "Secret($HIL_TEST_PASSPHRASE)" in repr(host)


def test_the_document_names_the_variable_or_says_secret(inventory_file: Path) -> None:
    doc = inventory_document(load(inventory_file))
    assert doc["hosts"]["a"]["ssh"]["key_passphrase"] == {"env": "HIL_TEST_PASSPHRASE"}
    assert doc["hosts"]["a"]["ssh"]["password"] == "<secret>"
    assert doc["hosts"]["b"]["ssh"]["password"] == {"env": "HIL_TEST_PASSWORD"}
    assert doc["hosts"]["b"]["ssh"]["key_passphrase"] is None


def test_hil_inventory_show_never_prints_the_secret(hil: Hil, inventory_file: Path) -> None:
    for args in ([], ["--json"]):
        done = hil("inventory", "show", str(inventory_file), *args)
        assert done.returncode == 0, done.stderr
        assert MARK not in done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["hosts"]["a"]["ssh"]["password"] == "<secret>"


@pytest.mark.parametrize(
    ("value", "line", "path", "message"),
    [
        (
            "{env: 1BAD}",
            6,
            "hosts.a.ssh.key_passphrase",
            "'1BAD' is not an environment variable name (like HIL_SSH_PASSWORD)",
        ),
        (
            "{env: X, file: y}",
            6,
            "hosts.a.ssh.key_passphrase.file",
            "unknown key 'file' (allowed: env)",
        ),
        (
            "{}",
            6,
            "hosts.a.ssh.key_passphrase",
            "missing required key 'env'",
        ),
        (
            '""',
            6,
            "hosts.a.ssh.key_passphrase",
            "expected a secret, got an empty string (or use {env: NAME})",
        ),
        ("[a]", 6, "hosts.a.ssh.key_passphrase", "expected a string, got a list"),
    ],
)
def test_a_bad_secret_is_located(
    tmp_path: Path, value: str, line: int, path: str, message: str
) -> None:
    file = tmp_path / "bad.yaml"
    file.write_text(INVENTORY.replace("{env: HIL_TEST_PASSPHRASE}", value))
    with pytest.raises(InventoryError) as info:
        load(file)
    assert str(info.value) == f"{file}:{line}: {path}: {message}"


def test_a_secret_is_one_of_env_or_literal() -> None:
    with pytest.raises(ValueError, match="either env or literal"):
        Secret()
    with pytest.raises(ValueError, match="not an environment variable name"):
        Secret(env="A-B")
