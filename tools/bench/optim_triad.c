/* optim_triad.c - the STREAM triad a[i] = b[i] + s*c[i] that bounds the
 * optimizer benchmark (optim_bench.c). Built alone with -O3 -march=native,
 * as STREAM is, so the bound is the machine's, not this build's. */
#include <stddef.h>

void optim_bench_triad(double *restrict a, const double *restrict b, const double *restrict c,
                       double s, size_t begin, size_t end);

void optim_bench_triad(double *restrict a, const double *restrict b, const double *restrict c,
                       double s, size_t begin, size_t end) {
  for (size_t i = begin; i < end; i++)
    a[i] = b[i] + s * c[i];
}
