"""The exception tree of hil.

Every error a lab engineer can meet is one of these, and its message says
what was seen and what to do.  The CLI maps each branch to an exit code::

    HilError                      exit 3  infrastructure (default)
    ├── InputError                exit 1  bad input: fix the file or the arguments
    │   ├── InventoryError                  located: file:line: yaml.path: message
    │   └── RequirementError                a --require expression that does not parse
    ├── BusyError                 exit 2  a pair is held by someone else
    ├── WaitTimeout               exit 2  waited for a pair, or for a state, too long
    ├── NotReady                  exit 5  hosts a run could not be trusted on (readiness)
    ├── LeaseLost                 exit 3  our lease expired and was taken over
    ├── StoreError                exit 3  the reservation store failed
    ├── RemoteError               exit 3  something on a lab host failed
    │   ├── SSHError
    │   │   ├── Unreachable
    │   │   ├── AuthenticationFailed
    │   │   ├── HostKeyError
    │   │   ├── CommandTimeout          (also exit 2)
    │   │   └── CommandFailed
    │   └── AgentError
    └── LabError                  exit 3  the virtual lab could not be built or run
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_INPUT = 1
EXIT_BUSY = 2
EXIT_INFRA = 3
EXIT_VIOLATION = 4  # what was judged broke a rule: the CM contract, a wire rule
EXIT_NOT_READY = 5  # a readiness check failed: a run on these hosts would be untrustworthy


class HilError(Exception):
    """Base of every hil error; ``exit_code`` is what the CLI exits with."""

    exit_code = EXIT_INFRA


class InputError(HilError):
    """The user gave us something we cannot use (file, argument, value)."""

    exit_code = EXIT_INPUT


class InventoryError(InputError):
    """An inventory problem located at a file, a line and a YAML path."""

    def __init__(self, file: str, line: int | None, path: str, message: str) -> None:
        self.file = file
        self.line = line
        self.path = path
        self.message = message
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {path}: {message}" if path else f"{where}: {message}")


class RequirementError(InputError):
    """A requirement such as ``speed>=25000`` that does not parse."""


class BusyError(HilError):
    """The pair (or every matching pair) is held by another run."""

    exit_code = EXIT_BUSY


class WaitTimeout(HilError):
    """We waited for something (a pair, a link state) and it did not come."""

    exit_code = EXIT_BUSY


class NotReady(HilError):
    """A host or pair failed a readiness check (wrong firmware, no iwpmd, ...): each
    failing finding and its fix are in the message."""

    exit_code = EXIT_NOT_READY


class LeaseLost(HilError):
    """Our lease expired (heartbeat missed) and another holder took the pair."""


class StoreError(HilError):
    """The reservation store is unreachable or misbehaves."""


class RemoteError(HilError):
    """An operation on a lab host failed; ``host`` names it."""

    def __init__(self, host: str, message: str) -> None:
        self.host = host
        super().__init__(f"{host}: {message}")


class SSHError(RemoteError):
    """The SSH transport to a host failed."""


class Unreachable(SSHError):
    """No TCP connection or SSH handshake with the host within the timeout."""


class AuthenticationFailed(SSHError):
    """The host refused our key or user."""


class HostKeyError(SSHError):
    """The host's key is unknown or differs from known_hosts."""


class CommandTimeout(SSHError):
    """A remote command or call did not finish within its timeout."""

    exit_code = EXIT_BUSY


class CommandFailed(SSHError):
    """A remote command exited non-zero; keeps status and output for callers."""

    def __init__(self, host: str, argv: list[str], status: int, stdout: str, stderr: str) -> None:
        self.argv = argv
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
        tail = "\n".join(stderr.strip().splitlines()[-10:])
        super().__init__(
            host, f"{' '.join(argv)!s} exited {status}" + (f": {tail}" if tail else "")
        )


class AgentError(RemoteError):
    """The remote agent failed to start, or a call into it failed."""


class LabError(HilError):
    """The virtual lab (kernel build, guests) failed."""
