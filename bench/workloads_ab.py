"""Median ms of the headline workloads in the sgmfast on PYTHONPATH (warm kernels, one-step cache
cleared before every call): run it for two trees in turn to compare them, e.g.
``PYTHONPATH=/tmp/old python bench/workloads_ab.py 5`` then ``PYTHONPATH=. python bench/workloads_ab.py 5``
(used for issue #30's "no query slower" check; one JSON line of {workload: ms})."""
import json
import statistics
import sys
import time

from sgmfast import calibrate, pld
from sgmfast.pld import common

W = {
 "W1": lambda: pld.epsilon(1.0, 0.01, 1000, 1e-5),
 "W2": lambda: pld.epsilon(1.1, 256/60000, 14062, 1e-5),
 "W3": lambda: pld.epsilon(0.8, 1e-3, 10**5, 1e-5),
 "W4": lambda: pld.epsilon(0.6, 1e-4, 10**6, 1e-5),
 "C1": lambda: calibrate.calibrate_sigma(2.0, 1e-5, 256/60000, 14062),
 "FS": lambda: pld.epsilon(1.1, 256/60000, 14062, 1e-5, sampler="fixed_size"),
 "BB": lambda: pld.epsilon(1.1, 1/234, 14040, 1e-5, sampler="balls_in_bins"),
}
n = int(sys.argv[1]) if len(sys.argv) > 1 else 7
out = {}
for k, f in W.items():
    f()
    ts = []
    for i in range(n):
        common.STEP_CACHE.clear()
        t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    out[k] = statistics.median(ts) * 1e3
print(json.dumps(out))
