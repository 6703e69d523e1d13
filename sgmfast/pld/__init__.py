"""Tight privacy-loss-distribution (PLD) accountant for DP-SGD with certified bounds.

Public API: :func:`epsilon`, :func:`delta`, :func:`epsilon_curve`, :func:`delta_curve`,
:func:`tradeoff`, :func:`attack_tpr`, :func:`advantage`, :class:`PLDAccountant` and the limit ``MAX_BINS``.

The package in floors, bottom up; a module imports only lower floors (``tests/test_layout.py``
reads this table and checks every import against it).  Kernels: ``sgmfast._kernels.pld``, same names.

=====  ==============================  ==================================================================
floor  module                          what it holds
=====  ==============================  ==================================================================
0      ``common``                      limits, direction codes, the composed-grid type, caches
1      ``grid``                        the numerical stages: ``onestep`` (1. one step, both roundings),
                                       ``lattice_shift`` (its optimistic masses with the bulk on a
                                       knot), ``tilting`` (2. the saddle-point tilt), ``composition`` (3. the
                                       T-fold FFT power and its round-off), ``banded`` (the same power
                                       kept as its spectrum's band: single queries and curves),
                                       ``windows`` (its window and
                                       Chernoff tails), ``two_stage`` (4. long runs), ``tail_events``
                                       (5. small δ), ``tail_events_multi`` (5. for several entries),
                                       ``queries`` (δ(eps), eps(δ) off a grid),
                                       ``spectral`` (the same off a spectrum's band), ``estimates``
                                       (heuristic grid steps and eps guesses, never a bound)
2      ``certifiers``                  the contract (``contract``: ``Job`` in, ``Certified`` out) and
                                       one module per method: ``tilted`` (stages 1-4), ``tail``
                                       (stage 5), ``rdp_cap`` (the RDP upper bound), ``exact`` (closed
                                       forms: q = 1, sigma = 0)
2      ``delta_inverse``               δ(eps) bracketed by eps(δ) answers (where the δ grids cannot reach):
                                       why an answer bounds δ, and where to ask next
2      ``schedule_mix``                many distinct noise levels: the lattice mixtures above and below
                                       each step (their soundness argument), weights and groups
3      ``schedule_compose``            the mixtures' compositions on the lattice's spectra
3      ``schedule_groups``             the groups' sandwich: which steps share a group, each group's keys
3      ``engine``                      the plan: which certifiers, in which order, intersected, the grid
                                       refined until the accuracy is met, all on one work meter
4      ``schedule_engine``             ``MixEngine``: the engine of a schedule on the lattice mixtures
5      ``schedule_rates``              many distinct rates among few noise levels: rate chords above, a
                                       test statistic below (``RateEngine``)
6      ``schedule_product``            many noise levels and many rates at once: the product of the two
                                       lattices, chords and statistic (``ProductEngine``)
7      ``schedules``                   many distinct (sigma, q): the lattice mixtures, the rate chords,
                                       their product, or a certified sandwich of engines
8      ``samplers.balls_in_bins``      random allocation (k = 1; public: ``pld.allocation.epsilon``)
8      ``samplers.epoch_chernoff``     Chernoff bounds on an epoch's sums: majorants, truncated MGF tables
8      ``samplers.epoch_tail``         one balls-in-bins epoch's heavy tail in closed form
8      ``samplers.epoch_sums``         the tail's other coordinates' sum, from the epoch's lattice
8      ``samplers.epoch_power``        one balls-in-bins epoch's sum on the lattice: windowed FFT powers
8      ``samplers.epoch_grid``         one balls-in-bins epoch's grids: lattice spacing, top, cap; loss step
8      ``samplers.epoch_add``          balls-in-bins' add direction above, in closed form (Chernoff)
8      ``samplers.epoch_runs``         balls-in-bins' runs composed: whole epochs and a partial last one
8      ``samplers.selected_lower``     balls-in-bins with k > 1: a lower bound from two statistics
8      ``samplers.epoch_gauss``        balls-in-bins' closed forms: the Gaussian start bounds, sigma = 0
8      ``samplers.shuffle``            the permutation shuffle: sound, loose
8      ``samplers.fixed_size_tail``    the fixed-size pair at small δ: its far-tail events (stage 5) and their refinement
8      ``samplers.fixed_size``         sampling without replacement, replace-one
8      ``tradeoff``                    f-DP β(α), both bounds, from the certified profile
8      ``curve_grids``                 privacy curves: the spectra all checkpoints share
9      ``curve_bounds``                the closed forms and RDP caps a curve falls back on
9      ``samplers.allocation_curve``   balls-in-bins curves: one epoch lattice for all checkpoints
10     ``curve``                       the curve's plan, budgets and public calls
11     ``samplers``                    the sampler table: sampler -> relations -> certifier
12     ``api``                         validation, broadcasting, the exact shortcuts, ``PLDAccountant``
=====  ==============================  ==================================================================

Neighbouring relations.  ``"add_remove"`` (dominating pairs remove:
P = (1-q)N(0,s^2) + qN(1,s^2), Q = N(0,s^2); add: the pair swapped; Zhu, Dong & Wang, AISTATS
2022 / Mironov et al. 2019): both directions are bounded and the larger δ (eps) is reported.
``"replace_one"``: P = (1-q)N(0,s^2) + qN(-1,s^2), Q = (1-q)N(0,s^2) + qN(1,s^2) (clipped
contributions of norm <= 1 on either side of the replacement, so the batch sum moves by up to
2; symmetric, so one direction suffices; no RDP cap applies to it).
"""

from .api import (PLDAccountant, advantage, attack_tpr, delta, delta_curve, epsilon, epsilon_curve,
                         tradeoff)
from .common import MAX_BINS
from .samplers import LooseBoundWarning

#: the samplers' own calls, under the names the README uses (loaded on first use)
_SAMPLER_MODULES = {"allocation": "balls_in_bins", "balls_in_bins": "balls_in_bins", "fixed_size": "fixed_size",
                    "shuffle": "shuffle"}


def __getattr__(name):
    if name in _SAMPLER_MODULES:
        import importlib

        return importlib.import_module(f"{__name__}.samplers.{_SAMPLER_MODULES[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["LooseBoundWarning", "epsilon", "delta", "epsilon_curve", "delta_curve", "tradeoff", "attack_tpr", "advantage",
           "PLDAccountant", "MAX_BINS"]
