/* model_internal.h - what the whole-model passes (gpt_model.c) and the
 * decoder (gpt_decode.c) share inside the model layer. */
#ifndef STRATA_MODEL_INTERNAL_H
#define STRATA_MODEL_INTERNAL_H

#include "strata/backend.h"
#include "strata/model.h"

/* The f32 weights of unit u on be's device: on a unified backend a pointer
 * into w.f32, or unit u of w.bf16 widened into dst32; otherwise u copied
 * into dst32 (in mixed precision: into stage16, then widened into dst32).
 * dst32: gpt_unit_numel(cfg, u) floats of device memory, used only when
 * needed; stage16 likewise, on a backend that is not unified in mixed
 * precision. */
float *gpt_unit_weights_on(const compute_backend *be, const gpt_config *cfg, gpt_weights w, int u, float *dst32,
                           st_bf16 *stage16);

#endif
