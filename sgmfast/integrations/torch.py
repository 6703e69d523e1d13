"""Batch samplers for ``torch.utils.data.DataLoader`` that draw exactly the batches sgmfast's
accountants analyse.

A privacy guarantee for DP-SGD holds for the batch distribution the accountant assumes, not for
whatever the data loader happens to do: a shuffled loader accounted as Poisson sampling, for
example, reports an ε that no analysis backs. Each sampler below draws its batches from exactly
one of sgmfast's sampler models; pass it to ``DataLoader(dataset, batch_sampler=...)`` and give
the accountant its :attr:`sampler` string and :attr:`sample_rate`.

======================= =================================== ========= =================== ===========
batch sampler           batches                             ``len``   accountant          q
                                                                      ``sampler=``
======================= =================================== ========= =================== ===========
PoissonBatchSampler     every step, each index in the batch steps per ``"poisson"``       sample_rate
                        independently with probability q    epoch
                        (sizes Binomial(n, q))
BallsInBinsBatchSampler every epoch, each index in one of   t         ``"balls_in_bins"`` 1 / t
                        the t batches, uniformly (sizes
                        multinomial; random allocation)
FixedSizeBatchSampler   every step, a uniform subset of     steps per ``"fixed_size"``    b / n
                        exactly b indices, independent      epoch
                        across steps
======================= =================================== ========= =================== ===========

``"balls_in_bins"`` is random allocation with k = 1 (Feldman & Shenfeld, arXiv 2502.08202;
Chua et al., "Balls-and-Bins Sampling for DP-SGD", AISTATS 2025, arXiv 2412.16802), analysed
under add/remove; ``"fixed_size"`` under replace-one; ``"poisson"`` under add/remove by default
(replace-one on request). All three have tight accountants. sgmfast's ``"shuffle"`` is another
sampler: the permutation of ``DataLoader(shuffle=True)`` cut into equal batches, which is
certified only loosely (:mod:`sgmfast.pld.shuffle`); for tight accounting of epoch-style
training draw balls-in-bins batches instead.
The samplers carry the string as the class attribute ``sampler`` and the rate as the property
``sample_rate``; a run of E epochs has ``T = E * len(batch_sampler)`` steps.

Poisson and balls-in-bins batches can be empty. PyTorch's ``default_collate`` fails on an empty
batch, so give the DataLoader a collate function that handles them: :func:`collate_with_empty`
(empty tensors shaped like the dataset's first example), or Opacus's
``opacus.data_loader.wrap_collate_with_empty`` (which learns the shapes from the first non-empty
batch). With an empty batch, DP-SGD still takes its step: the noise alone.

Randomness comes only from the sampler's ``torch.Generator``: samplers built with equally
seeded generators draw the same batches. Without one, a generator is seeded once, at
construction, from torch's default generator (so ``torch.manual_seed`` before construction
makes the run reproducible). Successive epochs continue the generator's stream.

Examples
--------
>>> import torch
>>> from torch.utils.data import DataLoader, TensorDataset
>>> from sgmfast.integrations.torch import PoissonBatchSampler, collate_with_empty
>>> data = TensorDataset(torch.randn(1000, 3), torch.randint(2, (1000,)))
>>> bs = PoissonBatchSampler(len(data), sample_rate=0.01, generator=torch.Generator().manual_seed(0))
>>> loader = DataLoader(data, batch_sampler=bs, collate_fn=collate_with_empty(data))
>>> len(loader)
100
>>> x, y = next(iter(loader))
>>> x.shape[1]
3
>>> import sgmfast
>>> epochs = 3
>>> eps = sgmfast.pld.epsilon(1.0, bs.sample_rate, epochs * len(bs), 1e-5, sampler=bs.sampler)
>>> bool(eps.lower <= eps.upper)
True

With Opacus, build the loader as above and call ``make_private(..., data_loader=loader,
poisson_sampling=False)``: with ``poisson_sampling=True`` Opacus replaces the batch sampler with
its own. Account with ``SGMFastAccountant(sampler=bs.sampler)``
(:mod:`sgmfast.integrations.opacus`). Opacus steps its accountant with ``sample_rate = 1 /
len(loader)``, which is ``bs.sample_rate`` for :class:`BallsInBinsBatchSampler`, for
:class:`PoissonBatchSampler` when 1 / q is a whole number and ``steps_per_epoch`` is left at its
default, and for :class:`FixedSizeBatchSampler` when ``batch_size`` divides ``num_samples`` and
``steps_per_epoch`` is left at its default; otherwise step the accountant yourself with
``bs.sample_rate`` (Opacus also takes ``int(len(dataset) / len(loader))`` as the expected batch
size that a ``loss_reduction="mean"`` gradient is averaged over).
Opacus's ``secure_mode`` does not accept these samplers (it swaps only torch's own samplers'
generators).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Callable, Optional

import torch
from torch.utils.data import Sampler, default_collate

__all__ = ["PoissonBatchSampler", "BallsInBinsBatchSampler", "FixedSizeBatchSampler", "collate_with_empty"]


# --------------------------------------------------------------------------------------------
# argument checks


def _check_int(value, name: str, low: int, high: Optional[int] = None) -> int:
    """``value`` as an int in [low, high], else a ValueError naming ``name`` and the range."""
    allowed = f"[{low}, {high}]" if high is not None else f">= {low}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer {allowed}; got {value!r}")
    v = int(value)
    if v < low or (high is not None and v > high):
        raise ValueError(f"{name} must be an integer {allowed}; got {v}")
    return v


def _check_rate(value, name: str) -> float:
    """``value`` as a float in (0, 1], else a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number in (0, 1]; got {value!r}")
    v = float(value)
    if not 0.0 < v <= 1.0:  # also rejects nan
        raise ValueError(f"{name} must be in (0, 1]; got {v!r}")
    return v


def _make_generator(generator: Optional[torch.Generator]) -> torch.Generator:
    """The generator to draw from: ``generator`` (a CPU ``torch.Generator``), or a new one
    seeded from torch's default generator (as ``RandomSampler`` seeds its own)."""
    if generator is None:
        seed = int(torch.empty((), dtype=torch.int64).random_().item())
        g = torch.Generator()
        g.manual_seed(seed)
        return g
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None; got {type(generator).__name__}")
    if generator.device.type != "cpu":
        raise ValueError(f"generator must be a CPU torch.Generator; got one on {generator.device}")
    return generator


# --------------------------------------------------------------------------------------------
# draws

# entries a chunk of steps is drawn in at once (bounds the memory of one draw: ~30 MB)
_CHUNK = 1 << 20
# spare draws, in standard deviations above the mean need, so that a second draw is rare
_SPARE = 6.0


def _poisson_steps(n: int, q: float, steps: int, g: torch.Generator) -> list[torch.Tensor]:
    """``steps`` Poisson batches of [0, n) at rate q: for each step, the indices whose
    independent Bernoulli(q) trial succeeds, ascending.

    The steps' n-trial blocks are laid end to end, trial s n + i being index i in step s, and
    the gaps between successes drawn, i.i.d. Geometric(q) (``floor(log V / log(1 - q)) + 1``
    with V uniform on (0, 1], in float64): O(n q) work per step, one vectorised draw for all
    the steps. The gaps are drawn in chunks large enough that one chunk almost always passes
    the last trial."""
    if q >= 1.0:
        return [torch.arange(n, dtype=torch.int64) for _ in range(steps)]
    total = n * steps
    log1mq = math.log1p(-q)
    parts = []
    last = -1  # the last trial taken so far
    while True:
        remaining = total - 1 - last
        mean = remaining * q
        m = max(1, int(mean + _SPARE * math.sqrt(mean * (1.0 - q)) + 16))
        u = torch.rand(m, dtype=torch.float64, generator=g)
        # u in [0, 1): 1 - u in (0, 1]; a gap past the last trial ends the draw, so clamp first
        gaps = torch.floor(torch.log1p(-u) / log1mq).clamp_(max=float(total)).to(torch.int64) + 1
        trials = last + torch.cumsum(gaps, 0)
        k = int(torch.searchsorted(trials, total))  # increasing: trials[:k] < total <= trials[k]
        parts.append(trials[:k])
        if k < m:
            break
        last = int(trials[-1])
    trials = parts[0] if len(parts) == 1 else torch.cat(parts)
    sizes = torch.bincount(torch.div(trials, n, rounding_mode="floor"), minlength=steps)
    return list(torch.split(trials % n, sizes.tolist()))


def _subsets(n: int, b: int, steps: int, g: torch.Generator) -> torch.Tensor:
    """``steps`` independent uniformly random subsets of b distinct indices of [0, n), one a
    row, each in random order.

    For b > n / 4, the first b of a random permutation per step (O(n) = O(b)). Otherwise each
    row draws m indices with replacement and keeps the first b distinct ones in order of first
    appearance -- a uniformly random ordered draw without replacement -- vectorised over the
    rows in O(m log m) each, with m a margin above the expected draws to see b distinct. A row
    whose m draws held fewer than b distinct indices (rare) is drawn afresh: having b distinct
    is an event invariant under relabelling the indices, so a kept row is still uniform."""
    if 4 * b > n:
        return torch.stack([torch.randperm(n, generator=g)[:b] for _ in range(steps)])
    expect = -n * math.log1p(-b / n)  # expected draws to see b distinct of n
    m = max(b, int(expect + _SPARE * math.sqrt(expect) + 16))
    draws = torch.randint(n, (steps, m), generator=g)
    values, order = torch.sort(draws, dim=1, stable=True)
    first = torch.ones_like(values, dtype=torch.bool)
    first[:, 1:] = values[:, 1:] != values[:, :-1]
    # each distinct index's first position in its row; m (past the end) for repeats
    positions = torch.sort(torch.where(first, order, m), dim=1).values[:, :b]
    rows = torch.gather(draws, 1, positions.clamp(max=m - 1))
    short = torch.nonzero(positions[:, -1] >= m).flatten()
    if short.numel() > 0:
        rows[short] = _subsets(n, b, short.numel(), g)
    return rows


def _chunks(steps: int, size: int) -> Iterator[int]:
    """Step counts of at most ``size`` (>= 1) that add up to ``steps``."""
    while steps > 0:
        yield min(size, steps)
        steps -= size


# --------------------------------------------------------------------------------------------
# samplers


class PoissonBatchSampler(Sampler[list[int]]):
    """Poisson sampling: every step, each index is in the batch independently with probability
    ``sample_rate``.

    Batch sizes are Binomial(num_samples, sample_rate) and can be 0: an empty batch is yielded as
    an empty list, so the DataLoader needs a collate function that handles empty batches
    (:func:`collate_with_empty`, or ``opacus.data_loader.wrap_collate_with_empty``; Opacus's
    ``DPDataLoader`` does this). Indices within a batch are ascending.

    Account with sgmfast ``sampler="poisson"`` (:attr:`sampler`) and ``q = sample_rate``.

    Parameters
    ----------
    num_samples : int
        Dataset size n >= 1; indices are 0, ..., n - 1.
    sample_rate : float
        Inclusion probability q in (0, 1].
    steps_per_epoch : int, optional
        Steps (batches) per pass of the iterator, >= 1; default ``round(1 / sample_rate)``
        (Python's rounding), so that an epoch uses each example once in expectation.
    generator : torch.Generator, optional
        CPU generator for all randomness; default: a new generator seeded once, here, from
        torch's default generator.

    Examples
    --------
    >>> import torch
    >>> bs = PoissonBatchSampler(10, 0.5, generator=torch.Generator().manual_seed(1))
    >>> len(bs), bs.sampler, bs.sample_rate
    (2, 'poisson', 0.5)
    >>> all(0 <= i < 10 for batch in bs for i in batch)
    True
    """

    sampler = "poisson"

    def __init__(self, num_samples: int, sample_rate: float, steps_per_epoch: Optional[int] = None,
                 generator: Optional[torch.Generator] = None):
        self.num_samples = _check_int(num_samples, "num_samples", 1)
        self._q = _check_rate(sample_rate, "sample_rate")
        if steps_per_epoch is None:
            self.steps_per_epoch = max(1, round(1.0 / self._q))
        else:
            self.steps_per_epoch = _check_int(steps_per_epoch, "steps_per_epoch", 1)
        self.generator = _make_generator(generator)

    @property
    def sample_rate(self) -> float:
        """q for the accountant: each example's inclusion probability per step."""
        return self._q

    def __len__(self) -> int:
        return self.steps_per_epoch

    def __iter__(self) -> Iterator[list[int]]:
        n, q = self.num_samples, self._q
        # chunks of about _CHUNK indices in all, and of at most 2**52 trials (exact in float64)
        size = max(1, min(int(_CHUNK // max(1.0, n * q)), (1 << 52) // n))
        for steps in _chunks(self.steps_per_epoch, size):
            for batch in _poisson_steps(n, q, steps, self.generator):
                yield batch.tolist()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_samples={self.num_samples}, sample_rate={self._q!r}, "
                f"steps_per_epoch={self.steps_per_epoch})")


class BallsInBinsBatchSampler(Sampler[list[int]]):
    """Balls-in-bins batching: every epoch, each index lands in one of ``num_batches`` batches,
    chosen uniformly and independently of the other indices and of other epochs.

    Every index is used exactly once per epoch; batch sizes are Multinomial(n; 1/t, ..., 1/t)
    and can be 0 (yielded as empty lists: use a collate function that handles empty batches,
    such as :func:`collate_with_empty`). This is random allocation with k = 1 (Feldman &
    Shenfeld; Chua et al., "Balls-and-Bins Sampling for DP-SGD"): a shuffle-like loader with a
    tight analysis, unlike a permutation cut into equal batches (sgmfast ``sampler="shuffle"``,
    certified only loosely). Indices within a batch are in random order.

    Account with sgmfast ``sampler="balls_in_bins"`` (:attr:`sampler`) and
    ``q = 1 / num_batches``; T = epochs * num_batches.

    Parameters
    ----------
    num_samples : int
        Dataset size n >= 1; indices are 0, ..., n - 1.
    num_batches : int
        Batches per epoch t >= 1.
    generator : torch.Generator, optional
        CPU generator for all randomness; default: a new generator seeded once, here, from
        torch's default generator.

    Examples
    --------
    >>> import torch
    >>> bs = BallsInBinsBatchSampler(10, 4, generator=torch.Generator().manual_seed(1))
    >>> len(bs), bs.sampler, bs.sample_rate
    (4, 'balls_in_bins', 0.25)
    >>> sorted(i for batch in bs for i in batch) == list(range(10))
    True
    """

    sampler = "balls_in_bins"

    def __init__(self, num_samples: int, num_batches: int, generator: Optional[torch.Generator] = None):
        self.num_samples = _check_int(num_samples, "num_samples", 1)
        self.num_batches = _check_int(num_batches, "num_batches", 1)
        self.generator = _make_generator(generator)

    @property
    def sample_rate(self) -> float:
        """q = 1 / num_batches for the accountant."""
        return 1.0 / self.num_batches

    def __len__(self) -> int:
        return self.num_batches

    def __iter__(self) -> Iterator[list[int]]:
        n, t, g = self.num_samples, self.num_batches, self.generator
        # sizes of the t bins: counts of n i.i.d. uniform bin choices; given the sizes, which
        # indices share a bin is a uniformly random partition, cut from a random permutation
        sizes = torch.bincount(torch.randint(t, (n,), generator=g), minlength=t)
        perm = torch.randperm(n, generator=g)
        for batch in torch.split(perm, sizes.tolist()):
            yield batch.tolist()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_samples={self.num_samples}, num_batches={self.num_batches})"


class FixedSizeBatchSampler(Sampler[list[int]]):
    """Fixed-size batches: every step, a uniformly random subset of exactly ``batch_size``
    distinct indices, drawn independently of other steps.

    An index can appear in several batches of an epoch, or in none. Indices within a batch are
    in random order.

    Account with sgmfast ``sampler="fixed_size"`` (:attr:`sampler`) and
    ``q = batch_size / num_samples`` (the replace-one relation).

    Parameters
    ----------
    num_samples : int
        Dataset size n >= 1; indices are 0, ..., n - 1.
    batch_size : int
        Batch size b in [1, num_samples].
    steps_per_epoch : int, optional
        Steps (batches) per pass of the iterator, >= 1; default ``num_samples // batch_size``.
    generator : torch.Generator, optional
        CPU generator for all randomness; default: a new generator seeded once, here, from
        torch's default generator.

    Examples
    --------
    >>> import torch
    >>> bs = FixedSizeBatchSampler(10, 3, generator=torch.Generator().manual_seed(1))
    >>> len(bs), bs.sampler, bs.sample_rate
    (3, 'fixed_size', 0.3)
    >>> [len(set(batch)) for batch in bs]
    [3, 3, 3]
    """

    sampler = "fixed_size"

    def __init__(self, num_samples: int, batch_size: int, steps_per_epoch: Optional[int] = None,
                 generator: Optional[torch.Generator] = None):
        self.num_samples = _check_int(num_samples, "num_samples", 1)
        self.batch_size = _check_int(batch_size, "batch_size", 1, self.num_samples)
        if steps_per_epoch is None:
            self.steps_per_epoch = self.num_samples // self.batch_size
        else:
            self.steps_per_epoch = _check_int(steps_per_epoch, "steps_per_epoch", 1)
        self.generator = _make_generator(generator)

    @property
    def sample_rate(self) -> float:
        """q = batch_size / num_samples for the accountant."""
        return self.batch_size / self.num_samples

    def __len__(self) -> int:
        return self.steps_per_epoch

    def __iter__(self) -> Iterator[list[int]]:
        n, b = self.num_samples, self.batch_size
        for steps in _chunks(self.steps_per_epoch, max(1, _CHUNK // (2 * b + 16))):
            yield from _subsets(n, b, steps, self.generator).tolist()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_samples={self.num_samples}, batch_size={self.batch_size}, "
                f"steps_per_epoch={self.steps_per_epoch})")


# --------------------------------------------------------------------------------------------
# collate


def _empty_like(batch: Any) -> Any:
    """``batch`` (a collated batch of one example) with every tensor cut to 0 rows."""
    if isinstance(batch, torch.Tensor):
        return batch[:0]
    if isinstance(batch, Mapping):
        items = {k: _empty_like(v) for k, v in batch.items()}
        try:
            return type(batch)(items)
        except TypeError:
            return items
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(_empty_like(v) for v in batch))
    if isinstance(batch, Sequence) and not isinstance(batch, (str, bytes)):
        items = [_empty_like(v) for v in batch]
        return tuple(items) if isinstance(batch, tuple) else items
    return batch


def collate_with_empty(dataset, collate_fn: Callable[[list], Any] = default_collate) -> Callable[[list], Any]:
    """A collate function that is ``collate_fn`` on non-empty batches and, on an empty one,
    returns ``collate_fn([dataset[0]])`` with every tensor cut to 0 rows (the same structure,
    dtypes and trailing shapes as a real batch).

    Parameters
    ----------
    dataset : indexable
        The DataLoader's dataset (non-empty); its first example gives the empty batch's shape.
    collate_fn : callable, optional
        Collate function for non-empty batches; default ``torch.utils.data.default_collate``.

    Returns
    -------
    callable
        ``collate(list_of_examples) -> batch``.
    """
    template: list = []

    def collate(batch: list) -> Any:
        if len(batch) > 0:
            return collate_fn(batch)
        if not template:
            template.append(_empty_like(collate_fn([dataset[0]])))
        return template[0]

    return collate
