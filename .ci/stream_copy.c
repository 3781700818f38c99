/* A plain compiled STREAM-style copy, the outside yardstick for a CPU run's DRAM copy roof.

   b[i] = a[i] over two arrays of doubles of the given size each (default 256 MiB), split over
   the OpenMP threads; each array is first touched by the thread that later copies it. The
   copy is timed TRIALS times (default 10) with omp_get_wtime and counted as STREAM counts
   it: 2 x size bytes per trial (read a, write b), decimal GB/s. It prints the best and the
   worst trial, then checks b against a (exit 1 on a mismatch).

   gcc -O3 -march=native -fopenmp .ci/stream_copy.c -o stream_copy && ./stream_copy [bytes] [trials]
*/
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)256 << 20;
    int trials = argc > 2 ? atoi(argv[2]) : 10;
    size_t n = bytes / sizeof(double);
    double *a = aligned_alloc(4096, n * sizeof(double));
    double *b = aligned_alloc(4096, n * sizeof(double));
    if (!a || !b || trials < 1) {
        fprintf(stderr, "stream_copy: could not allocate 2 x %zu bytes (or no trials)\n", bytes);
        return 2;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        a[i] = 1.0 + (double)(i % 7919);
        b[i] = -1.0;
    }
    double best = 0.0, worst = 1e300;
    for (int t = 0; t < trials; t++) {
        double t0 = omp_get_wtime();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) b[i] = a[i];
        double gbps = 2.0 * (double)(n * sizeof(double)) / (omp_get_wtime() - t0) / 1e9;
        if (gbps > best) best = gbps;
        if (gbps < worst) worst = gbps;
    }
    for (size_t i = 0; i < n; i++) {
        if (b[i] != a[i]) {
            fprintf(stderr, "stream_copy: b[%zu] = %g, not %g\n", i, b[i], a[i]);
            return 1;
        }
    }
    printf("copy best %.1f GB/s worst %.1f GB/s (2 x %zu bytes, %d trials, %d threads)\n", best, worst,
           n * sizeof(double), trials, omp_get_max_threads());
    free(a);
    free(b);
    return 0;
}
