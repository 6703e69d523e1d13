"""Certifiers: each takes a schedule and a query and returns certified intervals, or None where it
does not apply.  It never returns a best effort: every interval it returns holds, so the engine
may intersect any number of them.

Intervals are per direction of the dominating pair (``Certified``): add/remove has two, whose
larger eps (δ) is the answer, replace-one has one.  A certifier may bound only some directions.

=============  ===============  ========================================================================
module         certifier        what it certifies
=============  ===============  ========================================================================
``contract``                    ``Job`` (what a certifier is asked) and ``Certified`` (what it returns)
``tilted``     ``TiltedFFT``    both roundings of the whole composition, tilted to the saddle point
                                (stages 1-4): the general method, wherever it fits in memory
``tail``       ``TailEvents``   the remove direction as a sum over the number of far-tail steps
                                (stage 5): small δ with small q, where no single tilt centres it
``rdp_cap``    ``RDPBound``     the Rényi-DP bound of the same schedule: an upper bound only
                                (replace-one by group privacy)
``exact``      closed forms     what needs no grid (q = 1: the Gaussian mechanism; Poisson tails)
=============  ===============  ========================================================================
"""

from .contract import GRID_BYTES, Caches, Certified, Job
from .rdp_cap import RDPBound
from .tail import TailEvents
from .tilted import TiltedFFT, _compose

__all__ = ["GRID_BYTES", "Caches", "Certified", "Job", "RDPBound", "TailEvents", "TiltedFFT", "_compose"]
