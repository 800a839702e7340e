"""OSU-style MPI_Bcast latency (osu_bcast's method) through mpi4py, for
scripts/ompi-bcast-compare.sh.

usage: mpirun -np N python mpi_bcast.py SIZE [SIZE ...]

Per size: warm-up iterations, then timed iterations each followed by a barrier (as
osu_bcast); every rank averages its own time per call and the reported figure is
the average over ranks. Prints "size latency_us" lines on rank 0.
"""
import sys
import time

import numpy as np
from mpi4py import MPI


def iterations(size):
    if size <= 64 * 1024:
        return 200, 20
    if size <= 4 * 1024 * 1024:
        return 30, 5
    return 10, 2


def main():
    comm = MPI.COMM_WORLD
    for arg in sys.argv[1:]:
        size = int(arg)
        buf = np.zeros(size, dtype=np.uint8)
        if comm.rank == 0:
            buf[:] = np.arange(size, dtype=np.uint64).astype(np.uint8)
        iters, warm = iterations(size)
        total = 0.0
        for i in range(iters + warm):
            comm.Barrier()
            t0 = time.perf_counter()
            comm.Bcast(buf, root=0)
            t1 = time.perf_counter()
            if i >= warm:
                total += t1 - t0
        # Every rank must hold the root's bytes.
        want = np.arange(size, dtype=np.uint64).astype(np.uint8)
        ok = comm.allreduce(int(np.array_equal(buf, want)), op=MPI.MIN)
        avg = comm.reduce(total / iters, op=MPI.SUM, root=0)
        if comm.rank == 0:
            if not ok:
                print(f"error: a rank's buffer differs from the root's at size {size}", file=sys.stderr)
                sys.exit(1)
            print(f"{size} {avg / comm.size * 1e6:.2f}", flush=True)


if __name__ == "__main__":
    main()
