"""The torch batch samplers draw exactly the batch distributions of their sgmfast accountants.

Statistical checks use fixed seeds (so they are deterministic) and reject only at p < 1e-6 in
either tail, so a correct sampler would fail them with probability below 2e-6 per check for any
seed. The lower tail matters too: a sampler with too little randomness (equal batch sizes, a
round-robin allocation) fits "too well".
"""

import doctest
import itertools
import math
import re
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")

from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import sgmfast.integrations.torch as ts  # noqa: E402
from sgmfast.integrations.torch import (  # noqa: E402
    BallsInBinsBatchSampler,
    FixedSizeBatchSampler,
    PoissonBatchSampler,
    collate_with_empty,
)

P_MIN = 1e-6


def gen(seed):
    return torch.Generator().manual_seed(seed)


def assert_chi2(stat, df):
    """``stat`` is a plausible chi-square(df) draw: neither tail below P_MIN."""
    sf = stats.chi2.sf(stat, df)
    cdf = stats.chi2.cdf(stat, df)
    assert sf > P_MIN and cdf > P_MIN, f"chi2 = {stat:.1f} on {df} df: sf {sf:.2e}, cdf {cdf:.2e}"


def assert_fits(observed, probs):
    """Counts ``observed`` over categories fit the probabilities ``probs`` (Pearson chi-square;
    categories with expected counts below 5 pooled, from the smallest up)."""
    observed = np.asarray(observed, dtype=float)
    expected = np.asarray(probs, dtype=float) * observed.sum()
    order = np.argsort(expected)
    obs, exp = [], []
    acc_o = acc_e = 0.0
    for i in order:
        acc_o += observed[i]
        acc_e += expected[i]
        if acc_e >= 5:
            obs.append(acc_o)
            exp.append(acc_e)
            acc_o = acc_e = 0.0
    if acc_e > 0:  # leftover small cells join the last pooled cell
        obs[-1] += acc_o
        exp[-1] += acc_e
    obs, exp = np.array(obs), np.array(exp)
    assert len(obs) >= 2
    assert_chi2(float(((obs - exp) ** 2 / exp).sum()), len(obs) - 1)


def binomial_probs(n, p):
    return stats.binom.pmf(np.arange(n + 1), n, p)


def epochs(sampler, count):
    return [list(sampler) for _ in range(count)]


# ---------------------------------------------------------------------------------------------
# attributes, len, arguments


def test_sampler_strings_and_rates_are_the_accountants():
    from sgmfast.pld.samplers import batches_per_epoch, resolve

    p = PoissonBatchSampler(1000, 0.01)
    b = BallsInBinsBatchSampler(1000, 40)
    f = FixedSizeBatchSampler(1000, 25)
    assert (p.sampler, b.sampler, f.sampler) == ("poisson", "balls_in_bins", "fixed_size")
    assert PoissonBatchSampler.sampler == "poisson"  # class attributes
    for s in (p, b, f):
        resolve(s.sampler, None)  # a sampler string sgmfast knows
    assert p.sample_rate == 0.01
    assert b.sample_rate == 1 / 40 and batches_per_epoch(b.sample_rate) == 40
    assert f.sample_rate == 25 / 1000


@pytest.mark.parametrize("make, length", [
    (lambda: PoissonBatchSampler(100, 0.01), 100),
    (lambda: PoissonBatchSampler(100, 0.3), 3),  # round(3.33)
    (lambda: PoissonBatchSampler(100, 0.7), 1),
    (lambda: PoissonBatchSampler(100, 1.0), 1),
    (lambda: PoissonBatchSampler(100, 0.01, steps_per_epoch=7), 7),
    (lambda: BallsInBinsBatchSampler(100, 9), 9),
    (lambda: BallsInBinsBatchSampler(3, 9), 9),
    (lambda: FixedSizeBatchSampler(100, 30), 3),
    (lambda: FixedSizeBatchSampler(100, 100), 1),
    (lambda: FixedSizeBatchSampler(100, 30, steps_per_epoch=11), 11),
])
def test_len_is_the_steps_per_epoch(make, length):
    s = make()
    assert len(s) == length
    assert len(list(s)) == length
    assert len(list(s)) == length  # and again in the next epoch


@pytest.mark.parametrize("make, message", [
    (lambda: PoissonBatchSampler(100, 1.5), "sample_rate must be in (0, 1]; got 1.5"),
    (lambda: PoissonBatchSampler(100, 0.0), "sample_rate must be in (0, 1]; got 0.0"),
    (lambda: PoissonBatchSampler(100, -0.1), "sample_rate must be in (0, 1]; got -0.1"),
    (lambda: PoissonBatchSampler(100, float("nan")), "sample_rate must be in (0, 1]; got nan"),
    (lambda: PoissonBatchSampler(100, "0.5"), "sample_rate must be a number in (0, 1]; got '0.5'"),
    (lambda: PoissonBatchSampler(100, True), "sample_rate must be a number in (0, 1]"),
    (lambda: PoissonBatchSampler(0, 0.5), "num_samples must be an integer >= 1; got 0"),
    (lambda: PoissonBatchSampler(10.0, 0.5), "num_samples must be an integer >= 1; got 10.0"),
    (lambda: PoissonBatchSampler(10, 0.5, steps_per_epoch=0), "steps_per_epoch must be an integer >= 1; got 0"),
    (lambda: PoissonBatchSampler(10, 0.5, steps_per_epoch=2.5), "steps_per_epoch must be an integer >= 1"),
    (lambda: PoissonBatchSampler(10, 0.5, generator=0), "generator must be a torch.Generator or None"),
    (lambda: BallsInBinsBatchSampler(-1, 4), "num_samples must be an integer >= 1; got -1"),
    (lambda: BallsInBinsBatchSampler(10, 0), "num_batches must be an integer >= 1; got 0"),
    (lambda: BallsInBinsBatchSampler(10, True), "num_batches must be an integer >= 1; got True"),
    (lambda: FixedSizeBatchSampler(10, 0), "batch_size must be an integer [1, 10]; got 0"),
    (lambda: FixedSizeBatchSampler(10, 11), "batch_size must be an integer [1, 10]; got 11"),
    (lambda: FixedSizeBatchSampler(10, 5, steps_per_epoch=-3), "steps_per_epoch must be an integer >= 1; got -3"),
    (lambda: FixedSizeBatchSampler(0, 1), "num_samples must be an integer >= 1; got 0"),
])
def test_bad_arguments_name_the_parameter_and_range(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


def test_numpy_integers_are_accepted():
    s = FixedSizeBatchSampler(np.int64(20), np.int32(4), steps_per_epoch=np.int16(2), generator=gen(0))
    assert len(s) == 2 and all(type(i) is int for batch in s for i in batch)


# ---------------------------------------------------------------------------------------------
# reproducibility


@pytest.mark.parametrize("make", [
    lambda g: PoissonBatchSampler(500, 0.05, generator=g),
    lambda g: BallsInBinsBatchSampler(500, 20, generator=g),
    lambda g: FixedSizeBatchSampler(500, 25, generator=g),
    lambda g: FixedSizeBatchSampler(500, 400, steps_per_epoch=3, generator=g),
])
def test_a_seeded_generator_reproduces_the_batches(make):
    a, b, c = make(gen(123)), make(gen(123)), make(gen(124))
    ea, eb, ec = epochs(a, 3), epochs(b, 3), epochs(c, 3)
    assert ea == eb
    assert ea != ec
    assert ea[0] != ea[1]  # the epochs continue the stream
    assert all(type(i) is int for epoch in ea for batch in epoch for i in batch)


def test_without_a_generator_the_default_rng_seeds_one_at_construction():
    torch.manual_seed(7)
    a = PoissonBatchSampler(300, 0.1)
    torch.manual_seed(7)
    b = PoissonBatchSampler(300, 0.1)
    torch.rand(5)  # using the default RNG after construction does not change b's batches
    assert epochs(a, 2) == epochs(b, 2)
    c = PoissonBatchSampler(300, 0.1)  # seeded from a later state
    assert list(c) != list(PoissonBatchSampler(300, 0.1))


# ---------------------------------------------------------------------------------------------
# balls in bins


def test_balls_in_bins_uses_every_index_once_per_epoch():
    for n, t in [(1000, 7), (5, 8), (1, 1), (37, 1)]:
        s = BallsInBinsBatchSampler(n, t, generator=gen(n + t))
        for epoch in epochs(s, 5):
            assert len(epoch) == t
            assert sorted(i for batch in epoch for i in batch) == list(range(n))


def test_balls_in_bins_large_n():
    n = 10**6
    epoch = list(BallsInBinsBatchSampler(n, 1000, generator=gen(1)))
    assert len(epoch) == 1000
    flat = np.concatenate([np.asarray(b, dtype=np.int64) for b in epoch])
    assert flat.size == n and np.array_equal(np.sort(flat), np.arange(n))


def test_balls_in_bins_sizes_are_multinomial():
    n, t, count = 200, 10, 800
    sizes = np.array([[len(b) for b in epoch] for epoch in epochs(BallsInBinsBatchSampler(n, t, generator=gen(2)), count)])
    assert (sizes.sum(axis=1) == n).all()
    # pooled over epochs, the batches' totals are Multinomial(count n; uniform)
    assert_fits(sizes.sum(axis=0), np.full(t, 1 / t))
    # each epoch's Pearson statistic against n / t is ~ chi2(t - 1): their sum ~ chi2(count (t - 1))
    # (equal-sized batches would give 0, far in the lower tail)
    pearson = ((sizes - n / t) ** 2 / (n / t)).sum()
    assert_chi2(pearson, count * (t - 1))
    # one batch's size is Binomial(n, 1/t), independently across epochs
    assert_fits(np.bincount(sizes[:, 0], minlength=n + 1), binomial_probs(n, 1 / t))


def labels(epoch, n):
    """Each index's batch in an epoch."""
    out = np.full(n, -1)
    for j, batch in enumerate(epoch):
        out[batch] = j
    assert (out >= 0).all()
    return out


def test_balls_in_bins_batch_of_an_index_is_uniform_and_independent():
    n, t, count = 60, 5, 400
    lab = np.array([labels(e, n) for e in epochs(BallsInBinsBatchSampler(n, t, generator=gen(3)), count)])
    # every index's batch is uniform over t (all indices' counts: a count x n x t table)
    per_index = np.stack([np.bincount(lab[:, i], minlength=t) for i in range(n)])
    assert_chi2(((per_index - count / t) ** 2 / (count / t)).sum(), n * (t - 1))
    # (batch in epoch e, batch in epoch e + 1) of an index is uniform over t x t: independent epochs
    pairs = lab[:-1] * t + lab[1:]
    assert_fits(np.bincount(pairs.ravel(), minlength=t * t), np.full(t * t, 1 / t**2))
    # (batch of index i, batch of index i + 1) within an epoch: independent indices
    pairs = lab[:, :-1] * t + lab[:, 1:]
    assert_fits(np.bincount(pairs.ravel(), minlength=t * t), np.full(t * t, 1 / t**2))


def test_balls_in_bins_whole_allocation_is_uniform():
    # n = 4 indices in t = 3 batches: all 81 allocations equally likely
    n, t, count = 4, 3, 4000
    lab = np.array([labels(e, n) for e in epochs(BallsInBinsBatchSampler(n, t, generator=gen(4)), count)])
    codes = (lab * t ** np.arange(n)).sum(axis=1)
    assert_fits(np.bincount(codes, minlength=t**n), np.full(t**n, 1 / t**n))


# ---------------------------------------------------------------------------------------------
# Poisson


def test_poisson_batches_are_distinct_ascending_indices():
    for n, q in [(1000, 0.02), (7, 0.9), (1, 0.5), (50, 1.0)]:
        for batch in PoissonBatchSampler(n, q, steps_per_epoch=200, generator=gen(n)):
            assert batch == sorted(set(batch)) and all(0 <= i < n for i in batch)
    assert all(b == list(range(50)) for b in PoissonBatchSampler(50, 1.0, steps_per_epoch=3))


@pytest.mark.parametrize("spare", [None, -3.0])  # -3: too few gaps drawn at first (the refill loop)
def test_poisson_sizes_are_binomial_and_inclusion_is_q(monkeypatch, spare):
    if spare is not None:
        monkeypatch.setattr(ts, "_SPARE", spare)
    n, q, steps = 400, 0.05, 3000
    batches = list(PoissonBatchSampler(n, q, steps_per_epoch=steps, generator=gen(5)))
    sizes = np.array([len(b) for b in batches])
    assert_fits(np.bincount(sizes, minlength=n + 1), binomial_probs(n, q))
    # mean and variance of the sizes (normal approximations, |z| < 5.3 is p > 1e-7 two-sided)
    z_mean = (sizes.mean() - n * q) / math.sqrt(n * q * (1 - q) / steps)
    assert abs(z_mean) < 5.3
    # each index's count over the steps is Binomial(steps, q), independently across indices
    counts = np.bincount(np.concatenate([np.asarray(b, dtype=np.int64) for b in batches]), minlength=n)
    assert_chi2(((counts - steps * q) ** 2 / (steps * q * (1 - q))).sum(), n)


@pytest.mark.parametrize("chunk", [None, 30])  # 30 entries: a new draw every step or so
def test_poisson_whole_batch_distribution(monkeypatch, chunk):
    # n = 4 at q = 0.3: the 16 subsets with probabilities q^k (1-q)^(4-k), independent steps
    if chunk is not None:
        monkeypatch.setattr(ts, "_CHUNK", chunk)
    n, q, steps = 4, 0.3, 6000
    codes = np.array([sum(1 << i for i in b) for b in PoissonBatchSampler(n, q, steps_per_epoch=steps, generator=gen(6))])
    k = np.array([bin(c).count("1") for c in range(16)])
    probs = q**k * (1 - q) ** (n - k)
    assert_fits(np.bincount(codes, minlength=16), probs)
    assert_fits(np.bincount(codes[:-1] * 16 + codes[1:], minlength=256), np.outer(probs, probs).ravel())


def test_poisson_small_rate_large_n():
    n, q = 10**6, 1e-4
    s = PoissonBatchSampler(n, q, steps_per_epoch=50, generator=gen(7))
    batches = list(s)
    sizes = np.array([len(b) for b in batches])
    assert abs(sizes.sum() - 50 * n * q) < 5.3 * math.sqrt(50 * n * q)
    assert all(0 <= b[0] and b[-1] < n for b in batches if b)
    # a tiny rate: most steps empty, and the whole epoch is still drawn
    tiny = list(PoissonBatchSampler(1000, 1e-9, steps_per_epoch=1000, generator=gen(8)))
    assert len(tiny) == 1000 and sum(map(len, tiny)) <= 1


# ---------------------------------------------------------------------------------------------
# fixed size


@pytest.mark.parametrize("n, b", [(1000, 32), (10, 10), (9, 2), (5, 2), (1, 1), (100, 25), (100, 26)])
def test_fixed_size_batches_have_exactly_b_distinct_indices(n, b):
    for batch in FixedSizeBatchSampler(n, b, steps_per_epoch=100, generator=gen(n * b)):
        assert len(batch) == b and len(set(batch)) == b and all(0 <= i < n for i in batch)


def test_fixed_size_inclusion_is_uniform():
    n, b, steps = 300, 20, 3000
    batches = list(FixedSizeBatchSampler(n, b, steps_per_epoch=steps, generator=gen(9)))
    counts = np.bincount(np.concatenate(batches), minlength=n)
    p = b / n
    # the steps' inclusion vectors are i.i.d. with covariance p (1 - p) n / (n - 1) (I - J / n)
    stat = ((counts - steps * p) ** 2).sum() / (steps * p * (1 - p) * n / (n - 1))
    assert_chi2(stat, n - 1)


@pytest.mark.parametrize("n, spare", [(9, None), (9, -1e9), (5, None)])  # rejection, its redraws, permutation
def test_fixed_size_ordered_batches_are_uniform_and_independent(monkeypatch, n, spare):
    if spare is not None:
        monkeypatch.setattr(ts, "_SPARE", spare)
    b, steps = 2, 8000
    batches = np.array(list(FixedSizeBatchSampler(n, b, steps_per_epoch=steps, generator=gen(10 + n))))
    cells = [(i, j) for i, j in itertools.product(range(n), repeat=2) if i != j]
    index = {c: k for k, c in enumerate(cells)}
    codes = np.array([index[tuple(r)] for r in batches])
    # every ordered pair of distinct indices equally likely (so every subset is)
    assert_fits(np.bincount(codes, minlength=len(cells)), np.full(len(cells), 1 / len(cells)))
    # first indices of consecutive steps: independent, uniform over n x n
    firsts = batches[:, 0]
    assert_fits(np.bincount(firsts[:-1] * n + firsts[1:], minlength=n * n), np.full(n * n, 1 / n**2))


def test_fixed_size_chunks_do_not_change_the_distribution(monkeypatch):
    monkeypatch.setattr(ts, "_CHUNK", 200)  # 9 steps a chunk
    s = FixedSizeBatchSampler(20, 3, steps_per_epoch=3000, generator=gen(11))
    batches = list(s)
    assert all(len(set(x)) == 3 for x in batches)
    assert_fits(np.bincount(np.concatenate(batches), minlength=20), np.full(20, 1 / 20))


# ---------------------------------------------------------------------------------------------
# DataLoader


def dataset(n):
    return TensorDataset(torch.arange(n, dtype=torch.float32).unsqueeze(1).repeat(1, 3), torch.arange(n))


@pytest.mark.parametrize("make", [
    lambda n: PoissonBatchSampler(n, 0.1, steps_per_epoch=40, generator=gen(12)),
    lambda n: BallsInBinsBatchSampler(n, 8, generator=gen(13)),
    lambda n: FixedSizeBatchSampler(n, 2, generator=gen(14)),
])
def test_a_dataloader_yields_the_sampled_batches(make):
    n = 6
    data = dataset(n)
    sampler = make(n)
    expected = list(make(n))  # same seed: the batches the loader will draw
    loader = DataLoader(data, batch_sampler=sampler, collate_fn=collate_with_empty(data))
    assert len(loader) == len(sampler)
    got = list(loader)
    assert len(got) == len(expected)
    empty = 0
    for (x, y), idx in zip(got, expected):
        assert x.shape == (len(idx), 3) and x.dtype == torch.float32 and y.dtype == torch.int64
        assert y.tolist() == idx
        assert torch.equal(x[:, 0], y.float())
        empty += len(idx) == 0
    if not isinstance(sampler, FixedSizeBatchSampler):
        assert empty > 0  # the empty batches went through the loader


def test_collate_with_empty_keeps_the_structure():
    data = [{"x": torch.ones(2, 2) * i, "y": i, "pair": (torch.tensor(i), torch.zeros(3))} for i in range(3)]
    collate = collate_with_empty(data)
    full = collate([data[0], data[2]])
    empty = collate([])
    assert full["x"].shape == (2, 2, 2) and empty["x"].shape == (0, 2, 2)
    assert empty["y"].shape == (0,) and empty["y"].dtype == full["y"].dtype
    assert empty["pair"][1].shape == (0, 3) and isinstance(empty["pair"], type(full["pair"]))


# ---------------------------------------------------------------------------------------------
# the module


def test_import_sgmfast_does_not_import_torch():
    code = "import sys, sgmfast, sgmfast.integrations; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_docstring_examples():
    failed, tried = doctest.testmod(ts, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert failed == 0 and tried > 0
