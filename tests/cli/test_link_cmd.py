"""``hil link``'s journal: fenced under a lease given with ``--lease`` (the recorded T6
pair's inventory; nothing connects)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from fake_hosts import T6_DATA

from hil.cli.link_cmd import _acting_on_link
from hil.errors import LeaseLost
from hil.reservation import Claim, Holder, open_store


def _args(store: Path, lease: str | None) -> argparse.Namespace:
    inventory = str(T6_DATA / "inventory.yaml")
    return argparse.Namespace(inventory=inventory, store=str(store), link="t6", lease=lease)


def test_a_pull_under_a_lease_is_fenced_by_its_token(tmp_path: Path) -> None:
    store_path = tmp_path / "store.db"
    with open_store(str(store_path)) as store:
        lease = store.try_acquire([Claim("t6", ("t6a", "t6b"))], Holder.current("test"), 60)
        assert lease is not None
        with _acting_on_link(_args(store_path, lease.id)) as (control, _):
            assert control.journal.token == lease.token
            store.release(lease.id)  # gone between the CLI's check and its record
            with pytest.raises(LeaseLost):
                control.journal.change(
                    "t6a", {"kind": "ssh", "on": "t6a", "argv": ["true"], "what": "nothing"}
                )
        assert store.journal_entries("t6a") == []


def test_a_pull_on_free_hosts_is_journaled_unfenced(tmp_path: Path) -> None:
    with _acting_on_link(_args(tmp_path / "store.db", None)) as (control, _):
        assert control.journal.token is None
        assert control.journal.lease_id.startswith("manual:")
