/* test_model_backend.c - the compute backends (strata/backend.h): every op
 * of the checking backend gives the CPU backend's bits on random inputs,
 * and the CPU backend gives the same bits with 1, 2 and 3 threads;
 * its device memory faults when the host touches it directly, its ops abort
 * on host pointers, ops from two threads on shared memory work, and
 * backends are found by name. The death tests run in a forked child with
 * the default signal handlers (ASan's would turn a fault into its own
 * report and abort). */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <omp.h>

#include "death_testutil.h"
#include "strata/backend.h"

/* Shapes: T over one attention block of 64 rows, n's not multiples of a vector or a chunk. */
enum { B = 2, T = 70, C = 32, NH = 4, N = B * T, V = 100, VP = 128, IC = 32, OC = 96 };
#define NC ((size_t)N * C)
#define LONG_N ((size_t)200003)   /* sum_sq: four chunks of 65536, the last partial */

/* --- every op, bit for bit -------------------------------------------------------- */

enum { MAX_BUFS = 8 };
typedef enum { F32, IDS, BF16 } buf_kind;
typedef struct buf_spec {
    size_t n;        /* elements */
    buf_kind kind;   /* F32: normal floats; IDS: token ids < V; BF16: rounded normal floats */
} buf_spec;

/* One op on arrays dev[0..] (device memory of be), all inputs and outputs
 * alike; a scalar result, if any, into *scalar. */
typedef struct op_case {
    const char *name;
    buf_spec bufs[MAX_BUFS];
    void (*run)(const compute_backend *be, void *const *dev, double *scalar);
} op_case;

static size_t elem_bytes(buf_kind k) { return k == BF16 ? sizeof(uint16_t) : 4; }

static int buf_count(const op_case *c) {
    int n = 0;
    while (n < MAX_BUFS && c->bufs[n].n) n++;
    return n;
}

/* The arrays' starting contents, the same for every backend. */
static void *make_init(const buf_spec *b, uint64_t seed) {
    st_rng r;
    st_rng_seed(&r, seed);
    void *p = malloc(b->n * elem_bytes(b->kind));
    assert_non_null(p);
    if (b->kind == F32) st_rng_normal_fill(&r, p, b->n, 1.0f);
    for (size_t i = 0; b->kind == IDS && i < b->n; i++) ((int32_t *)p)[i] = (int32_t)(st_rng_next(&r) % V);
    for (size_t i = 0; b->kind == BF16 && i < b->n; i++) {
        float f;
        st_rng_normal_fill(&r, &f, 1, 1.0f);
        ((st_bf16 *)p)[i] = st_f32_to_bf16(f);
    }
    return p;
}

/* Runs c on be: each array copied into a device allocation, the op, each
 * array copied back into out[i]. */
static void run_case(const compute_backend *be, const op_case *c, void *const *init, void **out, double *scalar) {
    void *dev[MAX_BUFS] = {0};
    const int n = buf_count(c);
    for (int i = 0; i < n; i++) {
        const size_t bytes = c->bufs[i].n * elem_bytes(c->bufs[i].kind);
        assert_non_null(dev[i] = be->alloc(be, bytes));
        be->to_device(be, dev[i], init[i], bytes);
    }
    *scalar = 0.0;
    c->run(be, dev, scalar);
    for (int i = 0; i < n; i++) {
        const size_t bytes = c->bufs[i].n * elem_bytes(c->bufs[i].kind);
        assert_non_null(out[i] = malloc(bytes));
        be->to_host(be, out[i], dev[i], bytes);
        be->free(be, dev[i]);
    }
}

#define F(i) ((float *)dev[i])
#define ID(i) ((int32_t *)dev[i])

static void run_layernorm_forward(const compute_backend *be, void *const *dev, double *s) {
    be->layernorm_forward(be, F(0), F(1), F(2), F(3), F(4), F(5), N, C);
}
static void run_layernorm_backward(const compute_backend *be, void *const *dev, double *s) {
    be->layernorm_backward(be, F(0), F(1), F(2), F(3), F(4), F(5), F(6), F(7), N, C);
}
static void run_matmul_forward(const compute_backend *be, void *const *dev, double *s) {
    be->matmul_forward(be, F(0), F(1), F(2), F(3), N, IC, OC);
}
static void run_matmul_forward_no_bias(const compute_backend *be, void *const *dev, double *s) {
    be->matmul_forward(be, F(0), F(1), F(2), NULL, N, IC, OC);
}
static void run_matmul_backward(const compute_backend *be, void *const *dev, double *s) {
    be->matmul_backward(be, F(0), F(1), F(2), F(3), F(4), F(5), N, IC, OC);
}
static void run_matmul_backward_weights_only(const compute_backend *be, void *const *dev, double *s) {
    be->matmul_backward(be, NULL, F(1), NULL, F(3), F(4), F(5), N, IC, OC);
}
static void run_attention_forward(const compute_backend *be, void *const *dev, double *s) {
    be->attention_forward(be, F(0), F(1), F(2), B, T, C, NH, NH);
}
static void run_attention_backward(const compute_backend *be, void *const *dev, double *s) {
    be->attention_backward(be, F(0), F(1), F(2), F(3), F(4), B, T, C, NH, NH);
}
static void run_gelu_forward(const compute_backend *be, void *const *dev, double *s) {
    be->gelu_forward(be, F(0), F(1), NC + 3);
}
static void run_gelu_backward(const compute_backend *be, void *const *dev, double *s) {
    be->gelu_backward(be, F(0), F(1), NC + 3);
}
static void run_residual_forward(const compute_backend *be, void *const *dev, double *s) {
    be->residual_forward(be, F(0), F(1), F(2), NC + 3);
}
static void run_crossentropy_loss(const compute_backend *be, void *const *dev, double *s) {
    be->crossentropy_softmax(be, F(0), F(1), ID(2), N, V, VP, 0.0f);
}
static void run_crossentropy_grad(const compute_backend *be, void *const *dev, double *s) {
    be->crossentropy_softmax(be, F(0), F(1), ID(2), N, V, VP, 0.25f);
}
static void run_embed_forward(const compute_backend *be, void *const *dev, double *s) {
    be->embed_forward(be, F(0), ID(1), F(2), F(3), B, T, C, VP);
}
static void run_embed_backward(const compute_backend *be, void *const *dev, double *s) {
    be->embed_backward(be, F(0), F(1), ID(2), F(3), B, T, C, VP);
}
/* sgemm on [37, 29] += [37, 45] [45, 29], every transposition, with padded rows */
enum { GM = 37, GN = 29, GK = 45 };
static void run_sgemm(const compute_backend *be, void *const *dev, int ta, int tb) {
    be->sgemm(be, ta, tb, GM, GN, GK, 0.7f, F(0), ta ? GM + 3 : GK + 3, F(1), tb ? GK + 5 : GN + 5, 0.3f, F(2), GN + 2);
}
static void run_sgemm_nn(const compute_backend *be, void *const *dev, double *s) { run_sgemm(be, dev, 0, 0); }
static void run_sgemm_nt(const compute_backend *be, void *const *dev, double *s) { run_sgemm(be, dev, 0, 1); }
static void run_sgemm_tn(const compute_backend *be, void *const *dev, double *s) { run_sgemm(be, dev, 1, 0); }
static void run_sgemm_tt(const compute_backend *be, void *const *dev, double *s) { run_sgemm(be, dev, 1, 1); }
/* Products large enough for OpenBLAS to thread them, summing 400 and 1000
 * terms: its threaded sgemm cut such sums into other blocks than its
 * one-thread sgemm, so the bits changed with the thread count. Rows of WC
 * columns split unevenly among 3 threads. */
enum { WN = 400, WIC = 400, WOC = 200, WM = 300, WCOLS = 250, WK = 1000, WC = 203 };
static void run_wide_matmul_forward(const compute_backend *be, void *const *dev, double *s) {
    be->matmul_forward(be, F(0), F(1), F(2), F(3), WN, WIC, WOC);
}
static void run_wide_matmul_backward(const compute_backend *be, void *const *dev, double *s) {
    be->matmul_backward(be, F(0), F(1), F(2), F(3), F(4), F(5), WN, WIC, WOC);
}
static void run_wide_sgemm(const compute_backend *be, void *const *dev, int ta, int tb) {
    be->sgemm(be, ta, tb, WM, WCOLS, WK, 0.7f, F(0), ta ? WM + 3 : WK + 3, F(1), tb ? WK + 5 : WCOLS + 5, 0.3f, F(2),
              WCOLS + 2);
}
static void run_wide_sgemm_nn(const compute_backend *be, void *const *dev, double *s) { run_wide_sgemm(be, dev, 0, 0); }
static void run_wide_sgemm_nt(const compute_backend *be, void *const *dev, double *s) { run_wide_sgemm(be, dev, 0, 1); }
static void run_wide_sgemm_tn(const compute_backend *be, void *const *dev, double *s) { run_wide_sgemm(be, dev, 1, 0); }
static void run_wide_sgemm_tt(const compute_backend *be, void *const *dev, double *s) { run_wide_sgemm(be, dev, 1, 1); }
static void run_wide_layernorm_backward(const compute_backend *be, void *const *dev, double *s) {
    be->layernorm_backward(be, F(0), F(1), F(2), F(3), F(4), F(5), F(6), F(7), N, WC);
}
static void run_wide_embed_backward(const compute_backend *be, void *const *dev, double *s) {
    be->embed_backward(be, F(0), F(1), ID(2), F(3), B, T, WC, VP);
}
/* The Llama family's kernels. Attention with NH = 4 query heads of HS = 8
 * over NKV_G = 2 kv heads (groups of 2) and over one (multi-query), in rows
 * of QKV_G and QKV_M floats; rope on the q and the k part of the grouped
 * rows, from position 5; SwiGLU with F not a multiple of a vector. */
enum { HS = C / NH, NKV_G = 2, QKV_G = C + 2 * NKV_G * HS, QKV_M = C + 2 * HS, FF = 3 * C + 5 };
static void run_rmsnorm_forward(const compute_backend *be, void *const *dev, double *s) {
    be->rmsnorm_forward(be, F(0), F(1), F(2), F(3), N, C, 1e-5f);
}
static void run_rmsnorm_backward(const compute_backend *be, void *const *dev, double *s) {
    be->rmsnorm_backward(be, F(0), F(1), F(2), F(3), F(4), F(5), N, C);
}
static void run_wide_rmsnorm_backward(const compute_backend *be, void *const *dev, double *s) {
    be->rmsnorm_backward(be, F(0), F(1), F(2), F(3), F(4), F(5), N, WC);
}
static void run_linear_forward(const compute_backend *be, void *const *dev, double *s) {
    be->linear_forward(be, F(0), F(1), F(2), N, IC, OC);
}
static void run_linear_backward(const compute_backend *be, void *const *dev, double *s) {
    be->linear_backward(be, F(0), F(1), F(2), F(3), F(4), N, IC, OC);
}
static void run_linear_backward_weights_only(const compute_backend *be, void *const *dev, double *s) {
    be->linear_backward(be, NULL, F(1), F(2), F(3), F(4), N, IC, OC);
}
static void run_wide_linear_forward(const compute_backend *be, void *const *dev, double *s) {
    be->linear_forward(be, F(0), F(1), F(2), WN, WIC, WOC);
}
static void run_wide_linear_backward(const compute_backend *be, void *const *dev, double *s) {
    be->linear_backward(be, F(0), F(1), F(2), F(3), F(4), WN, WIC, WOC);
}
static void run_rope_forward(const compute_backend *be, void *const *dev, double *s) {
    be->rope_forward(be, F(0), N, T, NH, HS, QKV_G, 5, (rope_params){.theta = 10000.0f});
    be->rope_forward(be, F(0) + C, N, T, NKV_G, HS, QKV_G, 5, (rope_params){.theta = 10000.0f});
}
static void run_rope_backward(const compute_backend *be, void *const *dev, double *s) {
    be->rope_backward(be, F(0), N, T, NH, HS, QKV_G, 5, (rope_params){500000.0f, 32.0f, 1.0f, 4.0f, 8192.0f});
    be->rope_backward(be, F(0) + C, N, T, NKV_G, HS, QKV_G, 5, (rope_params){500000.0f, 32.0f, 1.0f, 4.0f, 8192.0f});
}
static void run_gqa_forward(const compute_backend *be, void *const *dev, double *s) {
    be->attention_forward(be, F(0), F(1), F(2), B, T, C, NH, NKV_G);
}
static void run_gqa_backward(const compute_backend *be, void *const *dev, double *s) {
    be->attention_backward(be, F(0), F(1), F(2), F(3), F(4), B, T, C, NH, NKV_G);
}
static void run_mqa_forward(const compute_backend *be, void *const *dev, double *s) {
    be->attention_forward(be, F(0), F(1), F(2), B, T, C, NH, 1);
}
static void run_mqa_backward(const compute_backend *be, void *const *dev, double *s) {
    be->attention_backward(be, F(0), F(1), F(2), F(3), F(4), B, T, C, NH, 1);
}
static void run_swiglu_forward(const compute_backend *be, void *const *dev, double *s) {
    be->swiglu_forward(be, F(0), F(1), N, FF);
}
static void run_swiglu_backward(const compute_backend *be, void *const *dev, double *s) {
    be->swiglu_backward(be, F(0), F(1), F(2), N, FF);
}
static void run_embed_forward_no_positions(const compute_backend *be, void *const *dev, double *s) {
    be->embed_forward(be, F(0), ID(1), F(2), NULL, B, T, C, VP);
}
static void run_embed_backward_no_positions(const compute_backend *be, void *const *dev, double *s) {
    be->embed_backward(be, F(0), NULL, ID(1), F(2), B, T, C, VP);
}
static void run_sum(const compute_backend *be, void *const *dev, double *s) { *s = be->sum(be, F(0), LONG_N); }
static void run_sum_sq(const compute_backend *be, void *const *dev, double *s) { *s = be->sum_sq(be, F(0), LONG_N); }
static void run_bf16_to_f32(const compute_backend *be, void *const *dev, double *s) {
    be->bf16_to_f32(be, F(0), dev[1], NC + 3);
}
static void run_f32_to_bf16(const compute_backend *be, void *const *dev, double *s) {
    be->f32_to_bf16(be, dev[0], F(1), NC + 3);
}
static void run_copy(const compute_backend *be, void *const *dev, double *s) {
    be->copy(be, dev[0], dev[1], (NC + 3) * sizeof(float));
}
static void run_memset(const compute_backend *be, void *const *dev, double *s) {
    be->memset(be, dev[0], 0x5a, (NC + 3) * sizeof(float));
}

/* One row: generation's matrix-vector products (the CPU backend's own
 * loops, not sgemm), outputs past one block of 1024 columns and split
 * unevenly among 3 threads. */
enum { RK = 1003, RN = 1100 };   /* 1.1M weights: past GEMV_PARALLEL_MIN, threaded */
static void run_row_matmul_forward(const compute_backend *be, void *const *dev, double *s) {
    be->matmul_forward(be, F(0), F(1), F(2), F(3), 1, RK, RN);
}
static void run_row_matmul_forward_no_bias(const compute_backend *be, void *const *dev, double *s) {
    be->matmul_forward(be, F(0), F(1), F(2), NULL, 1, RK, RN);
}
static void run_row_sgemm(const compute_backend *be, void *const *dev, int tb) {
    be->sgemm(be, 0, tb, 1, RN, RK, 0.7f, F(0), RK + 3, F(1), tb ? RK + 5 : RN + 5, 0.3f, F(2), RN + 2);
}
static void run_row_sgemm_nn(const compute_backend *be, void *const *dev, double *s) { run_row_sgemm(be, dev, 0); }
static void run_row_sgemm_nt(const compute_backend *be, void *const *dev, double *s) { run_row_sgemm(be, dev, 1); }
/* A cache of 2 key/value heads for 4 query heads of 8 floats, 80
 * positions; 70 new rows (two blocks of 64) at position 5, or one at 40. */
enum { KV_NH = 4, KV_NKV = 2, KV_HS = 8, KV_MAX = 80, KV_N = 70, KV_POS = 5, KV_LD = 2 * KV_NKV * KV_HS + 3 };
#define KV_CACHE ((size_t)KV_NKV * KV_MAX * KV_HS)
static void run_kv_cache_write(const compute_backend *be, void *const *dev, double *s) {
    be->kv_cache_write(be, F(0), F(1), F(2), F(2) + KV_NKV * KV_HS, KV_LD, KV_N, KV_POS, KV_MAX, KV_NKV, KV_HS);
}
static void run_attention_cached(const compute_backend *be, void *const *dev, double *s) {
    be->attention_cached_forward(be, F(0), F(1), F(2), KV_NH * KV_HS + 1, F(3), F(4), KV_N, KV_POS, KV_MAX, KV_NH,
                                 KV_NKV, KV_HS);
}
static void run_attention_cached_row(const compute_backend *be, void *const *dev, double *s) {
    be->attention_cached_forward(be, F(0), F(1), F(2), KV_NH * KV_HS, F(3), F(4), 1, 40, KV_MAX, KV_NH, KV_NKV, KV_HS);
}

/* Floats of a [rows, cols] matrix with rows ld apart. */
#define MAT(rows, cols, ld) ((size_t)((rows) - 1) * (ld) + (cols))
#define SGEMM_BUFS_OF(ta, tb, M, N, K)                                     \
    {{(ta) ? MAT(K, M, M + 3) : MAT(M, K, K + 3), F32},                    \
     {(tb) ? MAT(N, K, K + 5) : MAT(K, N, N + 5), F32},                    \
     {MAT(M, N, N + 2), F32}}
#define SGEMM_BUFS(ta, tb) SGEMM_BUFS_OF(ta, tb, GM, GN, GK)
#define WIDE_SGEMM_BUFS(ta, tb) SGEMM_BUFS_OF(ta, tb, WM, WCOLS, WK)
#define WNC ((size_t)N * WC)

static const op_case op_cases[] = {
    {"layernorm_forward", {{NC, F32}, {N, F32}, {N, F32}, {NC, F32}, {C, F32}, {C, F32}}, run_layernorm_forward},
    {"layernorm_backward", {{NC, F32}, {C, F32}, {C, F32}, {NC, F32}, {NC, F32}, {C, F32}, {N, F32}, {N, F32}},
     run_layernorm_backward},
    {"matmul_forward", {{N * OC, F32}, {N * IC, F32}, {IC * OC, F32}, {OC, F32}}, run_matmul_forward},
    {"matmul_forward (no bias)", {{N * OC, F32}, {N * IC, F32}, {IC * OC, F32}}, run_matmul_forward_no_bias},
    {"matmul_backward", {{N * IC, F32}, {IC * OC, F32}, {OC, F32}, {N * OC, F32}, {N * IC, F32}, {IC * OC, F32}},
     run_matmul_backward},
    {"matmul_backward (weights only)",
     {{N * IC, F32}, {IC * OC, F32}, {OC, F32}, {N * OC, F32}, {N * IC, F32}, {IC * OC, F32}},
     run_matmul_backward_weights_only},
    {"attention_forward", {{NC, F32}, {(size_t)B * NH * T * T, F32}, {3 * NC, F32}}, run_attention_forward},
    {"attention_backward",
     {{3 * NC, F32}, {(size_t)B * NH * T * T, F32}, {NC, F32}, {3 * NC, F32}, {(size_t)B * NH * T * T, F32}},
     run_attention_backward},
    {"gelu_forward", {{NC + 3, F32}, {NC + 3, F32}}, run_gelu_forward},
    {"gelu_backward", {{NC + 3, F32}, {NC + 3, F32}}, run_gelu_backward},
    {"residual_forward", {{NC + 3, F32}, {NC + 3, F32}, {NC + 3, F32}}, run_residual_forward},
    {"crossentropy_softmax (loss)", {{(size_t)N * VP, F32}, {N, F32}, {N, IDS}}, run_crossentropy_loss},
    {"crossentropy_softmax (gradient)", {{(size_t)N * VP, F32}, {N, F32}, {N, IDS}}, run_crossentropy_grad},
    {"embed_forward", {{NC, F32}, {N, IDS}, {(size_t)VP * C, F32}, {(size_t)T * C, F32}}, run_embed_forward},
    {"embed_backward", {{(size_t)VP * C, F32}, {(size_t)T * C, F32}, {N, IDS}, {NC, F32}}, run_embed_backward},
    {"sgemm", SGEMM_BUFS(0, 0), run_sgemm_nn},
    {"sgemm (B transposed)", SGEMM_BUFS(0, 1), run_sgemm_nt},
    {"sgemm (A transposed)", SGEMM_BUFS(1, 0), run_sgemm_tn},
    {"sgemm (both transposed)", SGEMM_BUFS(1, 1), run_sgemm_tt},
    {"sum", {{LONG_N, F32}}, run_sum},
    {"sum_sq", {{LONG_N, F32}}, run_sum_sq},
    {"bf16_to_f32", {{NC + 3, F32}, {NC + 3, BF16}}, run_bf16_to_f32},
    {"f32_to_bf16", {{NC + 3, BF16}, {NC + 3, F32}}, run_f32_to_bf16},
    {"copy", {{NC + 3, F32}, {NC + 3, F32}}, run_copy},
    {"memset", {{NC + 3, F32}}, run_memset},
    {"matmul_forward (wide)", {{WN * WOC, F32}, {WN * WIC, F32}, {WIC * WOC, F32}, {WOC, F32}}, run_wide_matmul_forward},
    {"matmul_backward (wide)",
     {{WN * WIC, F32}, {WIC * WOC, F32}, {WOC, F32}, {WN * WOC, F32}, {WN * WIC, F32}, {WIC * WOC, F32}},
     run_wide_matmul_backward},
    {"sgemm (wide)", WIDE_SGEMM_BUFS(0, 0), run_wide_sgemm_nn},
    {"sgemm (wide, B transposed)", WIDE_SGEMM_BUFS(0, 1), run_wide_sgemm_nt},
    {"sgemm (wide, A transposed)", WIDE_SGEMM_BUFS(1, 0), run_wide_sgemm_tn},
    {"sgemm (wide, both transposed)", WIDE_SGEMM_BUFS(1, 1), run_wide_sgemm_tt},
    {"layernorm_backward (wide)",
     {{WNC, F32}, {WC, F32}, {WC, F32}, {WNC, F32}, {WNC, F32}, {WC, F32}, {N, F32}, {N, F32}},
     run_wide_layernorm_backward},
    {"embed_backward (wide)", {{(size_t)VP * WC, F32}, {(size_t)T * WC, F32}, {N, IDS}, {WNC, F32}},
     run_wide_embed_backward},
    {"rmsnorm_forward", {{NC, F32}, {N, F32}, {NC, F32}, {C, F32}}, run_rmsnorm_forward},
    {"rmsnorm_backward", {{NC, F32}, {C, F32}, {NC, F32}, {NC, F32}, {C, F32}, {N, F32}}, run_rmsnorm_backward},
    {"rmsnorm_backward (wide)", {{WNC, F32}, {WC, F32}, {WNC, F32}, {WNC, F32}, {WC, F32}, {N, F32}},
     run_wide_rmsnorm_backward},
    {"linear_forward", {{N * OC, F32}, {N * IC, F32}, {OC * IC, F32}}, run_linear_forward},
    {"linear_backward", {{N * IC, F32}, {OC * IC, F32}, {N * OC, F32}, {N * IC, F32}, {OC * IC, F32}},
     run_linear_backward},
    {"linear_backward (weights only)", {{N * IC, F32}, {OC * IC, F32}, {N * OC, F32}, {N * IC, F32}, {OC * IC, F32}},
     run_linear_backward_weights_only},
    {"linear_forward (wide)", {{WN * WOC, F32}, {WN * WIC, F32}, {WOC * WIC, F32}}, run_wide_linear_forward},
    {"linear_backward (wide)",
     {{WN * WIC, F32}, {WOC * WIC, F32}, {WN * WOC, F32}, {WN * WIC, F32}, {WOC * WIC, F32}},
     run_wide_linear_backward},
    {"rope_forward (q and k)", {{(size_t)N * QKV_G, F32}}, run_rope_forward},
    {"rope_backward (q and k)", {{(size_t)N * QKV_G, F32}}, run_rope_backward},
    {"attention_forward (GQA)", {{NC, F32}, {(size_t)B * NH * T * T, F32}, {(size_t)N * QKV_G, F32}}, run_gqa_forward},
    {"attention_backward (GQA)",
     {{(size_t)N * QKV_G, F32}, {(size_t)B * NH * T * T, F32}, {NC, F32}, {(size_t)N * QKV_G, F32},
      {(size_t)B * NH * T * T, F32}},
     run_gqa_backward},
    {"attention_forward (MQA)", {{NC, F32}, {(size_t)B * NH * T * T, F32}, {(size_t)N * QKV_M, F32}}, run_mqa_forward},
    {"attention_backward (MQA)",
     {{(size_t)N * QKV_M, F32}, {(size_t)B * NH * T * T, F32}, {NC, F32}, {(size_t)N * QKV_M, F32},
      {(size_t)B * NH * T * T, F32}},
     run_mqa_backward},
    {"swiglu_forward", {{(size_t)N * FF, F32}, {(size_t)N * 2 * FF, F32}}, run_swiglu_forward},
    {"swiglu_backward", {{(size_t)N * 2 * FF, F32}, {(size_t)N * FF, F32}, {(size_t)N * 2 * FF, F32}},
     run_swiglu_backward},
    {"embed_forward (no positions)", {{NC, F32}, {N, IDS}, {(size_t)VP * C, F32}}, run_embed_forward_no_positions},
    {"embed_backward (no positions)", {{(size_t)VP * C, F32}, {N, IDS}, {NC, F32}}, run_embed_backward_no_positions},
    {"matmul_forward (one row)", {{RN, F32}, {RK, F32}, {(size_t)RK * RN, F32}, {RN, F32}}, run_row_matmul_forward},
    {"matmul_forward (one row, no bias)", {{RN, F32}, {RK, F32}, {(size_t)RK * RN, F32}}, run_row_matmul_forward_no_bias},
    {"sgemm (one row)", SGEMM_BUFS_OF(0, 0, 1, RN, RK), run_row_sgemm_nn},
    {"sgemm (one row, B transposed)", SGEMM_BUFS_OF(0, 1, 1, RN, RK), run_row_sgemm_nt},
    {"kv_cache_write", {{KV_CACHE, F32}, {KV_CACHE, F32}, {(size_t)KV_N * KV_LD, F32}}, run_kv_cache_write},
    {"attention_cached_forward",
     {{(size_t)KV_N * KV_NH * KV_HS, F32}, {(size_t)KV_NH * KV_N * (KV_POS + KV_N), F32},
      {MAT(KV_N, KV_NH * KV_HS, KV_NH * KV_HS + 1), F32}, {KV_CACHE, F32}, {KV_CACHE, F32}},
     run_attention_cached},
    {"attention_cached_forward (one row)",
     {{KV_NH * KV_HS, F32}, {KV_NH * 41, F32}, {KV_NH * KV_HS, F32}, {KV_CACHE, F32}, {KV_CACHE, F32}},
     run_attention_cached_row},
};

static void test_every_op_is_bit_identical_to_cpu(void **state) {
    (void)state;
    const compute_backend *cpu = compute_backend_cpu(), *check = compute_backend_check();
    for (size_t k = 0; k < sizeof op_cases / sizeof op_cases[0]; k++) {
        const op_case *c = &op_cases[k];
        const int n = buf_count(c);
        void *init[MAX_BUFS], *want[MAX_BUFS], *got[MAX_BUFS];
        for (int i = 0; i < n; i++) init[i] = make_init(&c->bufs[i], 100 * k + (uint64_t)i + 1);
        double want_s, got_s;
        run_case(cpu, c, init, want, &want_s);
        run_case(check, c, init, got, &got_s);
        int changed = want_s != 0.0;   /* the op did something, so a backend that does nothing fails */
        for (int i = 0; i < n; i++) {
            const size_t bytes = c->bufs[i].n * elem_bytes(c->bufs[i].kind);
            if (memcmp(want[i], got[i], bytes) != 0) fail_msg("%s: array %d differs from the CPU backend's", c->name, i);
            changed |= memcmp(want[i], init[i], bytes) != 0;
            free(init[i]);
            free(want[i]);
            free(got[i]);
        }
        if (memcmp(&want_s, &got_s, sizeof want_s) != 0) fail_msg("%s: %.17g, the CPU backend %.17g", c->name, got_s, want_s);
        if (!changed) fail_msg("%s: the op changed nothing", c->name);
        printf("  %-34s identical\n", c->name);
    }
}

/* The thread count changes no bit: each op of the CPU backend with 1, 2 and
 * 3 threads (a resumed run may use another --threads than it started with). */
static void test_every_op_is_the_same_with_1_2_and_3_threads(void **state) {
    (void)state;
    const compute_backend *cpu = compute_backend_cpu();
    const int threads = omp_get_max_threads();
    for (size_t k = 0; k < sizeof op_cases / sizeof op_cases[0]; k++) {
        const op_case *c = &op_cases[k];
        const int n = buf_count(c);
        void *init[MAX_BUFS], *got[4][MAX_BUFS];
        double s[4];
        for (int i = 0; i < n; i++) init[i] = make_init(&c->bufs[i], 100 * k + (uint64_t)i + 1);
        for (int t = 1; t <= 3; t++) {
            omp_set_num_threads(t);
            run_case(cpu, c, init, got[t], &s[t]);
        }
        omp_set_num_threads(threads);
        for (int t = 2; t <= 3; t++) {
            for (int i = 0; i < n; i++)
                if (memcmp(got[1][i], got[t][i], c->bufs[i].n * elem_bytes(c->bufs[i].kind)) != 0)
                    fail_msg("%s: array %d with %d threads differs from 1 thread's", c->name, i, t);
            if (memcmp(&s[1], &s[t], sizeof s[1]) != 0) fail_msg("%s: %.17g with %d threads, %.17g with 1", c->name, s[t], t, s[1]);
        }
        for (int i = 0; i < n; i++) {
            free(init[i]);
            for (int t = 1; t <= 3; t++) free(got[t][i]);
        }
        printf("  %-34s the same with 1, 2 and 3 threads\n", c->name);
    }
}

/* sum_sq is the gradient norm's: against the squares summed one by one in
 * long double, over lengths that end inside a chunk's run of eight and
 * across several chunks, with magnitudes spread over many decades. */
static void test_sum_sq_matches_a_plain_sum(void **state) {
    (void)state;
    const compute_backend *cpu = compute_backend_cpu();
    const size_t lens[] = {0, 1, 7, 8, 9, 65535, 65536, 65537, 200003};
    float *x = malloc(200003 * sizeof(float));
    assert_non_null(x);
    uint64_t r = 12345;
    for (size_t i = 0; i < 200003; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        const double u = (double)(r >> 11) / 9007199254740992.0;   /* [0, 1) */
        x[i] = (float)((u - 0.5) * pow(10.0, (double)(i % 13) - 6.0));
    }
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        long double want = 0;
        for (size_t i = 0; i < lens[k]; i++) want += (long double)x[i] * x[i];
        const double got = cpu->sum_sq(cpu, x, lens[k]);
        if (fabsl((long double)got - want) > 1e-13L * want)
            fail_msg("sum_sq of %zu elements: %.17g, the plain sum %.17Lg", lens[k], got, want);
    }
    free(x);
}

/* --- memory the host must not touch, and ops given host memory ---------------------- */

typedef struct device_pair {
    const compute_backend *be;
    float *a, *b;      /* device, 1000 floats each */
    float host[1000];
} device_pair;

static void device_pair_make(device_pair *d) {
    d->be = compute_backend_check();
    assert_non_null(d->a = d->be->alloc(d->be, sizeof d->host));
    assert_non_null(d->b = d->be->alloc(d->be, sizeof d->host));
    for (int i = 0; i < 1000; i++) d->host[i] = (float)i;
}

static void device_pair_free(device_pair *d) {
    d->be->free(d->be, d->a);
    d->be->free(d->be, d->b);
}

static void write_device(void *arg) { ((volatile float *)((device_pair *)arg)->a)[10] = 1.0f; }
static void read_device(void *arg) {
    volatile float x = ((volatile float *)((device_pair *)arg)->a)[999];
    (void)x;
}
/* an op opens a's memory only while it runs */
static void read_device_after_op(void *arg) {
    device_pair *d = arg;
    d->be->memset(d->be, d->a, 0, sizeof d->host);
    read_device(arg);
}

static void test_host_access_to_device_memory_faults(void **state) {
    (void)state;
    device_pair d;
    device_pair_make(&d);
    char msg[512];
    assert_int_equal(signal_of_child(write_device, &d, msg, sizeof msg), SIGSEGV);
    assert_int_equal(signal_of_child(read_device, &d, msg, sizeof msg), SIGSEGV);
    assert_int_equal(signal_of_child(read_device_after_op, &d, msg, sizeof msg), SIGSEGV);
    /* through the backend the same memory works */
    d.be->to_device(d.be, d.a, d.host, sizeof d.host);
    float back[1000];
    d.be->to_host(d.be, back, d.a, sizeof back);
    assert_memory_equal(back, d.host, sizeof back);
    device_pair_free(&d);
}

static void layernorm_on_host_input(void *arg) {
    device_pair *d = arg;   /* a: out [10, 100]; b: mean, rstd, w, b; the input is host memory */
    d->be->layernorm_forward(d->be, d->a, d->b, d->b + 10, d->host, d->b + 20, d->b + 120, 10, 100);
}
static void to_device_from_device(void *arg) {
    device_pair *d = arg;
    d->be->to_device(d->be, d->a, d->b, sizeof d->host);
}
static void to_host_into_device(void *arg) {
    device_pair *d = arg;
    d->be->to_host(d->be, d->b, d->a, sizeof d->host);
}
static void gelu_past_the_allocation(void *arg) {
    device_pair *d = arg;
    d->be->gelu_forward(d->be, d->a, d->b, 1001);
}
static void free_host_memory(void *arg) {
    device_pair *d = arg;
    d->be->free(d->be, d->host);
}

static void expect_abort(device_pair *d, void (*fn)(void *), const char *message) {
    char msg[512];
    int sig = signal_of_child(fn, d, msg, sizeof msg);
    if (sig != SIGABRT || !strstr(msg, message))
        fail_msg("expected an abort saying \"%s\"; got signal %d saying \"%s\"", message, sig, msg);
}

static void test_misused_pointers_abort(void **state) {
    (void)state;
    device_pair d;
    device_pair_make(&d);
    expect_abort(&d, layernorm_on_host_input, "check backend: layernorm_forward: argument 'inp' is not device memory");
    expect_abort(&d, to_device_from_device, "check backend: to_device: argument 'src_host' is device memory");
    expect_abort(&d, to_host_into_device, "check backend: to_host: argument 'dst_host' is device memory");
    expect_abort(&d, gelu_past_the_allocation, "check backend: gelu_forward: argument 'out' (4004 bytes at offset 0) "
                                               "runs past its device allocation of 4000 bytes");
    expect_abort(&d, free_host_memory, "check backend: free: argument 'dev' is not the start of a device allocation");
    device_pair_free(&d);
}

static void test_empty_allocations_and_null(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++) {
        const compute_backend *be = k ? compute_backend_check() : compute_backend_cpu();
        void *p = be->alloc(be, 0);
        assert_non_null(p);
        be->memset(be, p, 0, 0);   /* a zero extent inside a zero-byte allocation */
        be->free(be, p);
        be->free(be, NULL);
    }
}

/* --- two threads ----------------------------------------------------------------------- */

/* Both threads read one shared device array while writing their own: the
 * shared region must stay open while either thread's op runs on it. */
enum { SHARED_N = 4096, ROUNDS = 2000 };
typedef struct worker {
    const compute_backend *be;
    const float *shared;
    float *own;
    float host[SHARED_N];
    double sum;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    for (int r = 0; r < ROUNDS; r++) {
        w->be->to_host(w->be, w->host, w->shared, sizeof w->host);
        w->be->residual_forward(w->be, w->own, w->shared, w->shared, SHARED_N);
        w->sum = w->be->sum(w->be, w->own, SHARED_N);
    }
    return NULL;
}

static void test_two_threads_share_device_memory(void **state) {
    (void)state;
    const compute_backend *be = compute_backend_check();
    float init[SHARED_N];
    double want = 0.0;
    for (int i = 0; i < SHARED_N; i++) want += (double)(init[i] = (float)(i % 97) * 0.5f) * 2.0f;
    float *shared = be->alloc(be, sizeof init);
    assert_non_null(shared);
    be->to_device(be, shared, init, sizeof init);
    static worker w[2];
    pthread_t th[2];
    for (int k = 0; k < 2; k++) {
        w[k] = (worker){.be = be, .shared = shared, .own = be->alloc(be, sizeof init)};
        assert_non_null(w[k].own);
        assert_int_equal(pthread_create(&th[k], NULL, work, &w[k]), 0);
    }
    for (int k = 0; k < 2; k++) {
        assert_int_equal(pthread_join(th[k], NULL), 0);
        assert_memory_equal(w[k].host, init, sizeof init);
        assert_true(w[k].sum == want);
        be->free(be, w[k].own);
    }
    be->free(be, shared);
}

/* --- choosing a backend ----------------------------------------------------------------- */

static void test_backends_by_name(void **state) {
    (void)state;
    assert_ptr_equal(compute_backend_named("cpu"), compute_backend_cpu());
    assert_ptr_equal(compute_backend_named("check"), compute_backend_check());
    assert_null(compute_backend_named("cuda"));
    assert_null(compute_backend_named(""));
    assert_null(compute_backend_named("CPU"));
    assert_null(compute_backend_named(NULL));
    assert_string_equal(compute_backend_cpu()->name, "cpu");
    assert_string_equal(compute_backend_check()->name, "check");
    assert_int_equal(compute_backend_cpu()->unified, 1);
    assert_int_equal(compute_backend_check()->unified, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op_is_bit_identical_to_cpu),
        cmocka_unit_test(test_every_op_is_the_same_with_1_2_and_3_threads),
        cmocka_unit_test(test_sum_sq_matches_a_plain_sum),
        cmocka_unit_test(test_host_access_to_device_memory_faults),
        cmocka_unit_test(test_misused_pointers_abort),
        cmocka_unit_test(test_empty_allocations_and_null),
        cmocka_unit_test(test_two_threads_share_device_memory),
        cmocka_unit_test(test_backends_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
