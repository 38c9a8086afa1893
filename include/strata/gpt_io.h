/*
 * strata/gpt_io.h - GPT-2 weights in and out of safetensors files, with the
 * Hugging Face tensor names and layouts, so that checkpoints published on the
 * Hub load unchanged and what Strata saves loads in transformers.
 *
 * Loading accepts: the names wte.weight, wpe.weight, h.N.{ln_1, attn.c_attn,
 * attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}.{weight, bias}, ln_f.{weight, bias},
 * with or without a "transformer." prefix; dtypes F32, BF16, F16 (and F64);
 * lm_head.weight absent or equal to wte.weight; the buffers h.N.attn.bias and
 * h.N.attn.masked_bias, which are ignored. Anything else is an error naming
 * the file and the tensor. The configuration comes from the shapes: d_model
 * and vocab from wte, context from wpe, layers from the h.N names, and n_head
 * from the caller, else config.json beside the file, else d_model / 64.
 *
 *     gpt_config cfg;
 *     float *params;                 // gpt_num_params(&cfg) floats, unit layout
 *     if (gpt_load_safetensors("model.safetensors", 0, &cfg, &params, &err) != ST_OK) ...
 *     ...
 *     st_free_aligned(params);
 */
#ifndef STRATA_GPT_IO_H
#define STRATA_GPT_IO_H

#include "strata/model.h"
#include "strata/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* n_head <= 0: infer it. *params is allocated with st_alloc_aligned. */
st_status gpt_load_safetensors(const char *path, int n_head, gpt_config *cfg, float **params, st_error *err);
/* Writes the real (unpadded) parameters under the Hugging Face names, as F32,
 * BF16 or F16, atomically (temporary file, fsync, rename). */
st_status gpt_save_safetensors(const char *path, const gpt_config *cfg, const float *params,
                               safetensors_dtype dtype, st_error *err);
/* The same, fetching the weights one unit at a time (gpt.h's unit layout):
 * read_unit(ctx, u, out, err) fills out with unit u's gpt_unit_numel
 * floats. Memory: one unit, whatever the model's size; for weights that
 * live on an SSD (strata/offload.h). */
typedef st_status (*gpt_unit_reader)(void *ctx, int unit, float *out, st_error *err);
/* vocab_fingerprint, when not 0, is recorded in the file's metadata under
 * GPT_META_VOCAB_FINGERPRINT (16 hex digits): which vocabulary the model's
 * ids mean (tokenizer_fingerprint), so that eval and sample can refuse data
 * or a tokenizer made with another one. transformers ignores the key. */
st_status gpt_save_safetensors_by_unit(const char *path, const gpt_config *cfg, gpt_unit_reader read_unit, void *ctx,
                                       safetensors_dtype dtype, uint64_t vocab_fingerprint, st_error *err);
#define GPT_META_VOCAB_FINGERPRINT "strata_vocab_fingerprint"
/* The fingerprint a file records (0 when it records none, as in files from
 * elsewhere). Reads the header only. ST_ECORRUPT naming the file if the value
 * is not 16 hex digits. */
st_status gpt_safetensors_vocab_fingerprint(const char *path, uint64_t *fingerprint, st_error *err);
/* Writes a transformers GPT2LMHeadModel config.json for cfg, atomically
 * (st_atomic_open_stream: temporary file, fsync, rename). */
st_status gpt_write_hf_config(const char *json_path, const gpt_config *cfg, st_error *err);

#ifdef __cplusplus
}
#endif
#endif
