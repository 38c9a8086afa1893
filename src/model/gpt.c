/* gpt.c - GPT-2 configurations, the parameter layout, initialization. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "strata/model.h"
#include "model/model_internal.h"

typedef struct named_config {
    const char *name;
    gpt_config c;
} named_config;

#define GPT2(L, H, C, CTX) {.n_layer = L, .n_head = H, .d_model = C, .n_ctx = CTX, .vocab_size = 50257}
#define LLAMA(L, H, KV, C, F, V, CTX, THETA, TIED, EPS)                                                       \
    {.arch = GPT_ARCH_LLAMA, .n_layer = L, .n_head = H, .n_kv_head = KV, .d_model = C, .d_ff = F, .vocab_size = V, \
     .n_ctx = CTX, .rope_theta = THETA, .tied = TIED, .norm_eps = EPS}
/* Llama 3.2's rotary scaling, as its config.json gives it */
#define LLAMA32_ROPE {.factor = 32, .low_freq_factor = 1, .high_freq_factor = 4, .original_context = 8192}

/* GPT-2's sizes (context 1024), and the GPT-3 paper's / OPT's larger shapes
 * with the GPT-2 architecture and vocabulary at context 2048, for sizing
 * runs by simulation (65B: LLaMA-65B's depth and width). The Llama shapes
 * are those of the published models' config.json files. */
static const named_config named_configs[] = {
    {"gpt2-124m", GPT2(12, 12, 768, 1024)},
    {"gpt2", GPT2(12, 12, 768, 1024)},
    {"gpt2-350m", GPT2(24, 16, 1024, 1024)},
    {"gpt2-774m", GPT2(36, 20, 1280, 1024)},
    {"gpt2-1.5b", GPT2(48, 25, 1600, 1024)},
    {"gpt2-mini", GPT2(6, 6, 384, 1024)},
    {"gpt2-tiny", GPT2(2, 4, 128, 1024)},
    {"gpt-6.7b", GPT2(32, 32, 4096, 2048)},
    {"gpt-13b", GPT2(40, 40, 5120, 2048)},
    {"gpt-30b", GPT2(48, 56, 7168, 2048)},
    {"gpt-65b", GPT2(80, 64, 8192, 2048)},
    {"gpt-175b", GPT2(96, 96, 12288, 2048)},
    /* small Llama shapes with GPT-2's vocabulary, for tests and demos on the default corpus */
    {"llama-tiny", LLAMA(2, 4, 2, 128, 352, 50257, 1024, 10000.0f, 0, 1e-5f)},
    {"llama-mini", LLAMA(6, 6, 2, 384, 1024, 50257, 1024, 10000.0f, 1, 1e-5f)},
    {"smollm2-135m", LLAMA(30, 9, 3, 576, 1536, 49152, 8192, 100000.0f, 1, 1e-5f)},
    {"smollm2-360m", LLAMA(32, 15, 5, 960, 2560, 49152, 8192, 100000.0f, 1, 1e-5f)},
    {"llama-3.2-1b", LLAMA(16, 32, 8, 2048, 8192, 128256, 131072, 500000.0f, 1, 1e-5f)},
    {"llama-3.2-3b", LLAMA(28, 24, 8, 3072, 8192, 128256, 131072, 500000.0f, 1, 1e-5f)},
    {"llama-3-8b", LLAMA(32, 32, 8, 4096, 14336, 128256, 8192, 500000.0f, 0, 1e-5f)},
    {"llama-3-70b", LLAMA(80, 64, 8, 8192, 28672, 128256, 8192, 500000.0f, 0, 1e-5f)},
};

const char *gpt_config_names(void) {
    return "gpt2-124m (gpt2), gpt2-350m, gpt2-774m, gpt2-1.5b, gpt2-mini, gpt2-tiny, gpt-6.7b, gpt-13b, gpt-30b, gpt-65b, "
           "gpt-175b, llama-tiny, llama-mini, smollm2-135m, smollm2-360m, llama-3.2-1b, llama-3.2-3b, llama-3-8b, "
           "llama-3-70b";
}

st_status gpt_config_from_name(gpt_config *cfg, const char *name, st_error *err) {
    for (size_t i = 0; i < sizeof named_configs / sizeof named_configs[0]; i++) {
        const named_config *n = &named_configs[i];
        if (strcmp(name, n->name) != 0) continue;
        *cfg = n->c;
        if (!strncmp(name, "llama-3.2-", 10)) cfg->rope_scaling = (gpt_rope_scaling)LLAMA32_ROPE;
        return gpt_config_check(cfg, err);
    }
    return st_fail(err, ST_EINVAL, "unknown model '%s' (known: %s)", name, gpt_config_names());
}

const char *gpt_arch_name(gpt_arch a) { return a == GPT_ARCH_LLAMA ? "llama" : "gpt2"; }

st_status gpt_arch_parse(const char *name, gpt_arch *out, st_error *err) {
    if (!strcmp(name, "gpt2")) *out = GPT_ARCH_GPT2;
    else if (!strcmp(name, "llama")) *out = GPT_ARCH_LLAMA;
    else return st_fail(err, ST_EINVAL, "architecture must be gpt2 or llama, not '%s'", name);
    return ST_OK;
}

st_status gpt_config_check(gpt_config *cfg, st_error *err) {
    if (cfg->arch != GPT_ARCH_GPT2 && cfg->arch != GPT_ARCH_LLAMA)
        return st_fail(err, ST_EINVAL, "unknown architecture %d", (int)cfg->arch);
    if (cfg->n_layer < 1 || cfg->n_layer > 1024)
        return st_fail(err, ST_EINVAL, "n_layer %d is out of range [1, 1024]", cfg->n_layer);
    if (cfg->n_head < 1 || cfg->d_model < 1 || cfg->d_model > 65536)
        return st_fail(err, ST_EINVAL, "d_model %d / n_head %d are out of range", cfg->d_model, cfg->n_head);
    if (cfg->d_model % cfg->n_head)
        return st_fail(err, ST_EINVAL, "d_model %d is not divisible by n_head %d", cfg->d_model, cfg->n_head);
    if (cfg->n_ctx < 1 || cfg->n_ctx > 1 << 20)
        return st_fail(err, ST_EINVAL, "context length %d is out of range [1, %d]", cfg->n_ctx, 1 << 20);
    if (cfg->vocab_size < 2 || cfg->vocab_size > 1 << 24)
        return st_fail(err, ST_EINVAL, "vocab size %d is out of range [2, %d]", cfg->vocab_size, 1 << 24);
    if (cfg->arch == GPT_ARCH_GPT2) {
        /* fixed by the architecture, so derived here whatever they held (a
         * config whose width changed keeps its MLP at 4 d_model) */
        if (cfg->rope_theta != 0 || cfg->rope_scaling.factor != 0)
            return st_fail(err, ST_EINVAL, "GPT-2 has no rotary embeddings");
        cfg->n_kv_head = cfg->n_head;
        cfg->d_ff = 4 * cfg->d_model;
        cfg->tied = 1;
        if (cfg->norm_eps == 0) cfg->norm_eps = 1e-5f;
    } else {
        if (cfg->n_kv_head < 1 || cfg->n_head % cfg->n_kv_head)
            return st_fail(err, ST_EINVAL, "n_head %d is not a multiple of n_kv_head %d", cfg->n_head, cfg->n_kv_head);
        if ((cfg->d_model / cfg->n_head) % 2)
            return st_fail(err, ST_EINVAL, "the head size %d is odd: rotary embeddings turn pairs of dimensions",
                           cfg->d_model / cfg->n_head);
        if (cfg->d_ff < 1 || cfg->d_ff > 1 << 20)
            return st_fail(err, ST_EINVAL, "d_ff %d is out of range [1, %d]", cfg->d_ff, 1 << 20);
        if (!(cfg->rope_theta > 1) || !(cfg->rope_theta < 1e12f))
            return st_fail(err, ST_EINVAL, "rope_theta %g is out of range (1, 1e12)", (double)cfg->rope_theta);
        const gpt_rope_scaling *r = &cfg->rope_scaling;
        if (r->factor != 0 && (!(r->factor >= 1) || !(r->low_freq_factor > 0) ||
                               !(r->high_freq_factor > r->low_freq_factor) || r->original_context < 1))
            return st_fail(err, ST_EINVAL, "rope scaling (factor %g, low %g, high %g, original context %d) is out of "
                           "range", (double)r->factor, (double)r->low_freq_factor, (double)r->high_freq_factor,
                           r->original_context);
        if (cfg->tied != 0 && cfg->tied != 1) return st_fail(err, ST_EINVAL, "tied must be 0 or 1");
    }
    if (!(cfg->norm_eps > 0) || !(cfg->norm_eps < 1))
        return st_fail(err, ST_EINVAL, "norm epsilon %g is out of range (0, 1)", (double)cfg->norm_eps);
    cfg->padded_vocab = (cfg->vocab_size + 127) / 128 * 128;
    return ST_OK;
}

int gpt_config_same(const gpt_config *a, const gpt_config *b) {
    const gpt_rope_scaling *ra = &a->rope_scaling, *rb = &b->rope_scaling;
    return a->arch == b->arch && a->n_layer == b->n_layer && a->n_head == b->n_head && a->d_model == b->d_model &&
           a->n_ctx == b->n_ctx && a->vocab_size == b->vocab_size && a->n_kv_head == b->n_kv_head &&
           a->d_ff == b->d_ff && a->tied == b->tied && a->norm_eps == b->norm_eps && a->rope_theta == b->rope_theta &&
           ra->factor == rb->factor && ra->low_freq_factor == rb->low_freq_factor &&
           ra->high_freq_factor == rb->high_freq_factor && ra->original_context == rb->original_context;
}

st_status gpt_check_tokens(const gpt_config *cfg, const int32_t *tokens, size_t n, st_error *err) {
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= cfg->vocab_size)
            return st_fail(err, ST_EINVAL, "token %ld is %d, not a token id of a model with a vocabulary of %d", (long)i,
                           (int)tokens[i], cfg->vocab_size);
    return ST_OK;
}

/* --- layout ---------------------------------------------------------------- */

int gpt_num_units(const gpt_config *cfg) { return cfg->n_layer + 1 + !cfg->tied; }

int gpt_head_unit(const gpt_config *cfg) { return cfg->tied ? 0 : cfg->n_layer + 1; }

int gpt_unit_is_block(const gpt_config *cfg, int unit) { return unit >= 1 && unit <= cfg->n_layer; }

/* What a unit holds: the embedding, a block, or a head of its own. */
typedef enum unit_role { ROLE_EMBED, ROLE_BLOCK, ROLE_HEAD } unit_role;
static unit_role role_of(const gpt_config *cfg, int unit) {
    return gpt_unit_is_block(cfg, unit) ? ROLE_BLOCK : unit == 0 ? ROLE_EMBED : ROLE_HEAD;
}

int gpt_unit_tensor_count(const gpt_config *cfg, int unit) {
    const unit_role r = role_of(cfg, unit);
    if (cfg->arch == GPT_ARCH_LLAMA) return r == ROLE_BLOCK ? LLAMA_BLOCK_TENSORS : r == ROLE_HEAD ? LLAMA_HEAD_TENSORS
                                                                            : cfg->tied ? 2 : 1;
    return r == ROLE_EMBED ? GPT_EMBED_TENSORS : GPT_BLOCK_TENSORS;
}

/* A tensor's place in a unit from the sizes of those before it. */
typedef struct tensor_spec {
    const char *name;
    int64_t rows, cols;   /* cols 0: a vector of rows floats */
    size_t stored_rows;   /* rows as stored (the vocabulary padded); 0: rows */
    int decay;
} tensor_spec;

static gpt_tensor_info place(const tensor_spec *specs, int i) {
    gpt_tensor_info t = {0};
    for (int k = 0; k <= i; k++) {
        const size_t rows = specs[k].stored_rows ? specs[k].stored_rows : (size_t)specs[k].rows;
        const size_t n = rows * (size_t)(specs[k].cols ? specs[k].cols : 1);
        if (k < i) t.offset += n;
        else t.numel = n;
    }
    t.name = specs[i].name;
    t.ndim = specs[i].cols ? 2 : 1;
    t.shape[0] = specs[i].rows;
    t.shape[1] = specs[i].cols;
    t.decay = specs[i].decay;
    return t;
}

/* Llama's units hold Hugging Face's tensors in nn.Linear's layout [out, in],
 * in an order that makes the fused products free: q, k and v are one
 * [(NH + 2 NKV) hs, C] matrix, gate and up one [2F, C] matrix. */
static gpt_tensor_info llama_unit_tensor(const gpt_config *cfg, int unit, int i) {
    const int64_t C = cfg->d_model, hs = C / cfg->n_head, F = cfg->d_ff, V = cfg->vocab_size;
    const int64_t q = cfg->n_head * hs, kv = cfg->n_kv_head * hs;
    const unit_role r = role_of(cfg, unit);
    if (r == ROLE_EMBED) {
        /* tied: the final norm here too, beside the matrix the head reads */
        const tensor_spec e[] = {
            {"model.embed_tokens.weight", V, C, (size_t)cfg->padded_vocab, 1},
            {"model.norm.weight", C, 0, 0, 0},
        };
        return place(e, i);
    }
    if (r == ROLE_HEAD) {
        const tensor_spec h[LLAMA_HEAD_TENSORS] = {
            {"model.norm.weight", C, 0, 0, 0},
            {"lm_head.weight", V, C, (size_t)cfg->padded_vocab, 1},
        };
        return place(h, i);
    }
    const tensor_spec b[LLAMA_BLOCK_TENSORS] = {
        {"input_layernorm.weight", C, 0, 0, 0},
        {"self_attn.q_proj.weight", q, C, 0, 1},
        {"self_attn.k_proj.weight", kv, C, 0, 1},
        {"self_attn.v_proj.weight", kv, C, 0, 1},
        {"self_attn.o_proj.weight", C, q, 0, 1},
        {"post_attention_layernorm.weight", C, 0, 0, 0},
        {"mlp.gate_proj.weight", F, C, 0, 1},
        {"mlp.up_proj.weight", F, C, 0, 1},
        {"mlp.down_proj.weight", C, F, 0, 1},
    };
    return place(b, i);
}

gpt_tensor_info gpt_unit_tensor(const gpt_config *cfg, int unit, int i) {
    if (cfg->arch == GPT_ARCH_LLAMA) return llama_unit_tensor(cfg, unit, i);
    const int64_t C = cfg->d_model;
    if (unit == 0) {
        const tensor_spec e[] = {
            {"wte.weight", cfg->vocab_size, C, (size_t)cfg->padded_vocab, 1},
            {"wpe.weight", cfg->n_ctx, C, 0, 1},
            {"ln_f.weight", C, 0, 0, 0},
            {"ln_f.bias", C, 0, 0, 0},
        };
        return place(e, i);
    }
    /* Conv1D layout [in, out] */
    const tensor_spec b[GPT_BLOCK_TENSORS] = {
        {"ln_1.weight", C, 0, 0, 0},         {"ln_1.bias", C, 0, 0, 0},
        {"attn.c_attn.weight", C, 3 * C, 0, 1}, {"attn.c_attn.bias", 3 * C, 0, 0, 0},
        {"attn.c_proj.weight", C, C, 0, 1},  {"attn.c_proj.bias", C, 0, 0, 0},
        {"ln_2.weight", C, 0, 0, 0},         {"ln_2.bias", C, 0, 0, 0},
        {"mlp.c_fc.weight", C, 4 * C, 0, 1}, {"mlp.c_fc.bias", 4 * C, 0, 0, 0},
        {"mlp.c_proj.weight", 4 * C, C, 0, 1}, {"mlp.c_proj.bias", C, 0, 0, 0},
    };
    return place(b, i);
}

size_t gpt_unit_numel(const gpt_config *cfg, int unit) {
    const gpt_tensor_info t = gpt_unit_tensor(cfg, unit, gpt_unit_tensor_count(cfg, unit) - 1);
    return t.offset + t.numel;
}

/* The embedding unit, the blocks, then a head of its own: the head's offset
 * is the one after the last block's. */
size_t gpt_unit_offset(const gpt_config *cfg, int unit) {
    if (unit == 0) return 0;
    return gpt_unit_numel(cfg, 0) + (size_t)(unit - 1) * gpt_unit_numel(cfg, 1);
}

size_t gpt_end_units_numel(const gpt_config *cfg) {
    const size_t e = gpt_unit_numel(cfg, 0), h = gpt_unit_numel(cfg, gpt_head_unit(cfg));
    return e > h ? e : h;
}

size_t gpt_num_params(const gpt_config *cfg) {
    const int last = gpt_num_units(cfg) - 1;
    return gpt_unit_offset(cfg, last) + gpt_unit_numel(cfg, last);
}

size_t gpt_num_real_params(const gpt_config *cfg) {
    const size_t padded_matrices = cfg->tied ? 1 : 2;   /* the embedding, and an untied head */
    return gpt_num_params(cfg) - padded_matrices * (size_t)(cfg->padded_vocab - cfg->vocab_size) * (size_t)cfg->d_model;
}

gpt_block_w gpt_block_view(const gpt_config *cfg, float *u) {
    if (cfg->arch == GPT_ARCH_LLAMA) {
        float *p[LLAMA_BLOCK_TENSORS];
        for (int i = 0; i < LLAMA_BLOCK_TENSORS; i++) p[i] = u + gpt_unit_tensor(cfg, 1, i).offset;
        /* the fused matrices start at their first part; no biases */
        return (gpt_block_w){.ln1_w = p[LLAMA_ATTN_NORM], .qkv_w = p[LLAMA_Q], .attproj_w = p[LLAMA_O],
                             .ln2_w = p[LLAMA_MLP_NORM], .fc_w = p[LLAMA_GATE], .fcproj_w = p[LLAMA_DOWN]};
    }
    float *p[GPT_BLOCK_TENSORS];
    for (int i = 0; i < GPT_BLOCK_TENSORS; i++) p[i] = u + gpt_unit_tensor(cfg, 1, i).offset;
    return (gpt_block_w){p[GPT_LN1_W], p[GPT_LN1_B], p[GPT_QKV_W], p[GPT_QKV_B],
                         p[GPT_ATTPROJ_W], p[GPT_ATTPROJ_B], p[GPT_LN2_W], p[GPT_LN2_B],
                         p[GPT_FC_W], p[GPT_FC_B], p[GPT_FCPROJ_W], p[GPT_FCPROJ_B]};
}

gpt_embed_w gpt_embed_view(const gpt_config *cfg, float *u) {
    if (cfg->arch == GPT_ARCH_LLAMA) {
        float *embed = u + gpt_unit_tensor(cfg, 0, LLAMA_EMBED).offset;
        if (!cfg->tied) return (gpt_embed_w){.wte = embed};
        return (gpt_embed_w){.wte = embed, .lnf_w = u + gpt_unit_tensor(cfg, 0, LLAMA_NORM).offset, .head = embed};
    }
    float *p[GPT_EMBED_TENSORS];
    for (int i = 0; i < GPT_EMBED_TENSORS; i++) p[i] = u + gpt_unit_tensor(cfg, 0, i).offset;
    return (gpt_embed_w){p[GPT_WTE], p[GPT_WPE], p[GPT_LNF_W], p[GPT_LNF_B], p[GPT_WTE]};
}

gpt_embed_w gpt_head_view(const gpt_config *cfg, float *u) {
    if (cfg->tied) return gpt_embed_view(cfg, u);
    const int h = gpt_head_unit(cfg);
    return (gpt_embed_w){.lnf_w = u + gpt_unit_tensor(cfg, h, LLAMA_HEAD_NORM).offset,
                         .head = u + gpt_unit_tensor(cfg, h, LLAMA_HEAD).offset};
}

/* --- initialization -------------------------------------------------------- */

void gpt_init_unit(const gpt_config *cfg, int u, float *base, uint64_t seed) {
    /* GPT-2 scales the two projections into the residual stream by
     * 1/sqrt(2L); Hugging Face initializes Llama's matrices all alike. */
    const float std = 0.02f, proj_std = cfg->arch == GPT_ARCH_GPT2 ? 0.02f / sqrtf(2.0f * (float)cfg->n_layer) : std;
    st_rng r;
    st_rng_seed(&r, seed * 1000003u + (uint64_t)u);
    memset(base, 0, gpt_unit_numel(cfg, u) * sizeof(float));
    for (int i = 0; i < gpt_unit_tensor_count(cfg, u); i++) {
        gpt_tensor_info t = gpt_unit_tensor(cfg, u, i);
        float *p = base + t.offset;
        /* the real rows only: the padded vocabulary stays zero */
        const size_t n = (size_t)t.shape[0] * (size_t)(t.ndim == 2 ? t.shape[1] : 1);
        if (t.ndim == 2) {
            const int is_proj = gpt_unit_is_block(cfg, u) && cfg->arch == GPT_ARCH_GPT2 && (i == GPT_ATTPROJ_W || i == GPT_FCPROJ_W);
            st_rng_normal_fill(&r, p, n, is_proj ? proj_std : std);
        } else if (strstr(t.name, ".weight")) {   /* a norm's gain; biases stay zero */
            for (size_t k = 0; k < n; k++) p[k] = 1.0f;
        }
    }
}

void gpt_init_params(const gpt_config *cfg, float *params, uint64_t seed) {
    for (int u = 0; u < gpt_num_units(cfg); u++) gpt_init_unit(cfg, u, params + gpt_unit_offset(cfg, u), seed);
}

double gpt_train_flops(const gpt_config *cfg, int B, int T) {
    const double C = cfg->d_model, L = cfg->n_layer, tokens = (double)B * T;
    const double hs = C / cfg->n_head, q = cfg->n_head * hs, kv = cfg->n_kv_head * hs, F = cfg->d_ff;
    /* per block: q, k, v and the output projection, then the MLP's two (GPT-2)
     * or three (SwiGLU) matrices; 12 C^2 for GPT-2 */
    const double mlp = cfg->arch == GPT_ARCH_LLAMA ? 3.0 * C * F : 2.0 * C * F;
    double matmul_params = L * (C * (q + 2 * kv) + q * C + mlp) + (double)cfg->vocab_size * C;
    /* attention scores and weighted sum: 2 * 2 * T * (NH hs) per token per layer
     * forward (causal: half of the T x T is useful, counted in full as is customary) */
    double attn = L * 2.0 * 2.0 * T * q;
    return 3.0 * tokens * (2.0 * matmul_params + attn);
}

st_status gpt_precision_parse(const char *name, gpt_precision *out, st_error *err) {
    if (!strcmp(name, "fp32")) *out = GPT_FP32;
    else if (!strcmp(name, "mixed") || !strcmp(name, "bf16")) *out = GPT_MIXED_BF16;
    else return st_fail(err, ST_EINVAL, "precision must be fp32 or mixed, not '%s'", name);
    return ST_OK;
}

const char *gpt_precision_name(gpt_precision p) { return p == GPT_MIXED_BF16 ? "mixed" : "fp32"; }
