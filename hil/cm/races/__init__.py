"""Race sweeps: two actions swept against each other, each round classified by what happened.

One module per race, each registering its :class:`~hil.cm.races.core.Race`
in :data:`RACES` (and a ``race_*`` sequence for ``hil cm run``) when this
package is imported:

| race (its module) | actions | event between |
|---|---|---|
| ``destroy_reply`` | active destroy, passive accept | CONNECT_REPLY |
| ``disconnects`` | active disconnect, passive disconnect | DISCONNECTED |
| ``destroy_listen`` | passive destroys listener, active connects | CONNECT_REQUEST |
| ``reject_request`` | passive rejects a request, the next request arrives | CONNECT_REQUEST |
| ``destroy_terminate`` | active destroys, the peer's TERMINATE comes | DISCONNECTED |

The common part (budget, rounds, counts, "race window not reached") is
:mod:`hil.cm.races.core`, the aim of a race's narrow middle order
:mod:`hil.cm.races.aim`, the egress hold that widens a window while a frame
is on its way :mod:`hil.cm.races.hold`; docs/races.md, says what each
race's orders mean and what the lab reached.
"""

from hil.cm.races import (
    destroy_listen,
    destroy_reply,
    destroy_terminate,
    disconnects,
    reject_request,
)
from hil.cm.races.core import RACES, Budget, Race, RaceSweep, Round
from hil.cm.races.hold import HOLD_US

__all__ = [
    "HOLD_US",
    "RACES",
    "Budget",
    "Race",
    "RaceSweep",
    "Round",
    "destroy_listen",
    "destroy_reply",
    "disconnects",
    "reject_request",
    "destroy_terminate",
]
