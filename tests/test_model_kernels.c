/* test_model_kernels.c - the CPU backend's kernels (through its table,
 * strata/backend.h) against plain double-precision loops, at shapes the
 * small fixtures do not reach: causal attention over several query blocks
 * (T not a multiple of the block), forward and backward, multi-head and
 * grouped- and multi-query; attention over a cache of keys and values
 * (generation), and the one-row products. */
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

/* Attention over a cache: N new rows at positions pos.. after kv_cache_write,
 * NKV key/value heads shared by NH query heads, against the same sums in
 * double straight from the new rows' q and the cache's keys and values. */
static void check_cached_attention(int N, int pos, int max_len, int NH, int NKV, int hs) {
    st_rng r;
    st_rng_seed(&r, (uint64_t)(N * 1000 + pos));
    const int Cq = NH * hs, Ckv = NKV * hs, T = pos + N, ld = Cq + 2 * Ckv;
    const size_t ncache = (size_t)NKV * max_len * hs;
    float *kc = malloc(sizeof(float) * ncache), *vc = malloc(sizeof(float) * ncache);
    float *qkv = malloc(sizeof(float) * (size_t)N * ld), *out = malloc(sizeof(float) * (size_t)N * Cq);
    float *att = malloc(sizeof(float) * (size_t)NH * N * T);
    double *ref = malloc(sizeof(double) * (size_t)N * Cq), *p = malloc(sizeof(double) * (size_t)T);
    st_rng_normal_fill(&r, kc, ncache, 1.0f);   /* positions < pos: earlier tokens' keys and values */
    st_rng_normal_fill(&r, vc, ncache, 1.0f);
    st_rng_normal_fill(&r, qkv, (size_t)N * ld, 1.0f);
    const compute_backend *be = compute_backend_cpu();
    be->kv_cache_write(be, kc, vc, qkv + Cq, qkv + Cq + Ckv, ld, N, pos, max_len, NKV, hs);
    for (int n = 0; n < N; n++)   /* the write put row n's k and v at position pos + n */
        for (int c = 0; c < Ckv; c++) {
            const size_t at = ((size_t)(c / hs) * max_len + pos + n) * hs + c % hs;
            assert_true(kc[at] == qkv[(size_t)n * ld + Cq + c] && vc[at] == qkv[(size_t)n * ld + Cq + Ckv + c]);
        }
    be->attention_cached_forward(be, out, att, qkv, ld, kc, vc, N, pos, max_len, NH, NKV, hs);
    for (int h = 0; h < NH; h++) {
        const float *K = kc + (size_t)(h / (NH / NKV)) * max_len * hs, *V = vc + (size_t)(h / (NH / NKV)) * max_len * hs;
        for (int i = 0; i < N; i++) {
            double mx = -1e300, sum = 0;
            for (int j = 0; j <= pos + i; j++) {
                double d = 0;
                for (int e = 0; e < hs; e++) d += (double)qkv[(size_t)i * ld + h * hs + e] * K[(size_t)j * hs + e];
                p[j] = d / sqrt((double)hs);
                if (p[j] > mx) mx = p[j];
            }
            for (int j = 0; j <= pos + i; j++) sum += p[j] = exp(p[j] - mx);
            for (int e = 0; e < hs; e++) {
                double y = 0;
                for (int j = 0; j <= pos + i; j++) y += p[j] / sum * V[(size_t)j * hs + e];
                ref[(size_t)i * Cq + h * hs + e] = y;
            }
        }
    }
    double e = max_rel(out, ref, (size_t)N * Cq);
    printf("  N=%d pos=%d max_len=%d NH=%d NKV=%d hs=%d: out %.1e\n", N, pos, max_len, NH, NKV, hs, e);
    assert_true(e < 1e-5);
    free(kc); free(vc); free(qkv); free(out); free(att); free(ref); free(p);
}

static void test_cached_attention_against_naive(void **state) {
    (void)state;
    check_cached_attention(1, 0, 8, 4, 4, 16);      /* the first token */
    check_cached_attention(1, 99, 100, 4, 4, 16);   /* a step into the last position */
    check_cached_attention(150, 0, 200, 4, 4, 8);   /* a prefill: three blocks, a partial last one */
    check_cached_attention(70, 17, 100, 6, 2, 8);   /* a chunk after cached positions, grouped KV heads */
}

/* Matrix-vector products (one row: the CPU backend's own loops) against
 * double sums, both layouts, alpha and beta, outputs past one block. */
static void test_one_row_products_against_naive(void **state) {
    (void)state;
    enum { K = 503, N = 2100 };   /* 1.06M weights: the threaded path */
    st_rng r;
    st_rng_seed(&r, 7);
    float *a = malloc(sizeof(float) * K), *b = malloc(sizeof(float) * K * N), *c = malloc(sizeof(float) * N);
    float *c0 = malloc(sizeof(float) * N), *bias = malloc(sizeof(float) * N);
    double *ref = malloc(sizeof(double) * N);
    st_rng_normal_fill(&r, a, K, 1.0f);
    st_rng_normal_fill(&r, b, (size_t)K * N, 1.0f);
    st_rng_normal_fill(&r, c0, N, 1.0f);
    st_rng_normal_fill(&r, bias, N, 1.0f);
    const compute_backend *be = compute_backend_cpu();
    for (int tb = 0; tb <= 1; tb++) {
        memcpy(c, c0, sizeof(float) * N);
        be->sgemm(be, 0, tb, 1, N, K, 0.7f, a, K, b, tb ? K : N, 0.3f, c, N);
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)a[k] * b[tb ? (size_t)n * K + k : (size_t)k * N + n];
            ref[n] = 0.7 * s + 0.3 * c0[n];
        }
        double e = max_rel(c, ref, N);
        printf("  sgemm M=1 trans_b=%d: %.1e\n", tb, e);
        assert_true(e < 1e-6);
    }
    be->matmul_forward(be, c, a, b, bias, 1, K, N);
    for (int n = 0; n < N; n++) {
        double s = bias[n];
        for (int k = 0; k < K; k++) s += (double)a[k] * b[(size_t)k * N + n];
        ref[n] = s;
    }
    double e = max_rel(c, ref, N);
    printf("  matmul_forward N=1: %.1e\n", e);
    assert_true(e < 1e-6);
    free(a); free(b); free(c); free(c0); free(bias); free(ref);
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
                                       cmocka_unit_test(test_cached_attention_against_naive),
                                       cmocka_unit_test(test_one_row_products_against_naive),
                                       cmocka_unit_test(test_crossentropy_propagates_nan)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
