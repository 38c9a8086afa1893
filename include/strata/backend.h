/*
 * strata/backend.h - the compute backend: where the model's memory lives and
 * what runs its kernels, chosen at run time through a table of functions.
 *
 * The passes of strata/model.h never touch activations, weights or
 * gradients themselves: they allocate device memory, move bytes between it
 * and the host, and run kernels, all through a compute_backend. A backend
 * for a GPU fills the same table with device allocations, copies across the
 * host link and its own kernels; nothing above the table changes.
 *
 *     const compute_backend *be = compute_backend_named("cpu");   // or "check"
 *     float *x = be->alloc(be, n * sizeof(float));                 // device memory
 *     float *y = be->alloc(be, n * sizeof(float));
 *     be->to_device(be, x, host_x, n * sizeof(float));
 *     be->gelu_forward(be, y, x, n);
 *     double s = be->sum(be, y, n);                                // a scalar comes back to the host
 *     be->to_host(be, host_y, y, n * sizeof(float));
 *     be->free(be, x);
 *     be->free(be, y);
 *
 * The contract, for every op:
 *   - `be` is the backend the op belongs to, passed first (a table may serve
 *     several devices later; the backends here ignore it).
 *   - Every pointer an op names *_dev, and every array argument of a kernel,
 *     is device memory of this backend: inside one allocation of be->alloc,
 *     with the whole extent the op touches (N*C floats for a [N, C] array).
 *     The host never reads or writes device memory directly; it uses
 *     to_device and to_host. *_host pointers are host memory.
 *   - Kernels read like the math: outputs first, then inputs, shapes in the
 *     comments, N the number of rows (B*T).
 *   - As the host sees them, ops complete in order: when to_host, sum or
 *     sum_sq return, their data is in place, and a host buffer given to
 *     to_device may be reused as soon as it returns. (A GPU backend may
 *     queue its kernels on a stream as long as this holds.)
 *   - Results are deterministic for a given backend, whatever the thread
 *     count: every reduction runs in a fixed order that does not depend on
 *     the number of threads (no atomics).
 *
 * unified = 1 means device memory IS host memory (the CPU backend): a host
 * buffer may then be used as a device buffer as it is, and a copy between a
 * host buffer and a device buffer that are the same memory costs nothing
 * (to_device, to_host and copy skip the memcpy when dst == src). Callers
 * use that to alias instead of keeping mirrors: the whole-model passes use
 * the caller's weights, gradients and logits in place on a unified backend,
 * and allocate device mirrors only on a non-unified one.
 *
 * Backends:
 *   "cpu"    OpenBLAS sgemm for matrix products (the OpenMP build, so BLAS
 *            and the OpenMP loops share one thread pool), OpenMP loops with
 *            AVX2/FMA elsewhere. Unified; device memory is 64-byte aligned
 *            host memory.
 *   "check"  runs the CPU backend's code, bit for bit, on memory that only
 *            its ops may touch: each allocation is an mmap'd region kept
 *            PROT_NONE whenever no op is running on it, so a direct host
 *            read or write of device memory faults (SIGSEGV); each op checks
 *            that its device arguments, with their extents, lie inside one
 *            allocation (and that the host side of to_device/to_host does
 *            not), and aborts naming the op and the argument otherwise:
 *                check backend: layernorm_forward: argument 'inp' is not device memory
 *            Not unified. It proves without a GPU that a caller keeps host
 *            and device memory apart. Ops may run from several threads at
 *            once (an optimizer thread beside the compute thread).
 */
#ifndef STRATA_BACKEND_H
#define STRATA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "strata/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct compute_backend compute_backend;

/* The rotary frequencies of rope_forward/backward: inv_freq[i] = 1 / theta^(2i/hs),
 * and when factor != 0 Llama 3.1's rescaling of them (Hugging Face's rope_type
 * "llama3"): a frequency whose wavelength 2 pi / inv_freq is above
 * original_context / low_freq_factor is divided by factor, one below
 * original_context / high_freq_factor is kept, and one between is the blend
 * (1 - s) inv_freq / factor + s inv_freq with s = (original_context /
 * wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor). */
typedef struct rope_params {
    float theta;
    float factor, low_freq_factor, high_freq_factor, original_context;
} rope_params;

struct compute_backend {
    const char *name;   /* "cpu", "check" */
    int unified;        /* 1: device memory is host memory (see above) */

    /* --- memory ------------------------------------------------------------- */

    /* bytes of device memory, 64-byte aligned, contents undefined; NULL when
     * out of memory. 0 bytes gives a valid allocation to free. */
    void *(*alloc)(const compute_backend *be, size_t bytes);
    /* Releases an allocation of alloc; NULL is fine. */
    void (*free)(const compute_backend *be, void *dev);
    void (*to_device)(const compute_backend *be, void *dst_dev, const void *src_host, size_t bytes);
    void (*to_host)(const compute_backend *be, void *dst_host, const void *src_dev, size_t bytes);
    /* device to device; dst and src do not overlap unless equal */
    void (*copy)(const compute_backend *be, void *dst_dev, const void *src_dev, size_t bytes);
    void (*memset)(const compute_backend *be, void *dst_dev, int byte, size_t bytes);

    /* --- the model's kernels ------------------------------------------------- */

    /* out[N,C] = (inp - mean) * rstd * w[C] + b[C], row-wise; mean, rstd [N] saved for backward. */
    void (*layernorm_forward)(const compute_backend *be, float *out, float *mean, float *rstd, const float *inp,
                              const float *w, const float *b, int N, int C);
    /* dinp[N,C] += d/dinp; dw[C] += sum dout*norm; db[C] += sum dout. */
    void (*layernorm_backward)(const compute_backend *be, float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *w, const float *mean, const float *rstd, int N, int C);

    /* out[N,OC] = inp[N,IC] @ w[IC,OC] + bias[OC] (bias may be NULL). */
    void (*matmul_forward)(const compute_backend *be, float *out, const float *inp, const float *w, const float *bias,
                           int N, int IC, int OC);
    /* dinp[N,IC] = dout @ w^T (overwrites; skipped when dinp is NULL); dw[IC,OC] += inp^T @ dout;
     * dbias[OC] += column sums of dout (when not NULL). */
    void (*matmul_backward)(const compute_backend *be, float *dinp, float *dw, float *dbias, const float *dout,
                            const float *inp, const float *w, int N, int IC, int OC);

    /* Causal attention with NH query heads of hs = C / NH floats sharing NKV
     * key/value heads (NH % NKV == 0; NKV == NH: multi-head, GPT-2; NKV == 1:
     * multi-query). Each row of qkv[B,T,C + 2*NKV*hs] is q (NH heads, C
     * floats) | k (NKV heads) | v (NKV heads); query head h reads kv head
     * h / (NH / NKV), as Hugging Face's repeat_kv:
     * att[B,NH,T,T] = softmax(q k^T / sqrt(hs)) (zero above the diagonal), out[B,T,C] = att v. */
    void (*attention_forward)(const compute_backend *be, float *out, float *att, const float *qkv, int B, int T,
                              int C, int NH, int NKV);
    /* dqkv[B,T,C + 2*NKV*hs] (overwrites, qkv's layout) from dout[B,T,C];
     * dpre[B,NH,T,T] is scratch. A kv head's gradient sums those of its
     * NH / NKV query heads, in head order. */
    void (*attention_backward)(const compute_backend *be, float *dqkv, float *dpre, const float *dout,
                               const float *qkv, const float *att, int B, int T, int C, int NH, int NKV);

    /* --- generation with a cache of keys and values --------------------------- */
    /* The cache of one layer holds keys and values of positions 0 .. max_len-1
     * head by head: k_cache, v_cache [NKV, max_len, hs] (NKV key/value heads of
     * hs floats). The ops serve any architecture with multi-head attention:
     * GPT-2 has NKV = NH; fewer KV heads (grouped-query attention) need
     * NH % NKV == 0, query head h reading KV head h / (NH / NKV).
     *
     * Writes the keys and values of N new tokens at positions pos .. pos+N-1:
     * k_cache[h, pos+n, :] = k[n, h*hs .. (h+1)*hs), v_cache likewise, for
     * h < NKV; k and v are [N, NKV*hs] with rows ld floats apart (GPT-2: the k
     * and v blocks of qkv[N, 3C], ld = 3C). pos + N <= max_len. */
    void (*kv_cache_write)(const compute_backend *be, float *k_cache, float *v_cache, const float *k, const float *v,
                           int ld, int N, int pos, int max_len, int NKV, int hs);
    /* Causal attention of N new queries at positions pos .. pos+N-1 over the
     * cache (which already holds them, kv_cache_write): for head h and row i,
     *   out[i, h*hs ..] = softmax(q[i, h*hs ..] k_cache[h', 0..pos+i]^T / sqrt(hs)) v_cache[h', 0..pos+i]
     * with h' = h / (NH / NKV). q is [N, NH*hs] with rows ldq floats apart,
     * out [N, NH*hs] packed; att [NH, N, pos+N] is scratch (the probabilities). */
    void (*attention_cached_forward)(const compute_backend *be, float *out, float *att, const float *q, int ldq,
                                     const float *k_cache, const float *v_cache, int N, int pos, int max_len, int NH,
                                     int NKV, int hs);

    /* out[n] = gelu(inp[n]), the tanh approximation. */
    void (*gelu_forward)(const compute_backend *be, float *out, const float *inp, size_t n);
    /* dinout[n] *= gelu'(inp[n]) (in place). */
    void (*gelu_backward)(const compute_backend *be, float *dinout, const float *inp, size_t n);
    /* out[n] = a[n] + b[n]; out may be a or b. */
    void (*residual_forward)(const compute_backend *be, float *out, const float *a, const float *b, size_t n);

    /* Cross-entropy over rows of logits[N, Vp] with V real columns: losses[N]
     * = -log softmax(logits)[targets[N]]. If dlogits_scale != 0 the logits are
     * overwritten with dloss/dlogits * dlogits_scale (zero in the padded columns). */
    void (*crossentropy_softmax)(const compute_backend *be, float *logits, float *losses, const int32_t *targets,
                                 int N, int V, int Vp, float dlogits_scale);

    /* out[B,T,C] = wte[tokens[B,T]] + wpe[0..T); wte is [Vp, C], token ids < Vp.
     * wpe NULL: no learned positions (Llama), out = wte[tokens]. */
    void (*embed_forward)(const compute_backend *be, float *out, const int32_t *tokens, const float *wte,
                          const float *wpe, int B, int T, int C, int Vp);
    /* dwte[tokens] += dout[B,T,C], dwpe[0..T) += dout summed over the batch
     * (skipped when dwpe is NULL). */
    void (*embed_backward)(const compute_backend *be, float *dwte, float *dwpe, const int32_t *tokens,
                           const float *dout, int B, int T, int C, int Vp);

    /* --- the Llama family's kernels (Hugging Face LlamaForCausalLM) ----------- */

    /* RMSNorm (LlamaRMSNorm): rstd[N] = 1 / sqrt(mean(inp^2) + eps) per row,
     * out[N,C] = inp * rstd * w[C]; rstd saved for backward. */
    void (*rmsnorm_forward)(const compute_backend *be, float *out, float *rstd, const float *inp, const float *w,
                            int N, int C, float eps);
    /* dinp[N,C] += d/dinp; dw[C] += sum over rows of dout * inp * rstd. */
    void (*rmsnorm_backward)(const compute_backend *be, float *dinp, float *dw, const float *dout, const float *inp,
                             const float *w, const float *rstd, int N, int C);

    /* out[N,OC] = inp[N,IC] @ w^T, w[OC,IC] in PyTorch nn.Linear's layout (no
     * bias): a checkpoint's weight as stored, fused weights (q|k|v, gate|up)
     * as concatenated rows. */
    void (*linear_forward)(const compute_backend *be, float *out, const float *inp, const float *w, int N, int IC,
                           int OC);
    /* dinp[N,IC] = dout @ w (overwrites; skipped when dinp is NULL); dw[OC,IC] += dout^T @ inp. */
    void (*linear_backward)(const compute_backend *be, float *dinp, float *dw, const float *dout, const float *inp,
                            const float *w, int N, int IC, int OC);

    /* Rotary position embedding, Hugging Face's rotate-half layout, in place
     * on n_heads heads of hs floats (hs even) at the start of each of N rows
     * that are row_stride floats apart (the q or the k part of a qkv row).
     * Row r is at position p = pos0 + r % T; with half = hs / 2 and i < half,
     *     inv_freq[i] = 1 / theta^(2i / hs),  angle = p * inv_freq[i]    (both float32, as HF)
     * (inv_freq rescaled by Llama 3.1's rule when rp.factor != 0, see rope_params)
     *     x[i]      <- x[i] cos(angle) - x[i+half] sin(angle)
     *     x[i+half] <- x[i+half] cos(angle) + x[i] sin(angle)
     * with cos and sin correctly rounded to float32 (torch's are within 1 ulp).
     * pos0 > 0 continues the positions of a KV cache. */
    void (*rope_forward)(const compute_backend *be, float *x, int N, int T, int n_heads, int hs, int row_stride,
                         int pos0, rope_params rp);
    /* The gradient through rope_forward, in place on dx: the rotation by
     * minus the angle (the transpose; it undoes rope_forward up to cos^2 +
     * sin^2 of float32 values, 1 within 2^-22). Same arguments. */
    void (*rope_backward)(const compute_backend *be, float *dx, int N, int T, int n_heads, int hs, int row_stride,
                          int pos0, rope_params rp);

    /* SwiGLU (LlamaMLP's act_fn(gate) * up): out[N,F] = silu(gate) * up with
     * gate = gu[:, 0:F], up = gu[:, F:2F] (the fused gate|up projection's
     * output), silu(x) = x * sigmoid(x). */
    void (*swiglu_forward)(const compute_backend *be, float *out, const float *gu, int N, int F);
    /* dgu[N,2F] (overwrites) from dout[N,F]. */
    void (*swiglu_backward)(const compute_backend *be, float *dgu, const float *dout, const float *gu, int N, int F);

    /* C[M,N] = alpha op(A) op(B) + beta C, row-major, op(X) = X^T when trans_x:
     * A is [M,K] (trans_a: [K,M]) with rows lda floats apart, B is [K,N]
     * (trans_b: [N,K]) with ldb, C with ldc. BLAS's argument order, so it
     * maps one to one on cblas_sgemm and cublasSgemm. */
    void (*sgemm)(const compute_backend *be, int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

    /* Sum of x[n] in double, in a fixed order; returned to the host. */
    double (*sum)(const compute_backend *be, const float *x, size_t n);
    /* Sum of squares of x[n] in double, in fixed-size chunks added in chunk
     * order: the same result for any thread count (the gradient norm). */
    double (*sum_sq)(const compute_backend *be, const float *x, size_t n);

    /* out[n] = inp[n] widened from bf16 / rounded to bf16 (round to nearest even). */
    void (*bf16_to_f32)(const compute_backend *be, float *out, const st_bf16 *inp, size_t n);
    void (*f32_to_bf16)(const compute_backend *be, st_bf16 *out, const float *inp, size_t n);
};

/* The two backends; both live as long as the process. */
const compute_backend *compute_backend_cpu(void);
const compute_backend *compute_backend_check(void);
/* "cpu" or "check"; NULL for any other name. */
const compute_backend *compute_backend_named(const char *name);

/* The CPU backend's matrix products are OpenBLAS's: the name of the kernel
 * set it runs ("SkylakeX", "Haswell", ...), and the one this CPU should run
 * when that one lacks the AVX2 kernels the CPU could use (OpenBLAS picks by
 * the CPU's model as it loads, and a model newer than the library gets its
 * generic kernels, 3-4x slower), else NULL. OpenBLAS reads the choice from
 * OPENBLAS_CORETYPE as it loads, so only a process started with it set runs
 * it (src/cli/main.c starts itself again so, unless the user set one). */
const char *cpu_blas_kernels(void);
const char *cpu_blas_kernels_better(void);

#ifdef __cplusplus
}
#endif
#endif
