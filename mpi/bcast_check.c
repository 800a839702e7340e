/* bcast_check: an unmodified MPI program in osu_bcast's style that also checks every
 * byte. Per size: a barrier then MPI_Bcast from rank 0, ITER times after WARM warm-up
 * calls; every rank compares what it holds with the pattern the root sent (a different
 * pattern each call, so a stale buffer fails). Rank 0 prints one line per size:
 *
 *   SIZE MEDIAN_US MIN_US CPU_S_PER_GB
 *
 * MEDIAN_US: the median over calls of the time from the root's call until the last
 * rank returned (CLOCK_MONOTONIC; the lab's ranks share one kernel's clock);
 * CPU_S_PER_GB: the CPU time (user + system) of every rank together per GB delivered
 * to the receivers. Exit 1 if any rank held a wrong byte.
 *
 * With -e 1 the program sets MPI_ERRORS_RETURN: a failed MPI_Bcast is printed as
 * "rank R: MPI_Bcast returned ERRSTRING" at each rank that got it, the ranks meet at a
 * barrier, and the job ends with exit status 1 (the failure test's view of every rank).
 *
 *   mpirun -np N bcast_check [-i ITER] [-w WARM] [-e 1] SIZE...
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static double cpu_s(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

static uint8_t pattern(size_t i, int call) { return (uint8_t)(i * 131 + (size_t)call * 17 + (i >> 8)); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int iters = 5, warm = 1, bad = 0, returns = 0;
  int a = 1;
  for (; a < argc && argv[a][0] == '-'; a += 2) {
    if (a + 1 >= argc) break;
    if (!strcmp(argv[a], "-i")) iters = atoi(argv[a + 1]);
    else if (!strcmp(argv[a], "-w")) warm = atoi(argv[a + 1]);
    else if (!strcmp(argv[a], "-e")) returns = atoi(argv[a + 1]);
  }
  if (iters < 1 || a >= argc) {
    if (rank == 0) fprintf(stderr, "usage: bcast_check [-i ITER] [-w WARM] [-e 1] SIZE...\n");
    MPI_Finalize();
    return 2;
  }
  if (returns) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (rank == 0) printf("# size median_us min_us cpu_s_per_gb (%d ranks, %d calls each)\n", size, iters);
  for (; a < argc; a++) {
    size_t n = strtoull(argv[a], NULL, 10);
    uint8_t *buf = malloc(n ? n : 1);
    double *t = calloc((size_t)iters, sizeof *t);
    if (!buf || !t) MPI_Abort(MPI_COMM_WORLD, 3);
    double cpu0 = cpu_s();
    for (int c = 0; c < warm + iters; c++) {
      if (rank == 0)
        for (size_t i = 0; i < n; i++) buf[i] = pattern(i, c);
      else
        memset(buf, 0, n);
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now_s();
      int rc = MPI_Bcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
      if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, text, &len);
        printf("rank %d: MPI_Bcast returned %s\n", rank, text);
        fflush(stdout);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) MPI_Abort(MPI_COMM_WORLD, 1);
        MPI_Barrier(MPI_COMM_WORLD); /* until the abort ends this rank */
        return 1;
      }
      double t1 = now_s(), first = 0, last = 0;
      for (size_t i = 0; i < n; i++)
        if (buf[i] != pattern(i, c)) {
          bad = 1;
          break;
        }
      MPI_Reduce(&t0, &first, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
      MPI_Reduce(&t1, &last, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      if (c >= warm) t[c - warm] = (last - first) * 1e6;
    }
    double cpu = cpu_s() - cpu0, cpu_all = 0;
    MPI_Reduce(&cpu, &cpu_all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
      qsort(t, (size_t)iters, sizeof *t, cmp_double);
      double gb = (double)n * (size - 1) * (warm + iters) / 1e9;
      printf("%zu %.1f %.1f %.3f%s\n", n, t[iters / 2], t[0], gb > 0 ? cpu_all / gb : 0.0,
             any_bad ? " WRONG BYTES" : "");
      fflush(stdout);
    }
    free(buf);
    free(t);
    if (any_bad) {
      MPI_Finalize();
      return 1;
    }
  }
  MPI_Finalize();
  return 0;
}
