/*
 * model_internal.h - what the model layer's files share and nothing above
 * it sees: the Llama block passes that gpt_pass.c hands Llama configs to
 * (and their rotations, which the decoder runs from a cache position),
 * and the unit weights the whole-model passes (gpt_model.c) and the decoder
 * (gpt_decode.c) both read.
 */
#ifndef STRATA_MODEL_INTERNAL_H
#define STRATA_MODEL_INTERNAL_H

#include "strata/backend.h"
#include "strata/model.h"

/* gpt_block_forward / gpt_block_backward / gpt_block_scratch_numel for a
 * Llama config: the same contracts. */
void llama_block_forward(const compute_backend *be, const gpt_config *cfg, const gpt_block_w *w, int B, int T,
                         const float *x, float *y, gpt_block_acts *acts);
void llama_block_backward(const compute_backend *be, const gpt_config *cfg, const gpt_block_w *w, gpt_block_w *g,
                          int B, int T, const float *x, const gpt_block_acts *acts, const float *dy, float *dx,
                          float *scratch);
size_t llama_block_scratch_numel(const gpt_config *cfg, int B, int T);

/* The rotary parameters of cfg, as the backend's rope kernels take them. */
rope_params llama_rope_params(const gpt_config *cfg);
/* Both rotations of a fused q|k|v row set ([N, (NH + 2 NKV) hs]): the NH
 * query heads, then the NKV key heads right after them (v is not rotated),
 * row r at position pos0 + r % T (a KV cache continues from pos0 > 0).
 * backward: the inverse rotation, for the gradient. */
void llama_rotate_qk(const compute_backend *be, const gpt_config *cfg, float *qkv, int N, int T, int pos0,
                     int backward);

/* The f32 weights of unit u on be's device: on a unified backend a pointer
 * into w.f32, or unit u of w.bf16 widened into dst32; otherwise u copied
 * into dst32 (in mixed precision: into stage16, then widened into dst32).
 * dst32: gpt_unit_numel(cfg, u) floats of device memory, used only when
 * needed; stage16 likewise, on a backend that is not unified in mixed
 * precision. */
float *gpt_unit_weights_on(const compute_backend *be, const gpt_config *cfg, gpt_weights w, int u, float *dst32,
                           st_bf16 *stage16);
/* The larger of the two end units (the embedding unit and an untied head's
 * unit): the whole-model passes and the decoder hold either in one buffer,
 * as an untied head is loaded only once the embedding is done with it. */
size_t gpt_end_units_numel(const gpt_config *cfg);

#endif
