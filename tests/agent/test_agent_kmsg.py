"""The kernel log from a cursor, through the real agent and /dev/kmsg."""

from __future__ import annotations

import uuid

from hil.agent import Agent


def _log(text: str) -> None:
    with open("/dev/kmsg", "w") as f:
        f.write(text + "\n")


def test_read_returns_exactly_what_was_logged_after_the_cursor(host_agent: Agent) -> None:
    before, during, after = (
        f"hil-test {uuid.uuid4().hex} {w}" for w in ("before", "during", "after")
    )
    _log(before)
    cursor = host_agent.kmsg_cursor()
    _log(during)
    log = host_agent.kmsg_read(cursor)
    assert during in log.messages() and before not in log.messages()
    mine = [r for r in log.records if r.message == during][0]
    assert mine.priority in range(8) and mine.seq > 0 and mine.usec > 0
    assert log.lost == 0
    _log(after)
    later = host_agent.kmsg_read(cursor)  # the cursor moved on
    assert after in later.messages() and during not in later.messages()
    assert all(r.seq > mine.seq for r in later.records)
    host_agent.kmsg_close(cursor)


def test_cursor_works_from_inside_a_network_namespace(agent: Agent) -> None:
    marker = f"hil-test {uuid.uuid4().hex} netns"
    cursor = agent.kmsg_cursor()
    _log(marker)
    assert marker in agent.kmsg_read(cursor).messages()
