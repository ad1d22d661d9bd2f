"""The agent that runs on a lab host, inside one zipapp.

This package imports nothing from the rest of ``hil``: it runs with the
host's own python3 (stdlib only) plus the packages bundled next to it in the
zipapp (pyroute2).  The controller imports it for its constants and for
``protocol``, the declaration of every message both ends exchange.
"""

from .protocol import PROTOCOL_VERSION

__all__ = ["AGENT_GRACE", "PROTOCOL_VERSION"]

# The agent answers a call that overran its timeout this much after it.
AGENT_GRACE = 0.5
