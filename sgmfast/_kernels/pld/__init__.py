"""Kernels of the PLD accountant, one module per stage of the pipeline in ``sgmfast.pld``.

========================  ===============================================================
``losses``                the privacy-loss functions of the dominating pairs and their inverses
``bins``                  log-masses of the loss bins, each with a bound on its rounding error
``discretise``            one step on the grid: pessimistic (connect-the-dots) and optimistic masses
``tilt``                  exponential tilting, tilted moments, log-MGF upper bounds (Chernoff)
``fft_power``             folding, FFT-spectrum powers and their round-off bounds
``coarsen``               fine grid -> coarse grid, pessimistically and optimistically
``query``                 δ(eps) and eps(δ) read off a composed grid
``spectral``              the same read off a composed spectrum's band (curves)
``windows``               Chernoff edges and tail bounds from a log-MGF table
``allocation``            balls-in-bins batches: one epoch's likelihood ratio on a linear lattice
``allocation_tail``       ... and one or two coordinates above the lattice, in closed form
``chernoff``              ... and Chernoff bounds on sums of lattice variables (the tails' masses)
``subsample``             a pair on the grid subsampled (a partial last epoch: its first measure mixed)
``schedule_parts``        schedules' lattice mixtures: their spectra's product and round-off bound
``statistic``             a step's loss at a reference rate as a statistic: its laws under N0 and N1
``groups``                schedules' groups: runs of steps of about equal rounding cost
========================  ===============================================================

Conventions
-----------
* The loss grid is ``ell_k = k * grid_step`` with integer ``k``; an array
  ``t`` with integer ``offset`` holds the mass at ``ell = (offset + i) * grid_step``.
* Arrays may be *exponentially tilted* (Esscher transform): the untilted mass
  is ``p_i = t_i * exp(log_scale - theta * ell_i)``.  Tilting commutes with
  convolution, so a T-fold composition is computed entirely on tilted arrays.
* Losses are those of a dominating pair (P, Q) of one step of the
  Poisson-subsampled Gaussian mechanism (sensitivity 1, noise N(0, sigma^2),
  sampling rate q), written through the *remove* loss
  ``ell_rem(z) = log(1 - q + q exp((2z - 1) / (2 sigma^2)))``, which is
  increasing in the output z.  The *add* loss is ``-ell_rem(z)`` with P = mu0.
* Kernels never raise; the Python layer (``sgmfast.pld``) checks results.
* Nothing here imports from outside ``sgmfast._kernels``.
"""
