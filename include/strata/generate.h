/*
 * strata/generate.h - what generating text needs whatever the architecture:
 * a cache of every layer's keys and values on a compute backend, and the
 * sampler that picks each next token from the logits. A model's decoder
 * (GPT-2's: gpt_decoder in strata/model.h) owns a kv_cache and runs the
 * backend's kv_cache_write / attention_cached_forward on it; the caller
 * feeds the decoder's logits to a sampler.
 *
 *     sampler *s;
 *     sampler_create(&s, cfg.vocab_size, &(sampler_params){.temperature = 0.8, .top_k = 40, .top_p = 0.95}, seed, &err);
 *     int32_t next = sampler_pick(s, logits);      // logits [vocab_size] (more columns are ignored)
 *     sampler_free(s);
 */
#ifndef STRATA_GENERATE_H
#define STRATA_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "strata/backend.h"
#include "strata/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- the cache of keys and values ----------------------------------------------- */

/* Keys and values of positions 0 .. max_len-1 for every layer, in device
 * memory of be: layer l's keys are [n_kv_head, max_len, head_size] at
 * kv_cache_k(c, l), its values likewise at kv_cache_v(c, l) (the layout the
 * backend's cache ops take). len is how many positions hold a token's keys
 * and values; the decoder that owns the cache keeps it. */
typedef struct kv_cache {
    const compute_backend *be;
    int n_layer, n_kv_head, head_size, max_len;
    int len;
    float *k, *v;   /* [n_layer, n_kv_head, max_len, head_size] each */
} kv_cache;

/* Bytes kv_cache_create allocates on the device: 2 x n_layer x n_kv_head x
 * max_len x head_size floats (gpt2-124m at 1024 positions: 72 MiB). */
size_t kv_cache_bytes(int n_layer, int n_kv_head, int head_size, int max_len);
st_status kv_cache_create(kv_cache *c, const compute_backend *be, int n_layer, int n_kv_head, int head_size,
                          int max_len, st_error *err);
void kv_cache_free(kv_cache *c);   /* idempotent; a zeroed struct is fine */
float *kv_cache_k(const kv_cache *c, int layer);
float *kv_cache_v(const kv_cache *c, int layer);

/* --- sampling ------------------------------------------------------------------- */

typedef struct sampler_params {
    double temperature;   /* 0: greedy (argmax); else logits / temperature before the softmax */
    int top_k;            /* keep the k most likely tokens; 0 (or >= vocab): all */
    double top_p;         /* nucleus: keep the smallest set of most likely tokens whose probability
                             sums to >= top_p (after top-k), renormalized; 1: all. In (0, 1]. */
} sampler_params;

typedef struct sampler sampler;

/* A sampler over a vocabulary of `vocab` tokens, seeded: the same seed and
 * logits give the same tokens. ST_EINVAL for parameters out of range
 * (temperature < 0, top_k < 0, top_p not in (0, 1]). Host memory only: a
 * few arrays of vocab entries. */
st_status sampler_create(sampler **out, int vocab, const sampler_params *p, uint64_t seed, st_error *err);
void sampler_free(sampler *s);
/* The next token from logits[0..vocab) (host memory). Greedy when the
 * temperature is 0 or top_k is 1: the first index of the largest logit.
 * Otherwise in this order: divide by the temperature, keep the top_k
 * largest (ties at the k-th: the lower ids), softmax over them, keep the
 * nucleus of top_p (most likely first, ties by lower id), renormalize, draw
 * one with the sampler's generator. */
int32_t sampler_pick(sampler *s, const float *logits);

#ifdef __cplusplus
}
#endif
#endif
