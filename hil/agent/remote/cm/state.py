"""What a script (``script.py``) and a storm (``storm*.py``) use of the worker they run in.

:class:`worker.Worker` is one.  They take this rather than ``Worker`` since
``Worker``'s ``scenario`` and ``storm`` operations run them: ``worker.py``
imports them, so they cannot import it back.
"""

from __future__ import annotations

from typing import Protocol

from ..librdmacm import CMChannel
from .log import Log
from .poller import Poller


class WorkerState(Protocol):
    """The worker's event channel, its log and the poller that reads the one into the other."""

    ch: CMChannel
    log: Log
    poller: Poller
