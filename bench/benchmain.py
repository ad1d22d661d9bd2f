"""One way out of every benchmark: a clear message and an exit code, never a traceback.

``sys.exit(benchmain.run("clock", main))`` runs a benchmark's ``main`` inside
:class:`hil.cli.interrupts.Interrupts`, so SIGINT and SIGTERM unwind its PairRun
(the pair restored, the lease released) as they do for a ``hil`` command, and turns
what stopped it into one line on stderr naming the benchmark:

- bad input (:class:`hil.errors.InputError`): the message, exit 1;
- a lab, SSH or agent error (:class:`hil.errors.HilError`): its kind and message, exit 3;
- an interrupt: "NAME: interrupted", exit 3.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from hil.cli.interrupts import Interrupts
from hil.errors import EXIT_INFRA, EXIT_INPUT, HilError, InputError


def run(name: str, main: Callable[[], int]) -> int:
    """``main()``'s exit code, or the code of what stopped it, said on stderr."""
    try:
        with Interrupts():
            return main()
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return EXIT_INFRA
    except InputError as e:
        print(f"{name}: {e}", file=sys.stderr)
        return EXIT_INPUT
    except HilError as e:
        print(f"{name}: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_INFRA
