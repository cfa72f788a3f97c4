"""Queries over Dask collections: the same Query API, one compiled pass per chunk on the
workers of a distributed cluster, partials combined by Dask (docs/distributed.md).

Run: python examples/dask_query.py   (needs the `dask` extra: pip install querycompute[dask])
"""
import numpy as np
import dask.array as da
import dask.dataframe as dd
import pandas as pd
from distributed import Client, LocalCluster

import querycompute as qc
from querycompute.dask import run as dask_run


def main() -> None:
    rng = np.random.default_rng(0)
    v = rng.uniform(0, 2000, 200_000).astype(np.float32)
    x = da.from_array(v, chunks=50_000)                    # 4 chunks

    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        # W1: one fused pass per chunk, the four partial sums added by a Dask tree
        w1 = qc.query(x).select(lambda e: e * 2).where(lambda e: e > 1000).select(lambda e: e + 100)
        total = w1.sum()
        ref = qc.query(v).on("numpy").select(lambda e: e * 2).where(lambda e: e > 1000) \
            .select(lambda e: e + 100).sum()
        print(f"W1 sum on the cluster: {total}  (numpy backend: {ref})")
        assert np.isclose(total, ref, rtol=1e-5)

        # to_array stays lazy: a Dask array with unknown chunk sizes (a where ran)
        kept = qc.query(x).where(lambda e: e > 1990).to_array()
        print(f"to_array -> {type(kept).__name__} with chunks {kept.chunks}")
        assert np.array_equal(kept.compute(), v[v > 1990])

        # compute=False: the Dask object instead of the value (client.compute runs it)
        lazy_total = w1.sum(compute=False)
        print(f"sum(compute=False) -> {type(lazy_total).__name__}")
        assert np.isclose(client.compute(lazy_total).result(), ref, rtol=1e-5)

        # a pipeline operator over chunks: top-5 per chunk, merged up a tree of tasks
        top5 = qc.query(x).order_by_descending().take(5).to_array().compute()
        print(f"order_by_descending().take(5): {top5.tolist()}")
        assert np.array_equal(top5, np.sort(v)[::-1][:5])

        # a Dask dataframe as a table, grouped: per-chunk groups merged, sorted by key
        frame = dd.from_pandas(pd.DataFrame({"price": v, "cat": (v // 250).astype(np.int32)}),
                               npartitions=4)
        groups = qc.query(frame).group_by(lambda r: r.cat).agg(n=qc.count, top=qc.max(lambda r: r.price))
        print("group_by(cat):", {k: c.tolist() for k, c in groups.items()})
        assert groups["n"].tolist() == np.bincount((v // 250).astype(np.int32)).tolist()

        # each worker compiled the kernel or loaded it from its disk cache
        for addr, log in client.run(dask_run.worker_log).items():
            origins = sorted({cache for *_, kernels in log for _, cache in kernels})
            print(f"worker {addr}: {len(log)} chunk runs, kernels from {origins}")
    print("all results match the numpy backend")


if __name__ == "__main__":
    main()
