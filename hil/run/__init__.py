"""One pair run: reserve, open, replay, set up, determine the provider, restore, release.

See :mod:`hil.run.pairrun`, and what a run asks for: :mod:`hil.run.request`; the
provider and its profile: :mod:`hil.run.provider`.
"""

from hil.run.pairrun import PairRun
from hil.run.provider import HostProvider, Provider
from hil.run.request import PairRequest, claims_for

__all__ = ["HostProvider", "PairRequest", "PairRun", "Provider", "claims_for"]
