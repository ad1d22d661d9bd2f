"""The remote agent: a zipapp the controller uploads to each lab host and talks
to over JSON lines on the SSH channel, to configure links, addresses, sysctls
and RDMA devices and to read the kernel log.

    with Agent.start(session, host) as agent:
        before = agent.set_link("eth1", up=True, mtu=9000)
        agent.add_address("eth1", "198.18.0.1/24")

See docs/agent.md for the protocol and how to add an operation.
"""

from hil.agent.agent import Agent
from hil.agent.build import Bundle, build
from hil.agent.client import AgentCallError, Hello
from hil.agent.protocol import PROTOCOL_VERSION
from hil.agent.types import (
    AddressInfo,
    CommandResult,
    DriverInfo,
    KernelLog,
    KmsgRecord,
    LinkInfo,
    RdmaDevice,
    RdmaLink,
)

__all__ = [
    "PROTOCOL_VERSION",
    "AddressInfo",
    "Agent",
    "AgentCallError",
    "Bundle",
    "CommandResult",
    "DriverInfo",
    "Hello",
    "KernelLog",
    "KmsgRecord",
    "LinkInfo",
    "RdmaDevice",
    "RdmaLink",
    "build",
]
