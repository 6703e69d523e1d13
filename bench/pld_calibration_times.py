"""Warm time and number of PLD evaluations of one PLD sigma calibration (issue #4 scenarios).

Run: ``python bench/pld_calibration_times.py``.
"""
import time
from sgmfast import calibrate as cal, pld
for (e,d,q,T) in [(8,1e-5,256/60000,14062),(3,1e-5,0.001,100000),(1.0,1e-5,0.01,1000)]:
    cal.calibrate_sigma(e,d,q,T,accountant="pld")
    n=[0]; orig=pld.epsilon
    def cnt(*a,**k):
        n[0]+=1; return orig(*a,**k)
    pld.epsilon=cnt
    t=time.perf_counter(); s=cal.calibrate_sigma(e,d,q,T,accountant="pld"); dt=time.perf_counter()-t
    pld.epsilon=orig
    print(e,d,q,T,"sigma",s,"evals",n[0],"%.0f ms"%(dt*1e3), flush=True)
