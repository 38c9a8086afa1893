/* test_model_kernels.c - the CPU backend's kernels (through its table,
 * strata/backend.h) against plain double-precision loops, at shapes the
 * small fixtures do not reach: causal attention over several query blocks
 * (T not a multiple of the block), forward and backward, multi-head and
 * grouped- and multi-query. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "strata/backend.h"

/* Naive causal attention in double: out, P; and the backward. Rows of qkv
 * are q (NH heads of hs = C / NH) | k (NKV heads) | v (NKV heads); query head
 * h reads kv head h / (NH / NKV). */
static void naive_attention(double *out, double *P, const float *qkv, int B, int T, int C, int NH, int NKV) {
    const int hs = C / NH, W = C + 2 * NKV * hs, group = NH / NKV;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const int ko = C + h / group * hs, vo = C + (NKV + h / group) * hs;
                const float *q = qkv + ((size_t)b * T + i) * W + h * hs;
                double *p = P + (((size_t)b * NH + h) * T + i) * T, mx = -1e300, sum = 0;
                for (int j = 0; j <= i; j++) {
                    const float *k = qkv + ((size_t)b * T + j) * W + ko;
                    double s = 0;
                    for (int d = 0; d < hs; d++) s += (double)q[d] * k[d];
                    p[j] = s / sqrt((double)hs);
                    if (p[j] > mx) mx = p[j];
                }
                for (int j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
                for (int j = 0; j < T; j++) p[j] = j <= i ? p[j] / sum : 0;
                for (int d = 0; d < hs; d++) {
                    double y = 0;
                    for (int j = 0; j <= i; j++) y += p[j] * qkv[((size_t)b * T + j) * W + vo + d];
                    out[((size_t)b * T + i) * C + h * hs + d] = y;
                }
            }
}

static void naive_attention_backward(double *dqkv, const double *P, const float *dout, const float *qkv, int B, int T,
                                     int C, int NH, int NKV) {
    const int hs = C / NH, W = C + 2 * NKV * hs, group = NH / NKV;
    memset(dqkv, 0, sizeof(double) * (size_t)B * T * W);
    double *dp = malloc(sizeof(double) * (size_t)T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const int ko = C + h / group * hs, vo = C + (NKV + h / group) * hs;
                const double *p = P + (((size_t)b * NH + h) * T + i) * T;
                const float *dy = dout + ((size_t)b * T + i) * C + h * hs;
                double dot = 0;
                for (int j = 0; j <= i; j++) {
                    const float *v = qkv + ((size_t)b * T + j) * W + vo;
                    double s = 0;
                    for (int d = 0; d < hs; d++) {
                        s += (double)dy[d] * v[d];
                        dqkv[((size_t)b * T + j) * W + vo + d] += p[j] * dy[d];
                    }
                    dp[j] = s;
                    dot += p[j] * s;
                }
                for (int j = 0; j <= i; j++) {
                    double ds = p[j] * (dp[j] - dot) / sqrt((double)hs);
                    for (int d = 0; d < hs; d++) {
                        dqkv[((size_t)b * T + i) * W + h * hs + d] += ds * qkv[((size_t)b * T + j) * W + ko + d];
                        dqkv[((size_t)b * T + j) * W + ko + d] += ds * qkv[((size_t)b * T + i) * W + h * hs + d];
                    }
                }
            }
    free(dp);
}

static double max_rel(const float *a, const double *r, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - r[i]) * ((double)a[i] - r[i]);
        den += r[i] * r[i];
    }
    return sqrt(num / den);
}

static void check_attention(int B, int T, int C, int NH, int NKV) {
    st_rng r;
    st_rng_seed(&r, (uint64_t)T);
    const size_t W = (size_t)C + 2 * (size_t)NKV * (C / NH);
    size_t nqkv = (size_t)B * T * W, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
    float *qkv = malloc(sizeof(float) * nqkv), *out = malloc(sizeof(float) * nout), *att = malloc(sizeof(float) * natt);
    float *dout = malloc(sizeof(float) * nout), *dqkv = malloc(sizeof(float) * nqkv), *dpre = malloc(sizeof(float) * natt);
    double *rout = malloc(sizeof(double) * nout), *ratt = malloc(sizeof(double) * natt), *rdqkv = malloc(sizeof(double) * nqkv);
    st_rng_normal_fill(&r, qkv, nqkv, 1.0f);
    st_rng_normal_fill(&r, dout, nout, 1.0f);
    for (size_t i = 0; i < natt; i++) att[i] = dpre[i] = NAN;   /* must be overwritten where used */
    for (size_t i = 0; i < nqkv; i++) dqkv[i] = NAN;            /* every column, k and v of each group included */
    const compute_backend *be = compute_backend_cpu();   /* unified: host arrays are its device memory */
    be->attention_forward(be, out, att, qkv, B, T, C, NH, NKV);
    be->attention_backward(be, dqkv, dpre, dout, qkv, att, B, T, C, NH, NKV);
    naive_attention(rout, ratt, qkv, B, T, C, NH, NKV);
    naive_attention_backward(rdqkv, ratt, dout, qkv, B, T, C, NH, NKV);
    double eo = max_rel(out, rout, nout), ea = max_rel(att, ratt, natt), ed = max_rel(dqkv, rdqkv, nqkv);
    printf("  B=%d T=%d C=%d NH=%d NKV=%d: out %.1e, att %.1e, dqkv %.1e\n", B, T, C, NH, NKV, eo, ea, ed);
    assert_true(eo < 1e-5);
    assert_true(ea < 1e-5);
    assert_true(ed < 1e-5);
    for (size_t i = 0; i < natt; i++) assert_false(isnan(att[i]));   /* zeros above the diagonal */
    free(qkv); free(out); free(att); free(dout); free(dqkv); free(dpre); free(rout); free(ratt); free(rdqkv);
}

static void test_attention_against_naive(void **state) {
    (void)state;
    check_attention(2, 150, 32, 4, 4);   /* three query blocks, a partial last one */
    check_attention(1, 64, 16, 2, 2);    /* exactly one block */
    check_attention(2, 7, 16, 2, 2);
}

/* Grouped-query (NKV < NH) and multi-query (NKV = 1) attention: the k and v
 * gradients gather the query heads of their group. */
static void test_grouped_query_attention_against_naive(void **state) {
    (void)state;
    check_attention(2, 150, 96, 6, 2);   /* groups of 3 over three query blocks */
    check_attention(2, 70, 64, 4, 1);    /* multi-query */
    check_attention(1, 67, 128, 8, 4);   /* groups of 2, hs 16 */
    check_attention(3, 5, 24, 3, 1);     /* one short block, hs 8 */
}

/* A NaN logit anywhere in a row makes that row's loss NaN (on the vector
 * path too), so training stops instead of going on with garbage. */
static void test_crossentropy_propagates_nan(void **state) {
    (void)state;
    enum { V = 100, Vp = 128 };
    float logits[2 * Vp];
    for (int i = 0; i < 2 * Vp; i++) logits[i] = 0.01f * (float)(i % 17);
    logits[37] = NAN;                 /* row 0, not the target column */
    int32_t targets[2] = {5, 5};
    float losses[2];
    const compute_backend *be = compute_backend_cpu();
    be->crossentropy_softmax(be, logits, losses, targets, 2, V, Vp, 0.0f);
    assert_true(isnan(losses[0]));
    assert_false(isnan(losses[1]));   /* the other row is untouched */
    assert_float_equal(losses[1], 4.61, 0.1);   /* about ln(100) for near-uniform logits */
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_attention_against_naive),
                                       cmocka_unit_test(test_grouped_query_attention_against_naive),
                                       cmocka_unit_test(test_crossentropy_propagates_nan)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
