"""The regression corpus: known Linux iWARP CM bugs, reproduced by the conditions their fixes name.

One module per kernel part (:mod:`.iwcm`, :mod:`.siw`, :mod:`.ucma`, :mod:`.siwqp`,
:mod:`.siwtx`, :mod:`.device`, :mod:`.portquery`, :mod:`.goingdown`, :mod:`.cxgb4`), one
registered sequence per fix (``hil cm run regress_...``), each named after the fix it
guards (the cases the reference peer plays are in :mod:`hil.peer.regressions`);
:mod:`.evidence` says whether a run's scenario happened.  ``suites/test_regressions.py``
runs them.
"""

from hil.cm.regressions import (  # noqa: F401 -- the cases register themselves
    cxgb4,
    device,
    goingdown,
    iwcm,
    portquery,
    siw,
    siwqp,
    siwtx,
    ucma,
)
