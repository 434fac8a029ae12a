/* Plain MPI_Allreduce(MPI_SUM, MPI_FLOAT) timing, no Kiln: the baseline that Kiln's MPI
 * all_reduce is measured against. For each message size (4 KiB .. 64 MiB, powers of 4) it
 * runs warm-up calls, then timed calls, each call timed on its own between barriers; the
 * time of a call is the slowest rank's (MPI_MAX over ranks), and the median over calls is
 * reported. Bandwidths follow nccl-tests' definitions (doc/PERFORMANCE.md there):
 *   algbw = bytes / time,   busbw = algbw * 2 (n - 1) / n   (all_reduce).
 * GB is 1e9 bytes. Rank 0 prints one line per size:
 *   size_bytes=4096 count=1024 ranks=2 iters=200 median_us=3.10 min_us=2.90 algbw_GBps=1.321 busbw_GBps=1.321 ok=1
 * ok=1 when the sum is exact (every rank contributes small integers).
 *
 *   mpicc -O2 -o mpi_allreduce_plain bench/mpi_allreduce_plain.c
 *   mpirun -np 2 ./mpi_allreduce_plain [max_bytes] [iters_scale] [min_bytes]
 * min_bytes (default 4 KiB, at least 4) reaches decode-sized messages, e.g. 256 B.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Fewer calls for bigger messages, so that every size costs about the same time. */
static int iterations_for(size_t bytes, double scale) {
  int iters = bytes <= (64u << 10) ? 200 : bytes <= (1u << 20) ? 100 : bytes <= (16u << 20) ? 30 : 10;
  iters = (int)(iters * scale);
  return iters < 5 ? 5 : iters > 2000 ? 2000 : iters;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const size_t max_bytes = argc > 1 ? (size_t)strtoull(argv[1], NULL, 0) : (size_t)64 << 20;
  const double scale = argc > 2 ? atof(argv[2]) : 1.0;
  size_t min_bytes = argc > 3 ? (size_t)strtoull(argv[3], NULL, 0) : (size_t)4 << 10;
  if (min_bytes < sizeof(float)) min_bytes = sizeof(float);

  const size_t max_count = max_bytes / sizeof(float);
  float* send = malloc(max_count * sizeof(float));
  float* recv = malloc(max_count * sizeof(float));
  double* times = malloc(2000 * sizeof(double));
  if (!send || !recv || !times) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  /* Rank r sends (i % 7) + r: small integers, so the float sum is exact. */
  for (size_t i = 0; i < max_count; ++i) send[i] = (float)(i % 7 + rank);
  memset(recv, 0, max_count * sizeof(float));

  if (rank == 0) {
    printf("# MPI_Allreduce(MPI_SUM, MPI_FLOAT), %d ranks; time = slowest rank's, median of iters\n",
           ranks);
    fflush(stdout);
  }
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const int count = (int)(bytes / sizeof(float));
    const int iters = iterations_for(bytes, scale);
    const int warmup = iters / 10 < 3 ? 3 : iters / 10;
    for (int i = 0; i < warmup; ++i) {
      MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    for (int i = 0; i < iters; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      const double local = MPI_Wtime() - t0;
      MPI_Allreduce(&local, &times[i], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    /* Check: element i is sum over ranks of (i % 7 + r). */
    int ok = 1;
    const float rank_sum = (float)(ranks * (ranks - 1) / 2);
    for (int i = 0; i < count; i += 1 + count / 4096) {
      if (recv[i] != (float)(ranks * (i % 7)) + rank_sum) ok = 0;
    }
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);

    qsort(times, (size_t)iters, sizeof(double), compare_double);
    const double median = iters % 2 ? times[iters / 2]
                                     : 0.5 * (times[iters / 2 - 1] + times[iters / 2]);
    const double algbw = (double)bytes / median / 1e9;
    const double busbw = algbw * 2.0 * (ranks - 1) / ranks;
    if (rank == 0) {
      printf("size_bytes=%zu count=%d ranks=%d iters=%d median_us=%.2f min_us=%.2f "
             "algbw_GBps=%.3f busbw_GBps=%.3f ok=%d\n",
             bytes, count, ranks, iters, median * 1e6, times[0] * 1e6, algbw, busbw, all_ok);
      fflush(stdout);
    }
  }
  free(send);
  free(recv);
  free(times);
  MPI_Finalize();
  return 0;
}
