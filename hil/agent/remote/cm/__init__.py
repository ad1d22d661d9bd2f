"""The agent's CM endpoints: its methods for them (``methods.py``) and the worker
process each endpoint runs in (``server.py``, ``worker.py`` and what they use)."""
