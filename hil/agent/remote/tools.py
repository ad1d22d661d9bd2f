"""The commands the agent runs on a host by itself, each with its Debian package.

The zipapp holds only this package and pyroute2, so the agent cannot import
``hil.tools`` (the controller's table of every command hil runs); it keeps
this short list instead, and ``tests/test_tools.py`` checks that the table
has each command with the same package.
"""

from __future__ import annotations

RDMA = "rdma"
COMMANDS: dict[str, str] = {
    RDMA: "iproute2",
}
