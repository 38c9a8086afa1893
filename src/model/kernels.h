/*
 * kernels.h - the CPU compute kernels behind strata/model.h (internal).
 *
 * Each kernel reads like the math: outputs first, then inputs, shapes in the
 * comments. N is the number of rows (B*T). Matrix products go to BLAS
 * (OpenBLAS sgemm); the rest are OpenMP loops, vectorized with AVX2/FMA when
 * the compiler targets it and plain C otherwise. Reductions run in a fixed
 * order, so results are identical run to run for a given thread count.
 *
 * This is the surface a GPU backend would fill: the model code calls only
 * these functions.
 */
#ifndef STRATA_MODEL_KERNELS_H
#define STRATA_MODEL_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* out[N,C] = (inp - mean) * rstd * w + b, row-wise; mean/rstd [N] saved for backward. */
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                       const float *b, int N, int C);
/* dinp[N,C] += d/dinp; dw[C] += sum dout*norm; db[C] += sum dout. */
void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                        const float *w, const float *mean, const float *rstd, int N, int C);

/* out[N,OC] = inp[N,IC] @ w[IC,OC] + bias[OC] (bias may be NULL). */
void matmul_forward(float *out, const float *inp, const float *w, const float *bias, int N, int IC, int OC);
/* dinp[N,IC] = dout @ w^T (overwrites); dw[IC,OC] += inp^T @ dout; dbias[OC] += column sums of dout. */
void matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                     const float *w, int N, int IC, int OC);

/* Causal multi-head attention over qkv[B,T,3C] (q, k, v blocks of C columns):
 * att[B,NH,T,T] = softmax(q k^T / sqrt(hs)) (zero above the diagonal), out[B,T,C] = att v. */
void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH);
/* dqkv[B,T,3C] (overwrites) from dout[B,T,C]; dpre[B,NH,T,T] is scratch. */
void attention_backward(float *dqkv, float *dpre, const float *dout, const float *qkv, const float *att,
                        int B, int T, int C, int NH);

/* out[n] = gelu(inp[n]), the tanh approximation. */
void gelu_forward(float *out, const float *inp, size_t n);
/* dinout[n] = dinout * gelu'(inp) (in place). */
void gelu_backward(float *dinout, const float *inp, size_t n);

/* out[n] = a + b */
void residual_forward(float *out, const float *a, const float *b, size_t n);

/* Cross-entropy over rows of logits[N, Vp] with V real columns. losses[N]
 * receives -log softmax(logits)[target]. If dlogits_scale != 0 the logits
 * are overwritten in place with dloss/dlogits * dlogits_scale (zero in the
 * padded columns). */
void crossentropy_softmax(float *logits, float *losses, const int32_t *targets, int N, int V, int Vp,
                          float dlogits_scale);

#endif
