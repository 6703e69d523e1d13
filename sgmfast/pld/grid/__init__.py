"""The numerical stages of a certified PLD (floor 1 of ``sgmfast.pld``): each works on loss
grids and imports only ``pld.common``, the kernels and the stages before it.

==================  ==========================================================================
module              stage
==================  ==========================================================================
``estimates``       heuristics: the grid step and a guess of eps (never a bound)
``onestep``         1. one SGM step on the grid ell_j = j * step, pessimistic (connect-the-dots)
                    and optimistic (convex-order minorant)
``lattice_shift``   1. its optimistic masses shifted so that a bin holding the bulk lands on a
                    knot (q below the grid step), the composition moved back down
``windows``         the FFT window and the Chernoff bounds on the mass outside it
``tilting``         2. the saddle-point tilt e^{theta * loss} towards eps
``composition``     3. the T-fold composition in one FFT power, with its round-off bounds
``two_stage``       4. long runs: blocks of ~sqrt(T) steps, then the blocks on a coarse grid
``tail_events``     5. small δ: δ as a sum over the number of far-tail steps
``tail_events_multi``  5. the same for a schedule of several entries
``queries``         δ(eps) and eps(δ) read off a composed grid
``spectral``        the same queries read off a composed spectrum's narrow band (curves)
==================  ==========================================================================
"""
