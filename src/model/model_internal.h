/*
 * model_internal.h - what the model layer's files share and nothing above
 * it sees: the Llama block passes that gpt_pass.c hands Llama configs to.
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

#endif
