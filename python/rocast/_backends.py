"""Where rocast runs many independent jobs: the one place that knows the backends, for
`rocast.sweep` (simulations) and `rocast.distribute` (`rocast repro --backend dask`'s
figure commands).

- "local": a pool here, embedded, no server: processes (forked where the OS has fork,
  so work at a script's top level or in a notebook needs no `__main__` guard), or
  threads for jobs that are subprocesses anyway.
- "dask": Dask's distributed scheduler: a LocalCluster of worker processes with one
  thread each (the work is CPU-bound), or the running cluster at `address`.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence

BACKENDS = ("local", "dask")


def map_on(
    fn: Callable[[Any], Any],
    items: Sequence[Any],
    backend: str,
    workers: int,
    address: Optional[str] = None,
    local_threads: bool = False,
) -> List[Any]:
    """`[fn(x) for x in items]` on `backend` with `workers` at a time; results in order.
    The first job to raise raises here."""
    if backend == "local":
        return _local(fn, items, workers, local_threads)
    if backend == "dask":
        return _dask(fn, items, workers, address)
    raise ValueError(f"backend {backend!r}: expected 'local' or 'dask'")


def _local(fn, items, workers: int, threads: bool) -> List[Any]:
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    if threads:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(fn, items))
    import multiprocessing

    # fork where there is one (Linux): the workers need not re-import the caller's
    # script. Elsewhere spawn (the caller then needs `if __name__ == "__main__":`).
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        return list(pool.map(fn, items))


def _dask(fn, items, workers: int, address: Optional[str]) -> List[Any]:
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError("backend='dask' needs dask[distributed] (python/requirements.txt)") from e
    if address is not None:
        with Client(address) as client:
            return client.gather(client.map(fn, items, pure=False))
    with LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, Client(cluster) as client:
        return client.gather(client.map(fn, items, pure=False))
