"""The agent that runs on a lab host, inside one zipapp.

This package imports nothing from the rest of ``hil`` but the agent protocol
(``hil.agent.protocol``, bundled beside it): it runs with the host's own
python3 (stdlib only) plus the packages bundled next to it in the zipapp
(pyroute2).  ``cm/`` holds the CM endpoints: the agent's methods for them and
the worker process each one runs in.  The controller imports nothing from
here: it builds the zipapp from these files and speaks the protocol.
"""
