/*
 * strata/model.h - the GPT family: GPT-2 and Llama (Hugging Face's
 * LlamaForCausalLM): configuration, parameter layout, and the forward and
 * backward passes of their pieces.
 *
 * Layout. All parameters live in one float vector made of contiguous
 * *units*, so that each can be loaded, stepped and written back on its own:
 * the embedding unit (unit 0), one unit per transformer block (1..L), and,
 * when the head is untied, a head unit of its own (unit L+1, the last).
 * GPT-2:
 *
 *   unit 0      the embedding unit: wte [Vp, C], wpe [n_ctx, C], ln_f w [C], b [C]
 *   unit 1+l    transformer block l: ln_1 w,b [C]; c_attn w [C, 3C], b [3C];
 *               attn c_proj w [C, C], b [C]; ln_2 w,b [C]; c_fc w [C, 4C],
 *               b [4C]; mlp c_proj w [4C, C], b [C]   (12 C^2 + 13 C floats)
 *
 * with matrices in Hugging Face's Conv1D layout [in, out] (y = x W + b).
 * Llama (hs = C / n_head, F = d_ff):
 *
 *   unit 0      embed_tokens [Vp, C]; when tied also norm [C]
 *   unit 1+l    input_layernorm [C]; q_proj [NH hs, C], k_proj, v_proj [NKV hs, C];
 *               o_proj [C, NH hs]; post_attention_layernorm [C];
 *               gate_proj, up_proj [F, C]; down_proj [C, F]
 *   unit L+1    untied only: norm [C], lm_head [Vp, C]
 *
 * with matrices in nn.Linear's layout [out, in] (y = x W^T), so that q|k|v
 * and gate|up, adjacent, are the fused matrices the passes multiply by. A
 * tied head reads the embedding's matrix, so the embedding unit is both ends
 * of the model (embedding and head). An untied head is a unit of its own
 * because of how state moves: a 128k vocabulary makes each of the two
 * matrices as large as several blocks, and in one unit every load for the
 * embedding would move the head too and the reverse; apart, the head is
 * loaded only for the head's work and its step and its place in memory or
 * on the SSD are its own (the head unit is the last unit, so it is the
 * first a placement puts on the SSD: its loads can be read ahead during the
 * forward pass). Safetensors files load with a plain copy per tensor. The
 * vocabulary is padded to Vp (a multiple of 128) for fast matrix products;
 * the padded rows are zero, get zero gradient, and no loss or sample ever
 * looks at them.
 *
 * Compute. The passes of the pieces (embedding, block, head) take a unit's
 * tensors as arguments (gpt_block_w views), never a global model, so a
 * scheduler can stream units from an SSD: the same gpt_block_forward/backward
 * run whether the weights came from RAM or disk. They run on a compute
 * backend (strata/backend.h), passed first, and every array they take is
 * that backend's device memory, except the head's logits (host memory).
 * The whole-model passes (gpt_forward, gpt_forward_backward) keep a host
 * interface on any backend: host weights, gradients, tokens and logits, a
 * workspace of device memory, and the copies between them made per unit
 * (none on a unified backend such as the CPU's, which uses the host arrays
 * in place). All activations are float32, laid out [B, T, ...] row-major.
 *
 *     gpt_config cfg;
 *     gpt_config_from_name(&cfg, "gpt2-124m", &err);
 *     size_t n = gpt_num_params(&cfg);           // floats, padded vocab
 *     float *params = calloc(n, sizeof(float));
 *     gpt_init_params(&cfg, params, seed);
 *     gpt_workspace *ws;
 *     gpt_workspace_create(&ws, compute_backend_cpu(), &cfg, B, T, 1, GPT_FP32, &err);
 *     gpt_weights w = {.precision = GPT_FP32, .f32 = params};
 *     float loss = gpt_forward_backward(ws, w, grads, tokens, targets, B, T, 1.0f);
 *
 * Threading: the CPU backend's kernels use OpenMP across the calling
 * thread's team; every backend is deterministic whatever the thread count (no
 * atomics, a reduction order fixed by the shapes alone).
 */
#ifndef STRATA_MODEL_H
#define STRATA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "strata/backend.h"
#include "strata/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The two architectures of the family. Both are decoder-only transformers
 * built of the same units (an embedding unit and one unit per block, below)
 * and the same passes; the architecture decides what a unit holds and which
 * kernels a pass runs. A zeroed config is GPT-2's. */
typedef enum gpt_arch {
    GPT_ARCH_GPT2 = 0,    /* GPT-2: LayerNorm, learned positions, GELU MLP, biases, tied head */
    GPT_ARCH_LLAMA = 1,   /* Hugging Face's LlamaForCausalLM: RMSNorm, rotary positions,
                             grouped-query attention, SwiGLU MLP, no biases, tied or untied head */
} gpt_arch;

/* Llama 3.1's rotary scaling ("rope_type": "llama3" in config.json);
 * factor 0 means none (the default frequencies). */
typedef struct gpt_rope_scaling {
    float factor, low_freq_factor, high_freq_factor;
    int original_context;   /* original_max_position_embeddings */
} gpt_rope_scaling;

typedef struct gpt_config {
    int n_layer;
    int n_head;
    int d_model;       /* C */
    int n_ctx;         /* the longest sequence the model supports (GPT-2: rows of wpe) */
    int vocab_size;    /* V: real tokens */
    int padded_vocab;  /* Vp: V rounded up to a multiple of 128 (set by gpt_config_check) */
    gpt_arch arch;
    /* Set by gpt_config_check for GPT-2 (n_head, 4C, tied, 1e-5) when left 0;
     * given for Llama. */
    int n_kv_head;     /* key/value heads: n_head (multi-head), 1 (multi-query) or between (grouped) */
    int d_ff;          /* F: the MLP's inner width (intermediate_size) */
    int tied;          /* 1: the head's matrix is the token embedding (tie_word_embeddings) */
    float norm_eps;    /* LayerNorm / RMSNorm epsilon */
    float rope_theta;  /* Llama: the rotary base */
    gpt_rope_scaling rope_scaling;   /* Llama */
} gpt_config;

/* "gpt2-124m" (also "gpt2"), "gpt2-350m", "gpt2-774m", "gpt2-1.5b", and the
 * small shapes "gpt2-tiny" (about 0.5M block params, for tests) and
 * "gpt2-mini" (6 layers of 384, about 10M block params plus 19M embedding),
 * all at context 1024; and, for sizing runs by simulation, the GPT-3 paper's
 * / OPT's shapes with the GPT-2 architecture and vocabulary at context 2048:
 * "gpt-6.7b" (32 layers of 4096, 32 heads), "gpt-13b" (40 x 5120, 40),
 * "gpt-30b" (48 x 7168, 56), "gpt-65b" (80 x 8192, 64: LLaMA-65B's depth and
 * width) and "gpt-175b" (96 x 12288, 96). Llama: "llama-tiny" and
 * "llama-mini" (GPT-2's vocabulary, for tests and demos), "smollm2-135m",
 * "smollm2-360m", "llama-3.2-1b", "llama-3.2-3b" (with Llama 3.1's rotary
 * scaling), "llama-3-8b" and "llama-3-70b", as their config.json give them. */
st_status gpt_config_from_name(gpt_config *cfg, const char *name, st_error *err);
/* "gpt2" / "llama", as config files and records spell the architecture. */
const char *gpt_arch_name(gpt_arch a);
st_status gpt_arch_parse(const char *name, gpt_arch *out, st_error *err);
/* Validates the shape (positive, d_model divisible by n_head, n_head by
 * n_kv_head, an even head size for Llama's rotary pairs, sane sizes), fills
 * padded_vocab and GPT-2's fixed fields. Every config that reaches a kernel
 * went through here. */
st_status gpt_config_check(gpt_config *cfg, st_error *err);
/* 1 when a and b are the same model shape (every field, after
 * gpt_config_check). */
int gpt_config_same(const gpt_config *a, const gpt_config *b);
/* Lists the known names, comma separated, for help texts. */
const char *gpt_config_names(void);

/* --- parameter layout ---------------------------------------------------- */

enum gpt_block_tensor {
    GPT_LN1_W, GPT_LN1_B, GPT_QKV_W, GPT_QKV_B, GPT_ATTPROJ_W, GPT_ATTPROJ_B,
    GPT_LN2_W, GPT_LN2_B, GPT_FC_W, GPT_FC_B, GPT_FCPROJ_W, GPT_FCPROJ_B,
    GPT_BLOCK_TENSORS
};
enum gpt_embed_tensor { GPT_WTE, GPT_WPE, GPT_LNF_W, GPT_LNF_B, GPT_EMBED_TENSORS };
/* Llama's: Hugging Face's tensors, in nn.Linear's layout [out, in]. */
enum llama_block_tensor {
    LLAMA_ATTN_NORM, LLAMA_Q, LLAMA_K, LLAMA_V, LLAMA_O, LLAMA_MLP_NORM, LLAMA_GATE, LLAMA_UP, LLAMA_DOWN,
    LLAMA_BLOCK_TENSORS
};
enum llama_embed_tensor { LLAMA_EMBED, LLAMA_NORM /* tied only */ };
enum llama_head_tensor { LLAMA_HEAD_NORM, LLAMA_HEAD, LLAMA_HEAD_TENSORS };   /* the head unit (untied) */

typedef struct gpt_tensor_info {
    const char *name;   /* Hugging Face name (a block's without "h.N." / "model.layers.N."):
                           "attn.c_attn.weight", "wte.weight", "self_attn.q_proj.weight" */
    size_t offset;      /* floats from the start of the unit */
    size_t numel;       /* floats in the unit (wte: padded rows included) */
    int ndim;
    int64_t shape[2];   /* the Hugging Face shape (wte: real vocab rows) */
    int decay;          /* 1 if AdamW applies weight decay (matrices and embeddings) */
} gpt_tensor_info;

/* Number of tensors in unit u, and tensor i of unit u. */
int gpt_unit_tensor_count(const gpt_config *cfg, int unit);
gpt_tensor_info gpt_unit_tensor(const gpt_config *cfg, int unit, int i);

int gpt_num_units(const gpt_config *cfg);                 /* n_layer + 1, + 1 with an untied head */
/* The unit the head's pass reads and accumulates into: 0 when tied (the
 * embedding unit), else n_layer + 1. */
int gpt_head_unit(const gpt_config *cfg);
/* 1 for units 1..n_layer, the transformer blocks. */
int gpt_unit_is_block(const gpt_config *cfg, int unit);
size_t gpt_unit_numel(const gpt_config *cfg, int unit);
size_t gpt_unit_offset(const gpt_config *cfg, int unit);  /* floats from the start */
size_t gpt_num_params(const gpt_config *cfg);             /* floats, padded vocab */
/* Parameters as a user counts them: real vocab, no padding. */
size_t gpt_num_real_params(const gpt_config *cfg);

typedef struct gpt_block_w {
    float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *attproj_w, *attproj_b;
    float *ln2_w, *ln2_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b;
} gpt_block_w;
typedef struct gpt_embed_w {
    float *wte, *wpe, *lnf_w, *lnf_b;
    float *head;   /* the head's [Vp, C] matrix: wte when tied, else the head unit's lm_head */
} gpt_embed_w;

/* Views of a unit's floats (weights or gradients alike). Llama's views use
 * the same fields: ln1_w/ln2_w the RMSNorm gains, qkv_w the fused q|k|v rows,
 * attproj_w o_proj, fc_w the fused gate|up rows, fcproj_w down_proj, lnf_w
 * the final norm; its biases, wpe and lnf_b are NULL. */
gpt_block_w gpt_block_view(const gpt_config *cfg, float *unit);
/* The embedding unit's view (wte, wpe; when tied also the head's fields);
 * the head unit's view (lnf_w, lnf_b, head: what the head's pass reads),
 * the embedding unit's when tied. Fields a unit does not hold are NULL. */
gpt_embed_w gpt_embed_view(const gpt_config *cfg, float *unit);
gpt_embed_w gpt_head_view(const gpt_config *cfg, float *head_unit);

/* Something that fills unit u's gpt_unit_numel floats (weights read from a
 * checkpoint, or from a store): where a model too large for memory comes
 * from, one unit at a time. */
typedef st_status (*gpt_unit_reader)(void *ctx, int unit, float *out, st_error *err);

/* GPT-2 initialization from a seed: N(0, 0.02) for matrices and embeddings,
 * N(0, 0.02/sqrt(2 L)) for the two projections into the residual stream,
 * zero biases, unit LayerNorm gains, zero padded vocabulary rows. Each unit
 * draws from its own stream, so the result is the same however it is split. */
void gpt_init_params(const gpt_config *cfg, float *params, uint64_t seed);
/* The same for unit u alone (gpt_unit_numel floats), so that a model too
 * large for memory can be initialized unit by unit. */
void gpt_init_unit(const gpt_config *cfg, int unit, float *unit_params, uint64_t seed);

/* Model FLOPs of one training step (forward + backward, no recomputation)
 * for B*T tokens: 6 per parameter-token for the matrix products plus the
 * attention scores, the usual accounting behind "model FLOP/s". */
double gpt_train_flops(const gpt_config *cfg, int B, int T);

/* --- activations --------------------------------------------------------- */

/* What a block's backward needs from its forward. With recomputation only
 * the block input is kept and these are rebuilt inside backward. */
typedef struct gpt_block_acts {
    float *ln1;        /* [B, T, C]   ln_1 output */
    float *ln1_mean;   /* [B, T] */
    float *ln1_rstd;   /* [B, T] */
    float *qkv;        /* [B, T, 3C] */
    float *att;        /* [B, NH, T, T] softmax probabilities (upper triangle unused) */
    float *atty;       /* [B, T, C]   attention output before c_proj */
    float *res2;       /* [B, T, C]   residual stream after attention */
    float *ln2;        /* [B, T, C] */
    float *ln2_mean;   /* [B, T] */
    float *ln2_rstd;   /* [B, T] */
    float *fch;        /* [B, T, 4C]  c_fc output, before GELU */
    float *fch_gelu;   /* [B, T, 4C] */
} gpt_block_acts;

size_t gpt_block_acts_numel(const gpt_config *cfg, int B, int T);
gpt_block_acts gpt_block_acts_view(const gpt_config *cfg, int B, int T, float *mem);

/* Scratch floats that gpt_block_backward needs beside its arguments. */
size_t gpt_block_scratch_numel(const gpt_config *cfg, int B, int T);
/* Rows of logits the head computes at once: its scratch is at most this
 * many rows of Vp floats whatever B*T is, and its products run at this size
 * (what the simulator charges them at). */
#define GPT_HEAD_CHUNK_ROWS 1024
/* Scratch floats for gpt_head_forward_backward at B*T rows. */
size_t gpt_head_scratch_numel(const gpt_config *cfg, int B, int T);

/* --- forward and backward ------------------------------------------------ */

/* ST_EINVAL naming the first of tokens[0..n) that is not a token id of the
 * model (negative, or at or above vocab_size): what the passes below
 * assume of their tokens, checked where tokens come in. */
st_status gpt_check_tokens(const gpt_config *cfg, const int32_t *tokens, size_t n, st_error *err);

/* The pieces of the model, each a sequence of be's ops. Every weight,
 * gradient, activation, scratch, token and target pointer here is device
 * memory of be (on the CPU backend, any host memory). */

/* x0[B,T,C] = wte[tokens] + wpe[0..T). Token ids must be < vocab_size. */
void gpt_embed_forward(const compute_backend *be, const gpt_config *cfg, const gpt_embed_w *w, int B, int T,
                       const int32_t *tokens, float *x0);
/* g->wte[tokens] += dx0, g->wpe[0..T) += sum over batch of dx0. */
void gpt_embed_backward(const compute_backend *be, const gpt_config *cfg, gpt_embed_w *g, int B, int T,
                        const int32_t *tokens, const float *dx0);

/* y[B,T,C] = block(x[B,T,C]); fills acts. y may not alias x. */
void gpt_block_forward(const compute_backend *be, const gpt_config *cfg, const gpt_block_w *w, int B, int T,
                       const float *x, float *y, gpt_block_acts *acts);
/* Given dy = dLoss/dy, accumulates the weight gradients into g (+=) and
 * writes dx = dLoss/dx. dx may alias dy. acts must hold this block's forward
 * for the same x. scratch: gpt_block_scratch_numel floats. */
void gpt_block_backward(const compute_backend *be, const gpt_config *cfg, const gpt_block_w *w, gpt_block_w *g,
                        int B, int T, const float *x, const gpt_block_acts *acts, const float *dy, float *dx,
                        float *scratch);

/* The head: ln_f, logits = ln_f(x) wte^T over the real vocabulary, and the
 * mean cross-entropy against targets. Returns the mean loss over B*T,
 * summed on the device by be->sum (0 when targets is NULL: logits only, no
 * backward; dx, if given, is zeroed). If dx is not NULL, also backpropagates
 * loss * grad_scale: accumulates into g->head, g->lnf_w, g->lnf_b and writes
 * dx[B,T,C]. scratch: gpt_head_scratch_numel floats.
 * logits, when not NULL, is HOST memory receiving [B, T, Vp] (padded columns
 * undefined), in a forward only (dx NULL): on a unified backend the chunks
 * of logits are computed straight into it; otherwise each chunk is computed
 * in scratch and copied out with to_host. */
float gpt_head_forward_backward(const compute_backend *be, const gpt_config *cfg, const gpt_embed_w *w,
                                gpt_embed_w *g, int B, int T, const float *x, const int32_t *targets,
                                float grad_scale, float *dx, float *logits, float *scratch);

/* --- whole-model passes over one micro-batch ---------------------------------- */

typedef enum gpt_precision {
    GPT_FP32 = 0,        /* everything float32 */
    GPT_MIXED_BF16 = 1,  /* compute reads bf16 weights (widened per unit);
                            activations, gradients, master weights float32 */
} gpt_precision;

/* "fp32" or "mixed" (also "bf16"); ST_EINVAL naming the value otherwise. */
st_status gpt_precision_parse(const char *name, gpt_precision *out, st_error *err);
const char *gpt_precision_name(gpt_precision p);

/* The weights that compute reads: f32 in GPT_FP32, bf16 in GPT_MIXED_BF16,
 * each gpt_num_params long in the unit layout above. */
typedef struct gpt_weights {
    gpt_precision precision;
    const float *f32;
    const st_bf16 *bf16;
} gpt_weights;

/* Activations and scratch for micro-batches of up to B x T tokens, in device
 * memory of the backend the workspace is created on; the whole-model passes
 * run there. With recompute, forward keeps only each block's input and
 * backward rebuilds the block's activations just before its backward (about
 * a third more compute, activation memory of one block instead of all).
 *
 * The passes below take host arrays on any backend. On a unified backend
 * they are used in place: fp32 weights as they are, bf16 weights widened
 * into a device buffer per unit, gradients accumulated straight into
 * `grads`, logits computed into `logits`. Otherwise the workspace also holds
 * device copies, each unit crossing when it is used: the unit's weights
 * (copied in, then widened in mixed precision), its gradients (copied in,
 * accumulated, copied back: the += holds), the tokens and targets. Those
 * extra buffers are allocated only on such a backend. */
typedef struct gpt_workspace gpt_workspace;

/* Bytes gpt_workspace_create allocates on be (device buffers and the
 * workspace's own host struct). */
size_t gpt_workspace_bytes(const compute_backend *be, const gpt_config *cfg, int B, int T, int recompute,
                           gpt_precision precision);
st_status gpt_workspace_create(gpt_workspace **out, const compute_backend *be, const gpt_config *cfg, int B, int T,
                               int recompute, gpt_precision precision, st_error *err);
void gpt_workspace_free(gpt_workspace *ws);

/* Forward: returns the mean loss over the B*T targets (0 if targets is
 * NULL); logits, if not NULL, receives [B, T, Vp]. All arrays are host
 * memory. B, T at most the workspace's (else NaN, and nothing is computed);
 * token ids must be < vocab_size (callers check input files). */
float gpt_forward(gpt_workspace *ws, gpt_weights w, const int32_t *tokens, const int32_t *targets,
                  int B, int T, float *logits);
/* Forward and backward: grads (gpt_num_params floats) += d(loss * grad_scale)/dw.
 * Returns the mean loss of this micro-batch (NaN, grads untouched, if B or T
 * exceed the workspace's). */
float gpt_forward_backward(gpt_workspace *ws, gpt_weights w, float *grads, const int32_t *tokens,
                           const int32_t *targets, int B, int T, float grad_scale);

/* --- generation with a cache of keys and values ------------------------------------ */

/* A decoder runs the model one new token at a time without recomputing the
 * context: it keeps every layer's keys and values of the tokens so far (a
 * kv_cache, strata/generate.h) on its backend, so a step runs each block on
 * one row (matrix-vector products) and its attention reads the cached keys
 * and values of every earlier position.
 *
 *     gpt_decoder *dec;
 *     gpt_decoder_create(&dec, compute_backend_cpu(), &cfg, cfg.n_ctx, GPT_FP32, &err);
 *     gpt_decoder_prefill(dec, w, prompt, n_prompt, logits);   // logits [Vp]: after the last prompt token
 *     for (;;) {
 *         int32_t next = sampler_pick(s, logits);
 *         gpt_decoder_step(dec, w, next, logits);                // logits after `next`
 *     }
 *     gpt_decoder_free(dec);
 *
 * The logits are those of gpt_forward over the same window at its last
 * position (to float rounding: other summation orders), for the last
 * position only: the LM head, the largest product, runs on one row.
 *
 * Both architectures: GPT-2 adds wpe at the cache position; Llama starts
 * its rotations there, so each cached key keeps the rotation of the
 * position it was written at, and the cache holds n_kv_head heads (grouped
 * queries read them as attention does).
 *
 * The context limit. GPT-2's positions are absolute (wpe): the keys and
 * values of a token depend on its position, so a full cache cannot slide
 * by one. (Llama's rotations make scores depend only on the distance, so
 * its cache could slide; it follows the same policy, which is what the
 * tests hold both to.) A step on a cache that holds max_len tokens starts the window
 * over instead: the window becomes the last gpt_decoder_keep(max_len) =
 * max(1, max_len / 2) tokens of the sequence, the new one included, at
 * positions 0.., recomputed in one prefill. Half is the trade: a recompute
 * every max_len / 2 tokens (batched products over max_len / 2 rows, a few
 * steps' time), and at least max_len / 2 tokens of context for every token.
 * tools/gpt2_reference.generate_greedy does the same, and the tests check
 * the logits against gpt_forward over the same window across it.
 *
 * Prefill runs the tokens through in chunks of GPT_DECODER_CHUNK rows
 * (batched products; the activations are chunk-sized whatever the prompt).
 *
 * Memory, all allocated by create (gpt_decoder_bytes says how much): the
 * cache, 2 L max_len NKV hs floats (gpt2-124m at 1024: 72 MiB); one chunk's
 * activations (GPT-2: 15 C + 2 floats a row) and attention probabilities (NH
 * chunk max_len floats); the tokens of the window (host); on a backend that
 * is not unified, or in mixed precision, one unit's f32 weights and one
 * row of logits, as gpt_forward's workspace holds.
 *
 * Weights are gpt_forward's: host memory in the unit layout, fp32 read in
 * place on the CPU backend. In mixed precision each unit is widened per
 * pass, and on a backend that is not unified each unit is copied in per
 * pass (correct; a GPU backend would keep them resident). Deterministic
 * for any thread count, as the backend's ops are. */
typedef struct gpt_decoder gpt_decoder;

#define GPT_DECODER_CHUNK 256

/* Tokens the window keeps when a full cache of max_len starts over. */
int gpt_decoder_keep(int max_len);

/* Bytes gpt_decoder_create allocates, device and host. */
size_t gpt_decoder_bytes(const compute_backend *be, const gpt_config *cfg, int max_len, gpt_precision precision);
/* A decoder whose cache holds max_len tokens, 1 <= max_len <= cfg->n_ctx. */
st_status gpt_decoder_create(gpt_decoder **out, const compute_backend *be, const gpt_config *cfg, int max_len,
                             gpt_precision precision, st_error *err);
void gpt_decoder_free(gpt_decoder *d);

/* Starts over with tokens[0..n) (n >= 1): the last max_len of them when n
 * is larger. logits (host, Vp floats, padded columns undefined) receives
 * the logits after the last token. Returns the tokens the cache holds: min(n,
 * max_len); 0 when n < 1 or w's precision is not the decoder's (nothing
 * done). Token ids must be < vocab_size (gpt_check_tokens). */
int gpt_decoder_prefill(gpt_decoder *d, gpt_weights w, const int32_t *tokens, size_t n, float *logits);
/* Appends one token and writes the logits after it. Returns 1 when the
 * cache was full and the window started over (see above), 0 otherwise, -1
 * when nothing was prefilled yet or w's precision is not the decoder's. */
int gpt_decoder_step(gpt_decoder *d, gpt_weights w, int32_t token, float *logits);
/* Tokens the cache holds now (the window), and the window itself (host
 * memory, gpt_decoder_len entries, valid until the next call). */
int gpt_decoder_len(const gpt_decoder *d);
const int32_t *gpt_decoder_window(const gpt_decoder *d);

/* dst[n] = bf16(src[n]) over host arrays (threaded): the compute copy of the
 * weights in mixed precision, written by the optimizer and loaders. It is
 * the CPU backend's f32_to_bf16 op too; widening back happens on the device
 * (be->bf16_to_f32), per unit, before compute. */
void gpt_f32_to_bf16(const float *src, st_bf16 *dst, size_t n);

#ifdef __cplusplus
}
#endif
#endif
