"""One pair run: reserve, open, replay, set up, determine the provider, restore, release.

See :mod:`hil.run.pairrun`; the provider and its profile: :mod:`hil.run.provider`.
"""

from hil.run.pairrun import PairRequest, PairRun, claims_for
from hil.run.provider import HostProvider, Provider

__all__ = ["HostProvider", "PairRequest", "PairRun", "Provider", "claims_for"]
