/* train_testutil.h - what the training tests share: a run's token ids and
 * how far two weight vectors are apart. */
#ifndef STRATA_TRAIN_TESTUTIL_H
#define STRATA_TRAIN_TESTUTIL_H

#include <math.h>
#include <stdlib.h>

#include "strata/train.h"

/* steps global batches of tc's shape (micro_batches x B rows of T + 1
 * ids), ids below 97 drawn from seed; the caller frees them. */
static inline int32_t *test_tokens(const train_config *tc, int steps, uint64_t seed) {
    const size_t n = (size_t)steps * tc->micro_batches * tc->B * (tc->T + 1);
    int32_t *tok = malloc(n * sizeof *tok);
    if (!tok) return NULL;
    st_rng r;
    st_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) tok[i] = (int32_t)(st_rng_next(&r) % 97);
    return tok;
}

/* |a - b| / |b| over n floats, in double. */
static inline double rel_diff(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / den);
}

#endif
