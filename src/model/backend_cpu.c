/* backend_cpu.c - the CPU backend (strata/backend.h): device memory is
 * 64-byte aligned host memory; matrix products go to OpenBLAS sgemm (the
 * OpenMP build) in tiles fixed by their shapes and the machine, the rest are
 * OpenMP loops, vectorized with AVX2/FMA when the compiler targets it and
 * plain C otherwise. Every reduction runs in an order the thread count does
 * not change (no atomics; column sums split by columns, not rows; no sgemm
 * split by OpenBLAS's threads, see gemm), so results are identical run to
 * run and for any number of threads. The contracts of the ops are in
 * strata/backend.h; each op is the function named in the table at the end,
 * and the checking backend (backend_check.c) runs these same functions. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strata/backend.h"
#include "strata/model.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define KERNELS_AVX2 1
#endif

/* Loops over fewer elements than this run on the calling thread: a fork and
 * join costs more than such work, and every join waits for the slowest
 * thread, which on a machine shared with other jobs may be one that has just
 * been descheduled. Generation's one-row steps have about a dozen such ops
 * per layer; left threaded they are a dozen more joins per layer. The
 * elements are computed the same either way. */
#define PARALLEL_MIN 32768

/* --- vector math ------------------------------------------------------------ */

#ifdef KERNELS_AVX2
/* exp(x) for 8 floats: range reduction x = n ln2 + r, a degree-5 polynomial
 * for e^r (Cephes), and 2^n built in the exponent bits. About 1 ulp. */
static inline __m256 exp8(__m256 x) {
    /* max/min return their second operand when one is NaN: with x second,
     * a NaN input stays NaN (and so does a loss computed from it). */
    x = _mm256_min_ps(_mm256_set1_ps(88.3f), _mm256_max_ps(_mm256_set1_ps(-87.3f), x));
    __m256 fx = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f));
    fx = _mm256_floor_ps(fx);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500E-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
    __m256 x2 = _mm256_mul_ps(x, x);
    y = _mm256_fmadd_ps(y, x2, _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    __m256i n = _mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127));
    return _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(n, 23)));
}

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}
static inline float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}
#endif

/* --- LayerNorm ---------------------------------------------------------------- */

static void layernorm_forward(const compute_backend *be, float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, int N, int C) {
#pragma omp parallel for schedule(static) if ((size_t)N * C >= PARALLEL_MIN)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        float m = 0.0f;
        for (int i = 0; i < C; i++) m += x[i];
        m /= (float)C;
        float v = 0.0f;
        for (int i = 0; i < C; i++) {
            float d = x[i] - m;
            v += d * d;
        }
        float s = 1.0f / sqrtf(v / (float)C + 1e-5f);
        for (int i = 0; i < C; i++) o[i] = (x[i] - m) * s * w[i] + b[i];
        mean[n] = m;
        rstd[n] = s;
    }
}

static void layernorm_backward(const compute_backend *be, float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *w, const float *mean, const float *rstd, int N, int C) {
    /* Rows are independent for dinp; dw and db are column sums, done in a
     * second loop over column ranges so that each sum has one owner and a
     * fixed order. */
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *g = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        const float m = mean[n], s = rstd[n];
        float sum_dn = 0.0f, sum_dn_norm = 0.0f;
        for (int i = 0; i < C; i++) {
            float dn = g[i] * w[i];
            sum_dn += dn;
            sum_dn_norm += dn * (x[i] - m) * s;
        }
        sum_dn /= (float)C;
        sum_dn_norm /= (float)C;
        for (int i = 0; i < C; i++) {
            float norm = (x[i] - m) * s;
            dx[i] += (g[i] * w[i] - sum_dn - norm * sum_dn_norm) * s;
        }
    }
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
        int lo = (int)((long)C * t / nt), hi = (int)((long)C * (t + 1) / nt);
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *g = dout + (size_t)n * C;
            const float m = mean[n], s = rstd[n];
            for (int i = lo; i < hi; i++) {
                dw[i] += g[i] * (x[i] - m) * s;
                db[i] += g[i];
            }
        }
    }
}

/* --- matrix products ------------------------------------------------------------ */

/* Every matrix product outside attention goes through gemm: C[M,N] =
 * alpha op(A) op(B) + beta C cut into a grid of tiles that the thread count
 * does not change, each tile one single-threaded sgemm, the tiles shared by
 * the threads. OpenBLAS's own threading changes its arithmetic with the
 * thread count: its threaded driver (level3_thread.c) cuts the K sum into
 * other blocks than its one-thread driver (level3.c) when GEMM_Q < K <
 * 2 GEMM_Q (K = B*T in the weight gradients), and its Haswell and Zen
 * kernels round an element differently with the panel a thread gets, so C
 * differed in the last bits between --threads 1, 2 and 3, and a run resumed
 * with another thread count ended elsewhere. In a parallel region OpenBLAS
 * runs on the calling thread (the OpenMP build), so each tile is one call
 * with the same arguments whatever the thread count, and so are its bits.
 * (Attention's products already run so: one (batch, head) per iteration of
 * its own parallel loop.)
 *
 * The grid: the tiles' longer side halved (squarer tiles repack less) until
 * there are as many tiles as the machine has processors, or the sides reach
 * TILE_MIN. Each tile packs its own panels of A and B (OpenBLAS's threads
 * share theirs) and the last tiles leave threads idle, so a grid finer than
 * the cores need costs time, and a coarser one leaves cores out: a fixed
 * grid of 4 to 8 tiles of at most 512 made gpt2-124m's products 3-14%
 * slower on 2 threads, one tile per processor is about as fast as
 * OpenBLAS's own threads (docs/BENCHMARKS.md, bench/sgemm_tiles.c). The
 * processor count is the machine's configured one, read once, not the CPUs
 * a process may use: a run's bits depend on the machine (its BLAS kernels
 * already do), never on --threads. */
#define TILE_MIN 128

static int tile_target;
static pthread_once_t tile_target_once = PTHREAD_ONCE_INIT;
static void tile_target_init(void) {
    const long n = sysconf(_SC_NPROCESSORS_CONF);
    tile_target = n > 1 ? (int)n : 1;
}

/* OpenBLAS's kernel sets (a DYNAMIC_ARCH build picks one as it loads, by
 * the CPU's family and model) that have no AVX2 kernels: a CPU with AVX2
 * and FMA runs one of these only when OpenBLAS did not know its model and
 * fell back (to Prescott, SSE3). Debian 12's OpenBLAS 0.3.21 does so on a
 * 5th-generation Xeon (family 6, model 0xCF): its sgemm ran 35 GFLOP/s at
 * gpt2-350m's block shapes there, 135 with SkylakeX's kernels
 * (docs/BENCHMARKS.md, "OpenBLAS's kernels on a CPU it does not know"). */
static const char *const BLAS_WITHOUT_AVX2[] = {
    "Prescott", "Core2",  "Penryn",     "Dunnington", "Nehalem", "Atom",         "Sandybridge", "Katmai",
    "Coppermine", "Northwood", "Banias", "Opteron", "Opteron_SSE3", "Barcelona", "Bobcat"};

const char *cpu_blas_kernels(void) { return openblas_get_corename(); }

const char *cpu_blas_kernels_better(void) {
#if defined(__x86_64__) || defined(__i386__)
    const char *now = openblas_get_corename();
    int below = 0;
    for (size_t i = 0; now && i < sizeof BLAS_WITHOUT_AVX2 / sizeof BLAS_WITHOUT_AVX2[0]; i++)
        below |= !strcmp(now, BLAS_WITHOUT_AVX2[i]);
    if (!below || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return NULL;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512cd"))
        return "SkylakeX";
    return "Haswell";
#else
    return NULL;
#endif
}

static int tile_half(int x) { return (((x + 1) / 2 + 15) / 16) * 16; }   /* a multiple of 16 */

static void tile_grid(int M, int N, int *mb, int *nb) {
    pthread_once(&tile_target_once, tile_target_init);
    int m = M, n = N;
    while ((long)((M + m - 1) / m) * ((N + n - 1) / n) < tile_target) {
        if (m >= n && m > TILE_MIN) m = tile_half(m);
        else if (n > TILE_MIN) n = tile_half(n);
        else if (m > TILE_MIN) m = tile_half(m);
        else break;
    }
    *mb = m;
    *nb = n;
}

/* One row times a matrix, M = 1: what generation's single-token steps are
 * made of. A [1,K] row against B, which is read once from memory: these
 * products are bound by memory bandwidth, not arithmetic. OpenBLAS's sgemm
 * at M = 1 read gpt2-124m's c_fc and LM-head weights at 11 GB/s on 2
 * threads, these loops at 30 and 35 (the machine streams about 30 GB/s;
 * docs/BENCHMARKS.md, generation). They stream B once, the threads
 * splitting the outputs. Each output is summed in an order fixed by K alone
 * (the vector and scalar paths do the same fused multiply-adds in the same
 * order), so the bits do not depend on which thread computes it, nor on the
 * thread count. */

/* acc[j] = sum_k a[k] B[k, j] for j < n, B [K, n] rows ldb apart: k
 * ascending, one fused multiply-add per k, so each column's sum is the same
 * whatever range it falls in. Columns in blocks of GEMV_COLS (accumulators
 * that stay in L1) streaming the rows of B. */
#define GEMV_COLS 1024
/* Below this many weights (4 MiB) a product runs on the calling thread: the
 * demo model's block products (256 x 768 .. 1024 x 256) take microseconds
 * and mostly come from L3, and threading them only added joins: with other
 * jobs on the 2 cores (load 6-7) its 2-thread generation went from 8-30 to
 * 73-107 tokens/s (docs/BENCHMARKS.md, generation). gpt2-124m's products
 * (2.4 MiB c_proj aside) and every LM head stay threaded. */
#define GEMV_PARALLEL_MIN ((size_t)1 << 20)
static void gemv_n(float *acc, const float *a, const float *B, int ldb, int K, int n) {
    for (int j0 = 0; j0 < n; j0 += GEMV_COLS) {
        const int j1 = n - j0 < GEMV_COLS ? n : j0 + GEMV_COLS;
        for (int j = j0; j < j1; j++) acc[j] = 0.0f;
        int k = 0;
#ifdef KERNELS_AVX2
        /* four rows of B per pass over the block: four streams to prefetch, and
         * acc loaded and stored once per four multiply-adds (still one per k,
         * k ascending: the same bits as one row at a time) */
        for (; k + 4 <= K; k += 4) {
            const float *b0 = B + (size_t)k * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
            const __m256 a0 = _mm256_set1_ps(a[k]), a1 = _mm256_set1_ps(a[k + 1]);
            const __m256 a2 = _mm256_set1_ps(a[k + 2]), a3 = _mm256_set1_ps(a[k + 3]);
            int j = j0;
            for (; j + 8 <= j1; j += 8) {
                __m256 t = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b0 + j), _mm256_loadu_ps(acc + j));
                t = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b1 + j), t);
                t = _mm256_fmadd_ps(a2, _mm256_loadu_ps(b2 + j), t);
                _mm256_storeu_ps(acc + j, _mm256_fmadd_ps(a3, _mm256_loadu_ps(b3 + j), t));
            }
            for (; j < j1; j++)
                acc[j] = fmaf(a[k + 3], b3[j], fmaf(a[k + 2], b2[j], fmaf(a[k + 1], b1[j], fmaf(a[k], b0[j], acc[j]))));
        }
#endif
        for (; k < K; k++) {
            const float ak = a[k], *b = B + (size_t)k * ldb;
            for (int j = j0; j < j1; j++) acc[j] = fmaf(ak, b[j], acc[j]);
        }
    }
}

/* a[K] . b[K]: four 8-lane partial sums over blocks of 32 (independent
 * chains, so loads keep flowing), added in a fixed order, then the rest in
 * order. The same arithmetic for every row. */
static float dot(const float *a, const float *b, int K) {
    int k = 0;
    float s = 0.0f;
#ifdef KERNELS_AVX2
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (; k + 32 <= K; k += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(b + k + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 16), _mm256_loadu_ps(b + k + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 24), _mm256_loadu_ps(b + k + 24), s3);
    }
    for (; k + 8 <= K; k += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), s0);
    s = hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
#endif
    for (; k < K; k++) s = fmaf(a[k], b[k], s);
    return s;
}

/* C[1,N] = alpha a[1,K] op(B) + beta C. op(B) = B [K,N]: the threads split
 * the columns (in multiples of 64, for whole cache lines); B^T, B [N,K]:
 * each output is a dot product of a row of B, the threads split the rows. */
static void gemv(int trans_b, int N, int K, float alpha, const float *a, const float *B, int ldb, float beta,
                 float *C) {
#pragma omp parallel if ((size_t)N * K >= GEMV_PARALLEL_MIN)
    {
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int per = ((N + nt - 1) / nt + 63) / 64 * 64;
        const int n0 = t * per < N ? t * per : N, n1 = n0 + per < N ? n0 + per : N;
        if (trans_b) {
            for (int n = n0; n < n1; n++) {
                const float y = alpha * dot(a, B + (size_t)n * ldb, K);
                C[n] = beta == 0.0f ? y : y + beta * C[n];
            }
        } else if (beta == 0.0f && alpha == 1.0f) {
            gemv_n(C + n0, a, B + n0, ldb, K, n1 - n0);
        } else {
            float acc[GEMV_COLS];
            for (int j0 = n0; j0 < n1; j0 += GEMV_COLS) {
                const int w = n1 - j0 < GEMV_COLS ? n1 - j0 : GEMV_COLS;
                gemv_n(acc, a, B + j0, ldb, K, w);
                for (int j = 0; j < w; j++) C[j0 + j] = alpha * acc[j] + (beta == 0.0f ? 0.0f : beta * C[j0 + j]);
            }
        }
    }
}

static void gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc) {
    if (M == 1 && !trans_a) {
        gemv(trans_b, N, K, alpha, A, B, ldb, beta, C);
        return;
    }
    int mb, nb;
    tile_grid(M, N, &mb, &nb);
    const int mt = (M + mb - 1) / mb, nt = (N + nb - 1) / nb;
    /* a parallel region even for one tile: outside one, OpenBLAS would thread it */
#pragma omp parallel for schedule(dynamic, 1)
    for (int t = 0; t < mt * nt; t++) {
        const int i0 = t / nt * mb, j0 = t % nt * nb;
        const int m = M - i0 < mb ? M - i0 : mb, n = N - j0 < nb ? N - j0 : nb;
        const float *a = trans_a ? A + i0 : A + (size_t)i0 * lda;
        const float *b = trans_b ? B + (size_t)j0 * ldb : B + j0;
        cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n,
                    K, alpha, a, lda, b, ldb, beta, C + (size_t)i0 * ldc + j0, ldc);
    }
}

static void matmul_forward(const compute_backend *be, float *out, const float *inp, const float *w, const float *bias,
                           int N, int IC, int OC) {
    float beta = 0.0f;
    if (bias) {
#pragma omp parallel for schedule(static) if ((size_t)N * OC >= PARALLEL_MIN)
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof(float));
        beta = 1.0f;
    }
    gemm(0, 0, N, OC, IC, 1.0f, inp, IC, w, OC, beta, out, OC);
}

static void matmul_backward(const compute_backend *be, float *dinp, float *dw, float *dbias, const float *dout,
                            const float *inp, const float *w, int N, int IC, int OC) {
    if (dinp) gemm(0, 1, N, IC, OC, 1.0f, dout, OC, w, OC, 0.0f, dinp, IC);
    gemm(1, 0, IC, OC, N, 1.0f, inp, IC, dout, OC, 1.0f, dw, OC);
    if (dbias) {
#pragma omp parallel
        {
            int nt = omp_get_num_threads(), t = omp_get_thread_num();
            int lo = (int)((long)OC * t / nt), hi = (int)((long)OC * (t + 1) / nt);
            for (int n = 0; n < N; n++) {
                const float *g = dout + (size_t)n * OC;
                for (int o = lo; o < hi; o++) dbias[o] += g[o];
            }
        }
    }
}

/* max of x[0..n), vectorized when the target allows */
static float row_max(const float *x, int n) {
    float maxv = -INFINITY;
    int j = 0;
#ifdef KERNELS_AVX2
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    for (; j + 8 <= n; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + j));
    maxv = hmax8(vmax);
#endif
    for (; j < n; j++) maxv = fmaxf(maxv, x[j]);
    return maxv;
}

/* --- attention ---------------------------------------------------------------- */

/* Row i of a causal score matrix: softmax over j <= i, zeros after. */
static void causal_softmax_row(float *row, int i, int T) {
    int n = i + 1, j = 0;
    float maxv = row_max(row, n), sum = 0.0f;
#ifdef KERNELS_AVX2
    __m256 vsum = _mm256_setzero_ps(), vm = _mm256_set1_ps(maxv);
    for (; j + 8 <= n; j += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(row + j), vm));
        _mm256_storeu_ps(row + j, e);
        vsum = _mm256_add_ps(vsum, e);
    }
    sum = hsum8(vsum);
#endif
    for (; j < n; j++) {
        row[j] = expf(row[j] - maxv);
        sum += row[j];
    }
    float inv = 1.0f / sum;
    for (j = 0; j < n; j++) row[j] *= inv;
    for (j = n; j < T; j++) row[j] = 0.0f;
}

/* Attention works on blocks of ATT_BLOCK query rows: block i needs keys
 * 0 .. (i+1)*ATT_BLOCK only (causality), so the products skip the upper
 * triangle, about half of the work at long sequences. Entries of att and
 * dpre above the diagonal are kept zero. */
#define ATT_BLOCK 64

/* Grouped-query attention: query head h reads kv head h / (NH / NKV), whose
 * k and v sit at columns C + kvh*hs and C + (NKV + kvh)*hs of a qkv row of
 * W = C + 2*NKV*hs floats. With NKV == NH (GPT-2) that is k = q + C,
 * v = q + 2C in rows of 3C, and the products are the ones multi-head
 * attention always ran. */
static void attention_forward(const compute_backend *be, float *out, float *att, const float *qkv, int B, int T, int C,
                              int NH, int NKV) {
    const int hs = C / NH, group = NH / NKV, C3 = C + 2 * NKV * hs;   /* C3: the qkv row's width */
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * C3 + (size_t)h * hs;
            const float *k = qkv + (size_t)b * T * C3 + C + (size_t)(h / group) * hs, *v = k + (size_t)NKV * hs;
            float *S = att + ((size_t)b * NH + h) * T * T;
            float *y = out + (size_t)b * T * C + (size_t)h * hs;
            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
                const int rows = T - r0 < ATT_BLOCK ? T - r0 : ATT_BLOCK, keys = r0 + rows;
                float *Sr = S + (size_t)r0 * T;
                /* S[r0:, :keys] = q[r0:] k[:keys]^T / sqrt(hs) */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, hs, scale, q + (size_t)r0 * C3, C3,
                            k, C3, 0.0f, Sr, T);
                for (int i = 0; i < rows; i++) causal_softmax_row(Sr + (size_t)i * T, r0 + i, T);
                /* y[r0:] = P[r0:, :keys] v[:keys] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, keys, 1.0f, Sr, T, v, C3, 0.0f,
                            y + (size_t)r0 * C, C);
            }
        }
    }
}

static void attention_backward(const compute_backend *be, float *dqkv, float *dpre, const float *dout,
                               const float *qkv, const float *att, int B, int T, int C, int NH, int NKV) {
    const int hs = C / NH, group = NH / NKV, C3 = C + 2 * NKV * hs;
    const float scale = 1.0f / sqrtf((float)hs);
    /* Per query head: the score gradients dS and dq. */
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const size_t bh = (size_t)b * NH + h;
            const float *k = qkv + (size_t)b * T * C3 + C + (size_t)(h / group) * hs, *v = k + (size_t)NKV * hs;
            float *dq = dqkv + (size_t)b * T * C3 + (size_t)h * hs;
            const float *P = att + bh * T * T, *dy = dout + (size_t)b * T * C + (size_t)h * hs;
            float *dS = dpre + bh * T * T;
            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
                const int rows = T - r0 < ATT_BLOCK ? T - r0 : ATT_BLOCK, keys = r0 + rows;
                /* dP[r0:, :keys] = dy[r0:] v[:keys]^T */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, hs, 1.0f, dy + (size_t)r0 * C, C,
                            v, C3, 0.0f, dS + (size_t)r0 * T, T);
                /* softmax backward, with the 1/sqrt(hs) of the scores folded in */
                for (int i = r0; i < r0 + rows; i++) {
                    const float *p = P + (size_t)i * T;
                    float *d = dS + (size_t)i * T;
                    float dot = 0.0f;
                    for (int j = 0; j <= i; j++) dot += p[j] * d[j];
                    for (int j = 0; j <= i; j++) d[j] = p[j] * (d[j] - dot) * scale;
                    for (int j = i + 1; j < T; j++) d[j] = 0.0f;
                }
                /* dq[r0:] = dS[r0:, :keys] k[:keys] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, keys, 1.0f, dS + (size_t)r0 * T, T,
                            k, C3, 0.0f, dq + (size_t)r0 * C3, C3);
            }
        }
    }
    /* Per kv head and key block: key block c0 is attended by query rows
     * c0 .. T-1 only, so for each query head h of the group, in head order
     * (the first overwrites, the others add: a fixed order of the sum),
     *     dv[c0:] += P_h[c0:, c0:]^T dy_h[c0:],  dk[c0:] += dS_h[c0:, c0:]^T q_h[c0:]
     * (the columns of the block; rows above them are zero). */
    const int nblocks = (T + ATT_BLOCK - 1) / ATT_BLOCK;
#pragma omp parallel for collapse(3) schedule(dynamic, 1)
    for (int b = 0; b < B; b++) {
        for (int g = 0; g < NKV; g++) {
            for (int blk = 0; blk < nblocks; blk++) {
                const int c0 = blk * ATT_BLOCK, cols = T - c0 < ATT_BLOCK ? T - c0 : ATT_BLOCK, rows = T - c0;
                float *dk = dqkv + (size_t)b * T * C3 + C + (size_t)g * hs, *dv = dk + (size_t)NKV * hs;
                for (int j = 0; j < group; j++) {
                    const int h = g * group + j;
                    const size_t bh = (size_t)b * NH + h;
                    const float *q = qkv + (size_t)b * T * C3 + (size_t)h * hs;
                    const float *P = att + bh * T * T, *dS = dpre + bh * T * T;
                    const float *dy = dout + (size_t)b * T * C + (size_t)h * hs;
                    const float beta = j == 0 ? 0.0f : 1.0f;
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, rows, 1.0f,
                                P + (size_t)c0 * T + c0, T, dy + (size_t)c0 * C, C, beta, dv + (size_t)c0 * C3, C3);
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, rows, 1.0f,
                                dS + (size_t)c0 * T + c0, T, q + (size_t)c0 * C3, C3, beta, dk + (size_t)c0 * C3, C3);
                }
            }
        }
    }
}

/* --- attention over a cache of keys and values ----------------------------------- */

static void kv_cache_write(const compute_backend *be, float *k_cache, float *v_cache, const float *k, const float *v,
                           int ld, int N, int pos, int max_len, int NKV, int hs) {
    for (int h = 0; h < NKV; h++)
        for (int n = 0; n < N; n++) {
            const size_t at = ((size_t)h * max_len + pos + n) * hs, from = (size_t)n * ld + (size_t)h * hs;
            memcpy(k_cache + at, k + from, (size_t)hs * sizeof(float));
            memcpy(v_cache + at, v + from, (size_t)hs * sizeof(float));
        }
}

/* As attention_forward, in blocks of ATT_BLOCK query rows, each block a
 * product against the keys it may see: rows r0.. of the N new ones sit at
 * positions pos+r0.., so they see keys 0 .. pos+r0+rows-1. Head h's keys
 * and values are rows of hs floats, contiguous in the cache. */
static void attention_cached_forward(const compute_backend *be, float *out, float *att, const float *q, int ldq,
                                     const float *k_cache, const float *v_cache, int N, int pos, int max_len, int NH,
                                     int NKV, int hs) {
    const int C = NH * hs, T = pos + N, blocks = (N + ATT_BLOCK - 1) / ATT_BLOCK, group = NH / NKV;
    const float scale = 1.0f / sqrtf((float)hs);
    /* a step reads T keys and values per head: worth both threads at long contexts only */
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)N * T * C >= 8 * PARALLEL_MIN)
    for (int h = 0; h < NH; h++) {
        for (int blk = 0; blk < blocks; blk++) {
            const int r0 = blk * ATT_BLOCK, rows = N - r0 < ATT_BLOCK ? N - r0 : ATT_BLOCK, keys = pos + r0 + rows;
            const float *k = k_cache + (size_t)(h / group) * max_len * hs;
            const float *v = v_cache + (size_t)(h / group) * max_len * hs;
            float *S = att + ((size_t)h * N + r0) * T;   /* [rows, T], the first `keys` columns used */
            /* S = q[r0:] k[:keys]^T / sqrt(hs) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, hs, scale, q + (size_t)r0 * ldq + h * hs,
                        ldq, k, hs, 0.0f, S, T);
            for (int i = 0; i < rows; i++) causal_softmax_row(S + (size_t)i * T, pos + r0 + i, keys);
            /* out[r0:] = P v[:keys] */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, keys, 1.0f, S, T, v, hs, 0.0f,
                        out + (size_t)r0 * C + h * hs, C);
        }
    }
}

/* --- GELU ----------------------------------------------------------------------- */

/* gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
 * Since 1 + tanh(u) = 2 sigmoid(2u), gelu(x) = x sigmoid(2u): no cancellation
 * for small u, unlike 1 - 2/(e^{2u} + 1). */
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

static void gelu_forward(const compute_backend *be, float *out, const float *inp, size_t n) {
#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
    for (size_t blk = 0; blk < (n + 4095) / 4096; blk++) {
        size_t i = blk * 4096, end = i + 4096 < n ? i + 4096 : n;
#ifdef KERNELS_AVX2
        const __m256 k2 = _mm256_set1_ps(-2.0f * GELU_K), a = _mm256_set1_ps(GELU_A), one = _mm256_set1_ps(1.0f);
        for (; i + 8 <= end; i += 8) {
            __m256 x = _mm256_loadu_ps(inp + i);
            __m256 x3a = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(x, x), x), a);
            __m256 e = exp8(_mm256_mul_ps(k2, _mm256_add_ps(x, x3a)));   /* exp(-2u) */
            _mm256_storeu_ps(out + i, _mm256_div_ps(x, _mm256_add_ps(one, e)));
        }
#endif
        for (; i < end; i++) {
            float x = inp[i], u = GELU_K * (x + GELU_A * x * x * x);
            out[i] = x / (1.0f + expf(-2.0f * u));
        }
    }
}

static void gelu_backward(const compute_backend *be, float *dinout, const float *inp, size_t n) {
    /* d/dx [x s(2u)] = s + 2 x s (1 - s) u'(x), u' = K (1 + 3 A x^2) */
#pragma omp parallel for schedule(static)
    for (size_t blk = 0; blk < (n + 4095) / 4096; blk++) {
        size_t i = blk * 4096, end = i + 4096 < n ? i + 4096 : n;
#ifdef KERNELS_AVX2
        const __m256 k2 = _mm256_set1_ps(-2.0f * GELU_K), a = _mm256_set1_ps(GELU_A), one = _mm256_set1_ps(1.0f);
        const __m256 k = _mm256_set1_ps(2.0f * GELU_K), a3 = _mm256_set1_ps(3.0f * GELU_A);
        for (; i + 8 <= end; i += 8) {
            __m256 x = _mm256_loadu_ps(inp + i), x2 = _mm256_mul_ps(x, x);
            __m256 e = exp8(_mm256_mul_ps(k2, _mm256_fmadd_ps(_mm256_mul_ps(x2, x), a, x)));
            __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
            __m256 du = _mm256_mul_ps(k, _mm256_fmadd_ps(a3, x2, one));           /* 2 u'(x) */
            __m256 d = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_mul_ps(x, s), _mm256_sub_ps(one, s)), du, s);
            _mm256_storeu_ps(dinout + i, _mm256_mul_ps(d, _mm256_loadu_ps(dinout + i)));
        }
#endif
        for (; i < end; i++) {
            float x = inp[i], u = GELU_K * (x + GELU_A * x * x * x);
            float s = 1.0f / (1.0f + expf(-2.0f * u));
            float d = s + x * s * (1.0f - s) * 2.0f * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
            dinout[i] *= d;
        }
    }
}

static void residual_forward(const compute_backend *be, float *out, const float *a, const float *b, size_t n) {
#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* --- cross-entropy -------------------------------------------------------------- */

static void crossentropy_softmax(const compute_backend *be, float *logits, float *losses, const int32_t *targets,
                                 int N, int V, int Vp, float dlogits_scale) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *row = logits + (size_t)n * Vp;
        const int t = targets[n];
        const float target_logit = row[t];
        const float maxv = row_max(row, V);
        int j;
        /* The sum runs in double across 8 float lanes: 50k terms in float
         * would lose digits that the 1e-5 loss tolerance cares about. */
        double sum = 0.0;
        j = 0;
#ifdef KERNELS_AVX2
        __m256 vm = _mm256_set1_ps(maxv);
        for (; j + 8 <= V; j += 8) {
            __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(row + j), vm));
            if (dlogits_scale != 0.0f) _mm256_storeu_ps(row + j, e);
            __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(e)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1));
            __m256d s = _mm256_add_pd(lo, hi);
            __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
            sum += _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
        }
#endif
        for (; j < V; j++) {
            float e = expf(row[j] - maxv);
            if (dlogits_scale != 0.0f) row[j] = e;
            sum += e;
        }
        losses[n] = (float)(log(sum) + maxv - target_logit);
        if (dlogits_scale != 0.0f) {
            float inv = (float)(1.0 / sum) * dlogits_scale;
            for (j = 0; j < V; j++) row[j] *= inv;
            row[t] -= dlogits_scale;
            for (j = V; j < Vp; j++) row[j] = 0.0f;
        }
    }
}

/* --- embedding ------------------------------------------------------------------ */

static void embed_forward(const compute_backend *be, float *out, const int32_t *tokens, const float *wte,
                          const float *wpe, int B, int T, int C, int Vp) {
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * T * C >= PARALLEL_MIN)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *te = wte + (size_t)tokens[b * T + t] * C;
            float *o = out + ((size_t)b * T + t) * C;
            if (!wpe) {   /* no learned positions (Llama: rotary embeddings in attention) */
                memcpy(o, te, (size_t)C * sizeof(float));
                continue;
            }
            const float *pe = wpe + (size_t)t * C;
            for (int i = 0; i < C; i++) o[i] = te[i] + pe[i];
        }
}

static void embed_backward(const compute_backend *be, float *dwte, float *dwpe, const int32_t *tokens,
                           const float *dout, int B, int T, int C, int Vp) {
    /* Tokens repeat, so rows of dwte have several writers: split the work by
     * columns instead, each thread walking every row in order. */
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), th = omp_get_thread_num();
        int lo = (int)((long)C * th / nt), hi = (int)((long)C * (th + 1) / nt);
        for (int n = 0; n < B * T; n++) {
            float *dte = dwte + (size_t)tokens[n] * C;
            const float *d = dout + (size_t)n * C;
            for (int i = lo; i < hi; i++) dte[i] += d[i];
        }
    }
    if (!dwpe) return;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        float *dpe = dwpe + (size_t)t * C;
        for (int b = 0; b < B; b++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            for (int i = 0; i < C; i++) dpe[i] += d[i];
        }
    }
}

/* --- the Llama family: RMSNorm, linear, rotary embeddings, SwiGLU ------------------ */

/* Sums of products over a row in double, in a fixed order (8 lanes, then the
 * tail): RMSNorm's mean square over thousands of columns keeps every digit
 * float32 has, for about the cost of reading the row. */
static double dot_f64(const float *a, const float *b, int n) {
    double s = 0.0;
    int i = 0;
#ifdef KERNELS_AVX2
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(a + i), y = _mm256_loadu_ps(b + i);
        s0 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)), _mm256_cvtps_pd(_mm256_castps256_ps128(y)), s0);
        s1 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)), _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1)), s1);
    }
    const __m256d v = _mm256_add_pd(s0, s1);
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    s = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
#endif
    for (; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* As Hugging Face's LlamaRMSNorm in float32: rstd = rsqrt(float32 variance +
 * eps), out = w * (x * rstd); the variance is summed in double and rounded
 * once, so it is the float32 mean square to the last bit or one off. */
static void rmsnorm_forward(const compute_backend *be, float *out, float *rstd, const float *inp, const float *w,
                            int N, int C, float eps) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        const float var = (float)(dot_f64(x, x, C) / C);
        const float s = 1.0f / sqrtf(var + eps);
        for (int i = 0; i < C; i++) o[i] = x[i] * s * w[i];
        rstd[n] = s;
    }
}

static void rmsnorm_backward(const compute_backend *be, float *dinp, float *dw, const float *dout, const float *inp,
                             const float *w, const float *rstd, int N, int C) {
    /* y = w x r with r = (mean(x^2) + eps)^-1/2, dr/dx_j = -r^3 x_j / C:
     * dx_j = r w_j g_j - x_j r^3 / C * sum_i g_i w_i x_i. Rows are
     * independent for dinp; dw is a column sum, done by column ranges as in
     * layernorm_backward so that each sum has one owner and a fixed order. */
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *g = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        const float s = rstd[n];
        double gwx = 0.0;
        for (int i = 0; i < C; i++) gwx += (double)(g[i] * w[i]) * x[i];
        const float k = (float)(gwx * s * s * s / C);
        for (int i = 0; i < C; i++) dx[i] += s * (g[i] * w[i]) - k * x[i];
    }
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
        int lo = (int)((long)C * t / nt), hi = (int)((long)C * (t + 1) / nt);
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *g = dout + (size_t)n * C;
            const float s = rstd[n];
            for (int i = lo; i < hi; i++) dw[i] += g[i] * (x[i] * s);
        }
    }
}

/* nn.Linear's layout, w[OC,IC]: the products of matmul_forward/backward with w transposed. */
static void linear_forward(const compute_backend *be, float *out, const float *inp, const float *w, int N, int IC,
                           int OC) {
    gemm(0, 1, N, OC, IC, 1.0f, inp, IC, w, IC, 0.0f, out, OC);
}

static void linear_backward(const compute_backend *be, float *dinp, float *dw, const float *dout, const float *inp,
                            const float *w, int N, int IC, int OC) {
    if (dinp) gemm(0, 0, N, IC, OC, 1.0f, dout, OC, w, IC, 0.0f, dinp, IC);
    gemm(1, 0, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dw, IC);
}

/* Rotary embeddings. The angles are Hugging Face's float32 ones, so that a
 * checkpoint trained there sees the same rotations here:
 *     inv_freq = 1.0 / (theta ** (arange(0, hs, 2).float() / hs))   float32
 *     angle    = position.float() * inv_freq                         float32
 * Both are computed in double and rounded once to float32 (the correctly
 * rounded values; torch's vectorized pow, cos and sin are within 1 ulp of
 * them and may differ in the last bit). pos0 + t is exact in float32 below
 * 2^24. sign -1 rotates back: the gradient of an orthogonal map is its
 * transpose. Each position's cos and sin are computed once and applied to
 * every row at that position and every head. */
#define ROPE_CHUNK 128   /* frequencies whose cos and sin are held at once (all of them for hs <= 256) */

/* inv_freq[i] of rope_params, in float32 step by step as Hugging Face's
 * _compute_llama3_parameters computes it on float32 tensors. */
static float rope_inv_freq(const rope_params *rp, int hs, int i) {
    const float e = (float)(2 * i) / (float)hs;
    const float f = 1.0f / (float)pow((double)rp->theta, (double)e);
    if (rp->factor == 0) return f;
    const float wavelen = (float)(2.0 * M_PI) / f;
    const float low_wavelen = rp->original_context / rp->low_freq_factor;
    const float high_wavelen = rp->original_context / rp->high_freq_factor;
    if (wavelen < high_wavelen) return f;
    if (wavelen > low_wavelen) return f / rp->factor;
    const float smooth = (rp->original_context / wavelen - rp->low_freq_factor) /
                         (rp->high_freq_factor - rp->low_freq_factor);
    return (1.0f - smooth) * f / rp->factor + smooth * f;
}

static void rope_rotate(float *x, int N, int T, int n_heads, int hs, int row_stride, int pos0, const rope_params *rp,
                        float sign) {
    const int half = hs / 2;
    for (int i0 = 0; i0 < half; i0 += ROPE_CHUNK) {
        const int m = half - i0 < ROPE_CHUNK ? half - i0 : ROPE_CHUNK;
        float inv_freq[ROPE_CHUNK];
        for (int i = 0; i < m; i++) inv_freq[i] = rope_inv_freq(rp, hs, i0 + i);
#pragma omp parallel for schedule(static)
        for (int t = 0; t < T; t++) {
            float c[ROPE_CHUNK], s[ROPE_CHUNK];
            const float pos = (float)(pos0 + t);
            for (int i = 0; i < m; i++) {
                const double angle = (double)(pos * inv_freq[i]);   /* the float32 product, as HF */
                c[i] = (float)cos(angle);
                s[i] = sign * (float)sin(angle);
            }
            for (int r = t; r < N; r += T)
                for (int h = 0; h < n_heads; h++) {
                    float *lo = x + (size_t)r * row_stride + (size_t)h * hs + i0, *hi = lo + half;
                    for (int i = 0; i < m; i++) {
                        const float a = lo[i], b = hi[i];
                        lo[i] = a * c[i] - b * s[i];
                        hi[i] = b * c[i] + a * s[i];
                    }
                }
        }
    }
}

static void rope_forward(const compute_backend *be, float *x, int N, int T, int n_heads, int hs, int row_stride,
                         int pos0, rope_params rp) {
    rope_rotate(x, N, T, n_heads, hs, row_stride, pos0, &rp, 1.0f);
}

static void rope_backward(const compute_backend *be, float *dx, int N, int T, int n_heads, int hs, int row_stride,
                          int pos0, rope_params rp) {
    rope_rotate(dx, N, T, n_heads, hs, row_stride, pos0, &rp, -1.0f);
}

/* SwiGLU: out = silu(g) u with silu(g) = g sigmoid(g) = g / (1 + e^-g);
 * d/dg = sigmoid(g) (1 + g (1 - sigmoid(g))). exp8 clamps e^-g to
 * [e^-87.3, e^88.3]: beyond, silu is g or a denormal, either way still
 * within float32 of the true value. */
static void swiglu_forward(const compute_backend *be, float *out, const float *gu, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F;
        float *o = out + (size_t)n * F;
        int i = 0;
#ifdef KERNELS_AVX2
        const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
        for (; i + 8 <= F; i += 8) {
            const __m256 x = _mm256_loadu_ps(g + i);
            const __m256 e = exp8(_mm256_sub_ps(zero, x));
            _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
        }
#endif
        for (; i < F; i++) o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    }
}

static void swiglu_backward(const compute_backend *be, float *dgu, const float *dout, const float *gu, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F, *d = dout + (size_t)n * F;
        float *dg = dgu + (size_t)n * 2 * F, *du = dg + F;
        int i = 0;
#ifdef KERNELS_AVX2
        const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
        for (; i + 8 <= F; i += 8) {
            const __m256 x = _mm256_loadu_ps(g + i), dy = _mm256_loadu_ps(d + i);
            const __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(zero, x))));
            const __m256 ds = _mm256_mul_ps(s, _mm256_fmadd_ps(x, _mm256_sub_ps(one, s), one));   /* silu'(x) */
            _mm256_storeu_ps(dg + i, _mm256_mul_ps(_mm256_mul_ps(dy, _mm256_loadu_ps(u + i)), ds));
            _mm256_storeu_ps(du + i, _mm256_mul_ps(dy, _mm256_mul_ps(x, s)));
        }
#endif
        for (; i < F; i++) {
            const float x = g[i], s = 1.0f / (1.0f + expf(-x));
            dg[i] = d[i] * u[i] * (s * (1.0f + x * (1.0f - s)));
            du[i] = d[i] * (x * s);
        }
    }
}

/* --- general matrix product and reductions ------------------------------------------ */

static void sgemm(const compute_backend *be, int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* In order, one thread: its callers sum a few thousand per-row losses. */
static double cpu_sum(const compute_backend *be, const float *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += x[i];
    return s;
}

#define SUMSQ_CHUNK 65536

static double cpu_sum_sq(const compute_backend *be, const float *x, size_t n) {
    size_t chunks = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
    double total = 0.0;
    /* Partial sums per fixed-size chunk, added in chunk order: independent of
     * the thread count. Chunks are processed in groups to bound the stack. */
    enum { GROUP = 256 };
    double part[GROUP];
    for (size_t c0 = 0; c0 < chunks; c0 += GROUP) {
        size_t nc = chunks - c0 < GROUP ? chunks - c0 : GROUP;
#pragma omp parallel for schedule(static)
        for (size_t c = 0; c < nc; c++) {
            size_t lo = (c0 + c) * SUMSQ_CHUNK, hi = lo + SUMSQ_CHUNK < n ? lo + SUMSQ_CHUNK : n;
            /* eight running sums, not one: a single chain of dependent
             * adds took four times as long (4.4-5.8 ms a 12.6M-element
             * unit against 1.1), and the norm runs once per unit a step */
            double a[8] = {0};
            size_t i = lo;
            for (; i + 8 <= hi; i += 8)
                for (int k = 0; k < 8; k++) a[k] += (double)x[i + k] * x[i + k];
            double s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
            for (; i < hi; i++) s += (double)x[i] * x[i];
            part[c] = s;
        }
        for (size_t c = 0; c < nc; c++) total += part[c];
    }
    return total;
}

/* --- precision conversion -------------------------------------------------------------- */

static void bf16_to_f32(const compute_backend *be, float *out, const st_bf16 *inp, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = st_bf16_to_f32(inp[i]);
}

/* The one f32 -> bf16 loop: the host function of strata/model.h (the
 * optimizer's and loaders' compute copy), which the op runs as it is. */
void gpt_f32_to_bf16(const float *src, st_bf16 *dst, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] = st_f32_to_bf16(src[i]);
}

static void f32_to_bf16(const compute_backend *be, st_bf16 *out, const float *inp, size_t n) {
    gpt_f32_to_bf16(inp, out, n);
}

/* --- memory: the host's ------------------------------------------------------------------ */

static void *cpu_alloc(const compute_backend *be, size_t bytes) { return st_alloc_aligned(64, bytes); }
static void cpu_free(const compute_backend *be, void *dev) { st_free_aligned(dev); }

/* Host and device memory are one: a copy onto itself is an alias, free. */
static void cpu_copy(const compute_backend *be, void *dst, const void *src, size_t bytes) {
    if (dst != src) memcpy(dst, src, bytes);
}
static void cpu_memset(const compute_backend *be, void *dst, int byte, size_t bytes) { memset(dst, byte, bytes); }

static const compute_backend cpu_backend = {
    .name = "cpu",
    .unified = 1,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .to_device = cpu_copy,
    .to_host = cpu_copy,
    .copy = cpu_copy,
    .memset = cpu_memset,
    .layernorm_forward = layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .matmul_forward = matmul_forward,
    .matmul_backward = matmul_backward,
    .attention_forward = attention_forward,
    .attention_backward = attention_backward,
    .kv_cache_write = kv_cache_write,
    .attention_cached_forward = attention_cached_forward,
    .gelu_forward = gelu_forward,
    .gelu_backward = gelu_backward,
    .residual_forward = residual_forward,
    .crossentropy_softmax = crossentropy_softmax,
    .embed_forward = embed_forward,
    .embed_backward = embed_backward,
    .rmsnorm_forward = rmsnorm_forward,
    .rmsnorm_backward = rmsnorm_backward,
    .linear_forward = linear_forward,
    .linear_backward = linear_backward,
    .rope_forward = rope_forward,
    .rope_backward = rope_backward,
    .swiglu_forward = swiglu_forward,
    .swiglu_backward = swiglu_backward,
    .sgemm = sgemm,
    .sum = cpu_sum,
    .sum_sq = cpu_sum_sq,
    .bf16_to_f32 = bf16_to_f32,
    .f32_to_bf16 = f32_to_bf16,
};

const compute_backend *compute_backend_cpu(void) { return &cpu_backend; }
