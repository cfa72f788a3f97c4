"""Print the kernels of workload W1 in every dialect, and what each backend would launch.

Generating source needs no device: this runs on any machine."""
import numpy as np

import querycompute as qc

x = np.zeros(1_000_000, dtype=np.float32)      # only the dtype and length matter here
q = qc.query(x).select(lambda v: v * 2).where(lambda v: v > 1000).select(lambda v: v + 100)

for backend in ("cuda", "opencl", "metal", "cpu"):
    print(f"==================== {backend} ====================")
    print(q.source(backend, terminal="sum"))

print(q.explain("cuda", terminal="sum"))
