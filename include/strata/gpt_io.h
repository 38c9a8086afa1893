/*
 * strata/gpt_io.h - Hugging Face checkpoints in and out: GPT-2 and Llama
 * weights in safetensors files with the Hub's tensor names and layouts, and
 * the config.json transformers reads beside them, so that checkpoints
 * published on the Hub load unchanged and what Strata saves loads in
 * transformers (GPT2LMHeadModel, LlamaForCausalLM).
 *
 * A checkpoint is a model directory or one safetensors file:
 *   - DIR/config.json with DIR/model.safetensors, or with the shards that
 *     DIR/model.safetensors.index.json lists ("weight_map");
 *   - FILE.safetensors, with config.json beside it if there is one.
 * Llama needs config.json (its shape is not all in the tensors: heads,
 * key/value heads, rotary base and scaling, epsilon). GPT-2's shape comes from
 * the tensors: d_model and vocab from wte, context from wpe, layers from the
 * h.N names, n_head from the caller, else config.json, else d_model / 64.
 *
 * Loading accepts F32, BF16, F16 (and F64) tensors. GPT-2: wte.weight,
 * wpe.weight, h.N.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
 * mlp.c_proj}.{weight, bias}, ln_f.{weight, bias}, with or without a
 * "transformer." prefix; lm_head.weight absent or equal to wte.weight; the
 * buffers h.N.attn.bias and h.N.attn.masked_bias, ignored. Llama:
 * model.embed_tokens.weight, model.layers.N.{input_layernorm,
 * self_attn.{q,k,v,o}_proj, post_attention_layernorm,
 * mlp.{gate,up,down}_proj}.weight, model.norm.weight, and lm_head.weight
 * unless tie_word_embeddings (a tied file may repeat it, equal); the buffers
 * model.layers.N.self_attn.rotary_emb.inv_freq of older files, ignored.
 * Anything else, a missing tensor or a wrong shape is an error naming the
 * file and the tensor; config.json fields Strata cannot compute exactly
 * (biases, another activation, another rope scaling, a head size other
 * than hidden_size / heads) are refused naming the field.
 *
 * Weights are read one unit at a time (hf_checkpoint_read_unit), so that a
 * model larger than memory streams into a run's store:
 *
 *     hf_checkpoint *ck;
 *     if (hf_checkpoint_open(&ck, "Llama-3.2-1B/", 0, &err) != ST_OK) ...
 *     const gpt_config *cfg = hf_checkpoint_config(ck);
 *     for (int u = 0; u < gpt_num_units(cfg); u++)
 *         hf_checkpoint_read_unit(ck, u, unit_buf, &err);   // gpt_unit_numel floats
 *     hf_checkpoint_close(ck);
 */
#ifndef STRATA_GPT_IO_H
#define STRATA_GPT_IO_H

#include "strata/model.h"
#include "strata/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reading ------------------------------------------------------------- */

typedef struct hf_checkpoint hf_checkpoint;

/* Opens a checkpoint directory or file and checks all of it that can be
 * checked without reading the weights: config.json, the index, every shard's
 * header, every tensor's presence, shape and dtype, and that no tensor is
 * left over. n_head <= 0: GPT-2's is inferred (see above); Llama's comes
 * from config.json and a different n_head is ST_EINVAL. */
st_status hf_checkpoint_open(hf_checkpoint **out, const char *path, int n_head, st_error *err);
const gpt_config *hf_checkpoint_config(const hf_checkpoint *c);
/* The directory the checkpoint is in (where tokenizer.json would be). */
const char *hf_checkpoint_dir(const hf_checkpoint *c);
/* The vocabulary fingerprint its metadata records (GPT_META_VOCAB_FINGERPRINT,
 * in its first file), or 0 when none does, as in files from elsewhere. */
uint64_t hf_checkpoint_vocab_fingerprint(const hf_checkpoint *c);
/* Unit u's weights into out (gpt_unit_numel floats; padded vocabulary rows
 * zero). A gpt_unit_reader: ctx is the hf_checkpoint. Memory: a tied GPT-2
 * file's extra lm_head.weight is compared to wte chunk by chunk; nothing
 * else is allocated. */
st_status hf_checkpoint_read_unit(void *ctx, int unit, float *out, st_error *err);
void hf_checkpoint_close(hf_checkpoint *c);

/* The whole model of an open checkpoint in memory: *params
 * (gpt_num_params floats, unit layout) is allocated with st_alloc_aligned. */
st_status hf_checkpoint_read_all(hf_checkpoint *c, float **params, st_error *err);
/* The same from a path (hf_checkpoint_open, then read_all). */
st_status gpt_load_safetensors(const char *path, int n_head, gpt_config *cfg, float **params, st_error *err);

/* ---- writing ------------------------------------------------------------- */

#define GPT_META_VOCAB_FINGERPRINT "strata_vocab_fingerprint"

typedef struct hf_save_opts {
    safetensors_dtype dtype;     /* F32, BF16 or F16 */
    uint64_t shard_bytes;        /* 0: one model.safetensors; else shards of at most this many bytes of
                                    tensor data (a larger tensor gets a shard of its own) and the index */
    uint64_t vocab_fingerprint;  /* recorded in every file's metadata when not 0 (tokenizer_fingerprint):
                                    which vocabulary the ids mean; transformers ignores it */
} hf_save_opts;

/* Writes a checkpoint into the directory dir (created if missing):
 * config.json, and model.safetensors or model-0000i-of-0000n.safetensors
 * with model.safetensors.index.json, the weights fetched one unit at a
 * time (read_unit(ctx, u, out, err) fills gpt_unit_numel floats), so a
 * model larger than memory saves too: memory is one unit. Each file is
 * written atomically; the index and config.json last. Shards or an index
 * a previous save left in dir that this one does not write are removed,
 * so the directory never mixes two saves' files. */
st_status hf_checkpoint_save(const char *dir, const gpt_config *cfg, gpt_unit_reader read_unit, void *ctx,
                             const hf_save_opts *opts, st_error *err);
/* One safetensors file at path (no config.json): the real (unpadded)
 * parameters under the Hugging Face names, streamed and atomic as above. */
st_status gpt_save_safetensors_by_unit(const char *path, const gpt_config *cfg, gpt_unit_reader read_unit, void *ctx,
                                       safetensors_dtype dtype, uint64_t vocab_fingerprint, st_error *err);
/* The same from the whole model in memory. */
st_status gpt_save_safetensors(const char *path, const gpt_config *cfg, const float *params,
                               safetensors_dtype dtype, st_error *err);
/* The config.json transformers builds the model from (GPT2LMHeadModel or
 * LlamaForCausalLM), atomically; torch_dtype names dtype, the weights'. */
st_status gpt_write_hf_config(const char *json_path, const gpt_config *cfg, safetensors_dtype dtype, st_error *err);
/* The Hugging Face name of a tensor of unit `unit` (gpt_tensor_info.name as
 * the suffix): "h.3.attn.c_attn.weight", "model.layers.3.mlp.up_proj.weight",
 * "wte.weight". */
void gpt_hf_tensor_name(const gpt_config *cfg, int unit, const char *suffix, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
