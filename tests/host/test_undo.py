"""Undo entries: checked against the agent protocol when they are made."""

from __future__ import annotations

import pytest

from hil.host.undo import agent_undo


def test_an_agent_undo_is_checked_against_the_protocol_when_it_is_made() -> None:
    with pytest.raises(TypeError, match=r"set_link params: SetLinkParams has no mtuu"):
        agent_undo("set_link", "restore mtu", netdev="eth1", mtuu=1500)
    with pytest.raises(TypeError, match=r"an agent method .*, not 'set_lnk'"):
        agent_undo("set_lnk", "restore mtu", netdev="eth1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"sysctl_set params.value: expected str, got 1"):
        agent_undo("sysctl_set", "restore x", name="x", value=1)
