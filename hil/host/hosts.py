"""The hosts of one run: an SSH pool and one agent per host, started lazily.

Everything that acts on lab hosts (pair setup, the restore journal, link
pulls, the CLI) goes through a ``Hosts`` so that a host is connected once and
its agent started once per run, and both are closed at the end of the run.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Self

from hil.inventory.model import Host, Inventory

if TYPE_CHECKING:
    from hil.agent import Agent
    from hil.reservation.store import Store
    from hil.ssh import SSHPool, SSHSession

log = logging.getLogger(__name__)


class Hosts:
    """SSH sessions and agents for the hosts of ``inventory``; a context manager.

    ``store`` is the reservation store whose restore journals this run uses
    (optional: only the journal needs it).
    """

    def __init__(
        self,
        inventory: Inventory,
        store: Store | None = None,
        pool: SSHPool | None = None,
        call_timeout: float | None = None,
    ) -> None:
        self.inventory = inventory
        self.store = store
        self.call_timeout = call_timeout
        self._pool = pool
        self._agents: dict[str, Agent] = {}
        self._lock = threading.Lock()

    def host(self, name: str) -> Host:
        """The inventory host ``name``; ``InputError`` naming the known hosts."""
        return self.inventory.host(name)

    def session(self, name: str) -> SSHSession:
        """The open SSH session to host ``name`` (connected on first use)."""
        self.host(name)
        with self._lock:
            if self._pool is None:
                from hil.ssh import SSHPool

                self._pool = SSHPool(self.inventory)
            pool = self._pool
        return pool.get(name)

    def agent(self, name: str) -> Agent:
        """The agent on host ``name``, started over its session on first use.  Once it has
        died it stays dead here: a caller holding state in it (a CM endpoint, a kernel-log
        cursor) must see that; :meth:`call` starts a new one."""
        host = self.host(name)
        with self._lock:
            agent = self._agents.get(name)
        if agent is not None:
            return agent
        from hil.agent import Agent

        agent = Agent.start(self.session(name), host)
        with self._lock:
            # Two threads may have raced to start one; keep the first.
            kept = self._agents.setdefault(name, agent)
        if kept is not agent:
            agent.close()
        return kept

    def call(self, name: str, method: str, /, timeout: float | None = None, **params: Any) -> Any:
        """One agent call on host ``name``, bounded by ``timeout`` (default ``call_timeout``,
        else the agent call layer's bound, :mod:`hil.timeouts`), on a new agent when the one
        before died (its connection cut, the host rebooted): a run's restore, made of such
        calls, must reach a host that is back."""
        agent = self.agent(name)
        if not agent.alive:
            with self._lock:
                if self._agents.get(name) is agent:
                    log.warning("%s: the agent is gone (%s); starting a new one", name, agent.death)
                    del self._agents[name]
            agent = self.agent(name)
        return agent.call(method, timeout=timeout or self.call_timeout, **params)

    def forget(self, name: str) -> None:
        """Drop host ``name``'s agent and SSH session (it was powered off or crashed):
        the next use connects and starts the agent anew.  Errors are logged, not raised."""
        with self._lock:
            agent = self._agents.pop(name, None)
            pool = self._pool
        # The session first: on a frozen host its connection still looks open, and closing
        # the agent over it would wait out the agent's close bound (10 s, then a TERM that
        # cannot arrive) before a recovery's power cycle.  Without the session the agent's
        # channel closes at once; a host that still runs ends the agent as its stdin closes.
        if pool is not None:
            pool.drop(name)
        if agent is not None:
            try:
                agent.close()
            except Exception as e:  # noqa: BLE001 -- a dead host's agent may fail any way
                log.info("%s: closing the old agent failed: %s", name, e)

    def close(self) -> None:
        """Stop every agent, then close every SSH session; errors are logged, not raised."""
        with self._lock:
            agents, self._agents = list(self._agents.items()), {}
            pool, self._pool = self._pool, None
        for name, agent in agents:
            try:
                agent.close()
            except Exception as e:  # noqa: BLE001 -- closing must reach every host
                log.warning("%s: closing the agent failed: %s", name, e)
        if pool is not None:
            pool.close_all()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
