"""Tight privacy-loss-distribution (PLD) accountant for DP-SGD with certified bounds.

Public API: :func:`epsilon`, :func:`delta`, :func:`epsilon_curve`, :func:`delta_curve`,
:func:`tradeoff`, :func:`attack_tpr`, :func:`advantage`, :class:`PLDAccountant` and the limit ``MAX_BINS``.

The pipeline, one module per stage (kernels in ``sgmfast._kernels.pld``, same names):

======================  ======================================================================
stage                   module
======================  ======================================================================
1. one step             ``onestep`` -- one SGM step on the loss grid ell_j = j * step, twice:
                        pessimistic (connect-the-dots) and optimistic (convex-order minorant)
2. tilt                 ``tilting`` -- the saddle-point tilt e^{theta * loss} towards eps
3. composition          ``composition`` -- the T-fold composition in one FFT power, with its
                        round-off bounds; ``windows`` -- the FFT window and the Chernoff
                        bounds on the mass outside it
4. two stages           ``two_stage`` -- long runs: blocks of ~sqrt(T) steps on the fine
                        grid, the blocks composed on a coarse grid
5. tail events          ``tail_events`` -- small δ: δ as a sum over the number of far-tail steps
queries                 ``queries`` -- δ(eps), eps(δ) read off composed grids
curves                  ``curve`` -- every checkpoint of a run from one set of spectra;
                        ``spectral`` -- their queries read off the composed spectrum's band
trade-off curves        ``tradeoff`` -- f-DP β(α), both bounds, from the certified profile
exact paths             ``exact`` -- closed forms that need no grid (q = 1)
balls-in-bins batches   ``allocation`` -- random allocation (k = 1): one epoch's PLD from a
                        lattice law of its likelihood ratio, then stages 2-3 (public:
                        ``allocation.epsilon``, ``allocation.delta``)
permutation shuffle     ``shuffle`` -- fixed-size batches of a shuffled epoch: sound, loose;
                        the Gaussian mechanism per epoch above, an explicit pair below
fixed-size batches      ``fixed_size`` -- sampling without replacement, replace-one: the
                        symmetrised dominating pair built from stage 1's pieces, then 2-3
which sampler           ``samplers`` -- ``sampler=`` of ``epsilon``/``delta``: poisson,
                        balls_in_bins, shuffle, fixed_size, each with its own relation
certifiers              ``certifiers`` -- each method as a certifier that returns certified
                        intervals or says it does not apply; its soundness argument beside it
engine                  ``engine`` -- the plan: which certifiers, in which order, intersect,
                        refine the grid until the accuracy is met
public API              ``accountant`` -- validation, the exact shortcuts, ``PLDAccountant``
======================  ======================================================================

Heuristics that choose the grid step and guess eps (never a bound) are in ``estimates``; what
the stages share (limits, direction codes, the composed-grid type, caches) in ``common``.

Neighbouring relations.  ``"add_remove"`` (dominating pairs remove:
P = (1-q)N(0,s^2) + qN(1,s^2), Q = N(0,s^2); add: the pair swapped; Zhu, Dong & Wang, AISTATS
2022 / Mironov et al. 2019): both directions are bounded and the larger δ (eps) is reported.
``"replace_one"``: P = (1-q)N(0,s^2) + qN(-1,s^2), Q = (1-q)N(0,s^2) + qN(1,s^2) (clipped
contributions of norm <= 1 on either side of the replacement, so the batch sum moves by up to
2; symmetric, so one direction suffices; no RDP cap applies to it).
"""

from .accountant import (PLDAccountant, advantage, attack_tpr, delta, delta_curve, epsilon, epsilon_curve,
                         tradeoff)
from .common import MAX_BINS
from .samplers import LooseBoundWarning

__all__ = ["LooseBoundWarning", "epsilon", "delta", "epsilon_curve", "delta_curve", "tradeoff", "attack_tpr", "advantage",
           "PLDAccountant", "MAX_BINS"]
