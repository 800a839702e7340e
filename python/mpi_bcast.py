"""MPI_Bcast latency through mpi4py, for `rocast bench lab-bcast --mpi` and
scripts/ompi-bcast-compare.sh.

usage: mpirun -np N python mpi_bcast.py SIZE [SIZE ...]

Per size: warm-up iterations, then timed iterations, each after a barrier (as
osu_bcast). Two figures per size, printed on rank 0 as "size latency_us osu_us":

- latency_us: the median over iterations of the time from the root's call until the
  last rank returned holding the message. Every rank reads the same clock
  (CLOCK_MONOTONIC: the lab's hosts are network namespaces of one kernel), so this
  is the figure `rocast mcast lead` reports for its schemes (first post until the
  last member holds the data).
- osu_us: osu_bcast's own figure, each rank's average time per call, averaged over
  the ranks (a rank that returns early, like a root that has handed its data to the
  kernel, pulls it down).

Every rank checks it holds the root's bytes; a mismatch exits 1.
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
        want = np.arange(size, dtype=np.uint64).astype(np.uint8)
        if comm.rank == 0:
            buf[:] = want
        iters, warm = iterations(size)
        total = 0.0
        starts, ends = [], []
        for i in range(iters + warm):
            comm.Barrier()
            t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
            comm.Bcast(buf, root=0)
            t1 = time.clock_gettime(time.CLOCK_MONOTONIC)
            if i >= warm:
                total += t1 - t0
                starts.append(t0)
                ends.append(t1)
        ok = comm.allreduce(int(np.array_equal(buf, want)), op=MPI.MIN)
        avg = comm.reduce(total / iters, op=MPI.SUM, root=0)
        last = np.zeros(iters) if comm.rank == 0 else None
        comm.Reduce(np.array(ends), last, op=MPI.MAX, root=0)
        if comm.rank == 0:
            if not ok:
                print(f"error: a rank's buffer differs from the root's at size {size}", file=sys.stderr)
                sys.exit(1)
            latency = float(np.median(last - np.array(starts)))
            print(f"{size} {latency * 1e6:.2f} {avg / comm.size * 1e6:.2f}", flush=True)


if __name__ == "__main__":
    main()
