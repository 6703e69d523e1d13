"""Sweeps on an Executor (issue #17 item 3): the same answers as the serial call, on a process
pool and on a Dask cluster (where dask.distributed is installed)."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest

from sgmfast import calibrate, pld
from sgmfast.analysis import figure1_data


@pytest.fixture(scope="module")
def pool():
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        yield ex


EPS = np.array([1.0, 4.0])
QS = np.geomspace(1e-3, 0.05, 10)[:, None]  # 20 points: two chunks of the PLD calibration


def test_calibrate_sigma_on_a_process_pool_is_the_serial_call(pool):
    serial = calibrate.calibrate_sigma(EPS, 1e-5, QS, 500)
    assert np.array_equal(calibrate.calibrate_sigma(EPS, 1e-5, QS, 500, executor=pool), serial)
    rdp_serial = calibrate.calibrate_sigma(EPS, 1e-5, QS, 500, accountant="rdp")
    assert np.array_equal(calibrate.calibrate_sigma(EPS, 1e-5, QS, 500, accountant="rdp", executor=pool), rdp_serial)


def test_calibrate_q_and_pld_queries_on_a_pool(pool):
    sig = np.array([0.8, 1.5])
    assert np.array_equal(calibrate.calibrate_q(2.0, 1e-5, sig, 300, executor=pool), calibrate.calibrate_q(2.0, 1e-5, sig, 300))
    s = np.linspace(0.8, 2.0, 3)[:, None]
    d = np.array([1e-5, 1e-7])
    a, b = pld.epsilon(s, 0.01, 300, d), pld.epsilon(s, 0.01, 300, d, executor=pool)
    assert np.array_equal(a.lower, b.lower) and np.array_equal(a.upper, b.upper)
    a, b = pld.delta(s, 0.01, 300, [1.0, 2.0]), pld.delta(s, 0.01, 300, [1.0, 2.0], executor=pool)
    assert np.array_equal(a.lower, b.lower) and np.array_equal(a.upper, b.upper)
    assert a.met is b.met and a.met is not None  # (δ's met from the tasks too)


def test_figure1_on_a_thread_pool_is_the_serial_one():
    kw = dict(epsilons=(1.0, 2.0), steps=(1, 10), n_q=4, q_min=0.1)
    with ThreadPoolExecutor(2) as ex:
        assert np.array_equal(figure1_data(1e-5, executor=ex, **kw).sigma, figure1_data(1e-5, workers=1, **kw).sigma)


def test_a_forking_pool_and_non_executors_are_refused():
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as ex:
        with pytest.raises(ValueError, match="spawn"):
            calibrate.calibrate_sigma(EPS, 1e-5, QS, 500, executor=ex)
    with pytest.raises(TypeError, match="executor"):
        pld.epsilon([1.0, 2.0], 0.01, 100, 1e-5, executor=object())


def test_dask_cluster_gives_the_serial_answers():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            ex = client.get_executor()
            serial = calibrate.calibrate_sigma(EPS, 1e-5, QS, 500)
            assert np.array_equal(calibrate.calibrate_sigma(EPS, 1e-5, QS, 500, executor=ex), serial)


def test_batch_size_plan_on_a_pool(pool):
    from sgmfast.analysis import plan_batch_size

    kw = dict(grad_norm=1.0, dim=1000, epochs=2, candidates=[64, 512, 4096])
    assert plan_batch_size(20000, 2.0, 1e-5, executor=pool, **kw) == plan_batch_size(20000, 2.0, 1e-5, **kw)


def test_calibrate_steps_and_batch_size_over_arrays_on_a_pool(pool):
    eps = np.array([1.0, 2.0, 4.0])
    serial = calibrate.calibrate_steps(eps, 1e-5, 1.0, [[0.01], [0.0]])
    assert serial.shape == (2, 3) and np.all(serial[1] == np.inf)  # q = 0: every number of steps
    assert np.array_equal(calibrate.calibrate_steps(eps, 1e-5, 1.0, [[0.01], [0.0]], executor=pool), serial)
    for i, e in enumerate(eps):  # each point is the scalar call
        assert serial[0, i] == calibrate.calibrate_steps(float(e), 1e-5, 1.0, 0.01)
    b = calibrate.calibrate_batch_size(eps, 1e-5, 1.0, 60000, epochs=2)
    assert b.dtype == np.int64 and np.all(np.diff(b) > 0)
    assert np.array_equal(calibrate.calibrate_batch_size(eps, 1e-5, 1.0, 60000, epochs=2, executor=pool), b)
    assert b[1] == calibrate.calibrate_batch_size(2.0, 1e-5, 1.0, 60000, epochs=2)
