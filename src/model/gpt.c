/* gpt.c - GPT-2 configurations, the parameter layout, initialization. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "strata/model.h"

typedef struct named_config {
    const char *name;
    int n_layer, n_head, d_model, n_ctx;
} named_config;

/* GPT-2's sizes (context 1024), and the GPT-3 paper's / OPT's larger shapes
 * with the GPT-2 architecture and vocabulary at context 2048, for sizing
 * runs by simulation (65B: LLaMA-65B's depth and width). */
static const named_config named_configs[] = {
    {"gpt2-124m", 12, 12, 768, 1024},
    {"gpt2", 12, 12, 768, 1024},
    {"gpt2-350m", 24, 16, 1024, 1024},
    {"gpt2-774m", 36, 20, 1280, 1024},
    {"gpt2-1.5b", 48, 25, 1600, 1024},
    {"gpt2-mini", 6, 6, 384, 1024},
    {"gpt2-tiny", 2, 4, 128, 1024},
    {"gpt-6.7b", 32, 32, 4096, 2048},
    {"gpt-13b", 40, 40, 5120, 2048},
    {"gpt-30b", 48, 56, 7168, 2048},
    {"gpt-65b", 80, 64, 8192, 2048},
    {"gpt-175b", 96, 96, 12288, 2048},
};

const char *gpt_config_names(void) {
    return "gpt2-124m (gpt2), gpt2-350m, gpt2-774m, gpt2-1.5b, gpt2-mini, gpt2-tiny, gpt-6.7b, gpt-13b, gpt-30b, gpt-65b, "
           "gpt-175b";
}

st_status gpt_config_from_name(gpt_config *cfg, const char *name, st_error *err) {
    for (size_t i = 0; i < sizeof named_configs / sizeof named_configs[0]; i++) {
        const named_config *n = &named_configs[i];
        if (strcmp(name, n->name) != 0) continue;
        *cfg = (gpt_config){.n_layer = n->n_layer, .n_head = n->n_head, .d_model = n->d_model,
                            .n_ctx = n->n_ctx, .vocab_size = 50257};
        return gpt_config_check(cfg, err);
    }
    return st_fail(err, ST_EINVAL, "unknown model '%s' (known: %s)", name, gpt_config_names());
}

st_status gpt_config_check(gpt_config *cfg, st_error *err) {
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
    cfg->padded_vocab = (cfg->vocab_size + 127) / 128 * 128;
    return ST_OK;
}

st_status gpt_check_tokens(const gpt_config *cfg, const int32_t *tokens, size_t n, st_error *err) {
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= cfg->vocab_size)
            return st_fail(err, ST_EINVAL, "token %ld is %d, not a token id of a model with a vocabulary of %d", (long)i,
                           (int)tokens[i], cfg->vocab_size);
    return ST_OK;
}

/* --- layout ---------------------------------------------------------------- */

int gpt_num_units(const gpt_config *cfg) { return cfg->n_layer + 1; }

int gpt_unit_tensor_count(int unit) { return unit == 0 ? GPT_EMBED_TENSORS : GPT_BLOCK_TENSORS; }

gpt_tensor_info gpt_unit_tensor(const gpt_config *cfg, int unit, int i) {
    const size_t C = (size_t)cfg->d_model;
    gpt_tensor_info t = {0};
    if (unit == 0) {
        static const char *names[] = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"};
        const size_t numel[] = {(size_t)cfg->padded_vocab * C, (size_t)cfg->n_ctx * C, C, C};
        t.name = names[i];
        for (int k = 0; k < i; k++) t.offset += numel[k];
        t.numel = numel[i];
        if (i <= GPT_WPE) {
            t.ndim = 2;
            t.shape[0] = i == GPT_WTE ? cfg->vocab_size : cfg->n_ctx;
            t.shape[1] = (int64_t)C;
            t.decay = 1;
        } else {
            t.ndim = 1;
            t.shape[0] = (int64_t)C;
        }
        return t;
    }
    /* Block tensors: name, rows (in), cols (out); rows 0 means a vector. */
    static const struct { const char *name; int rows, cols; } b[GPT_BLOCK_TENSORS] = {
        {"ln_1.weight", 0, 1},        {"ln_1.bias", 0, 1},
        {"attn.c_attn.weight", 1, 3}, {"attn.c_attn.bias", 0, 3},
        {"attn.c_proj.weight", 1, 1}, {"attn.c_proj.bias", 0, 1},
        {"ln_2.weight", 0, 1},        {"ln_2.bias", 0, 1},
        {"mlp.c_fc.weight", 1, 4},    {"mlp.c_fc.bias", 0, 4},
        {"mlp.c_proj.weight", 4, 1},  {"mlp.c_proj.bias", 0, 1},
    };
    for (int k = 0; k <= i; k++) {
        size_t n = b[k].rows ? (size_t)b[k].rows * C * (size_t)b[k].cols * C : (size_t)b[k].cols * C;
        if (k < i) t.offset += n;
        else t.numel = n;
    }
    t.name = b[i].name;
    if (b[i].rows) {
        t.ndim = 2;
        t.shape[0] = (int64_t)(b[i].rows * C);
        t.shape[1] = (int64_t)(b[i].cols * C);
        t.decay = 1;
    } else {
        t.ndim = 1;
        t.shape[0] = (int64_t)(b[i].cols * C);
    }
    return t;
}

size_t gpt_unit_numel(const gpt_config *cfg, int unit) {
    const size_t C = (size_t)cfg->d_model;
    if (unit == 0) return ((size_t)cfg->padded_vocab + (size_t)cfg->n_ctx + 2) * C;
    return 12 * C * C + 13 * C;
}

size_t gpt_unit_offset(const gpt_config *cfg, int unit) {
    if (unit == 0) return 0;
    return gpt_unit_numel(cfg, 0) + (size_t)(unit - 1) * gpt_unit_numel(cfg, 1);
}

size_t gpt_num_params(const gpt_config *cfg) { return gpt_unit_offset(cfg, cfg->n_layer + 1); }

size_t gpt_num_real_params(const gpt_config *cfg) {
    return gpt_num_params(cfg) - (size_t)(cfg->padded_vocab - cfg->vocab_size) * (size_t)cfg->d_model;
}

gpt_block_w gpt_block_view(const gpt_config *cfg, float *u) {
    float *p[GPT_BLOCK_TENSORS];
    for (int i = 0; i < GPT_BLOCK_TENSORS; i++) p[i] = u + gpt_unit_tensor(cfg, 1, i).offset;
    return (gpt_block_w){p[GPT_LN1_W], p[GPT_LN1_B], p[GPT_QKV_W], p[GPT_QKV_B],
                         p[GPT_ATTPROJ_W], p[GPT_ATTPROJ_B], p[GPT_LN2_W], p[GPT_LN2_B],
                         p[GPT_FC_W], p[GPT_FC_B], p[GPT_FCPROJ_W], p[GPT_FCPROJ_B]};
}

gpt_embed_w gpt_embed_view(const gpt_config *cfg, float *u) {
    float *p[GPT_EMBED_TENSORS];
    for (int i = 0; i < GPT_EMBED_TENSORS; i++) p[i] = u + gpt_unit_tensor(cfg, 0, i).offset;
    return (gpt_embed_w){p[GPT_WTE], p[GPT_WPE], p[GPT_LNF_W], p[GPT_LNF_B]};
}

/* --- initialization -------------------------------------------------------- */

void gpt_init_unit(const gpt_config *cfg, int u, float *base, uint64_t seed) {
    const float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)cfg->n_layer);
    st_rng r;
    st_rng_seed(&r, seed * 1000003u + (uint64_t)u);
    memset(base, 0, gpt_unit_numel(cfg, u) * sizeof(float));
    for (int i = 0; i < gpt_unit_tensor_count(u); i++) {
        gpt_tensor_info t = gpt_unit_tensor(cfg, u, i);
        float *p = base + t.offset;
        size_t n = t.numel;
        if (u == 0 && i == GPT_WTE) n = (size_t)cfg->vocab_size * (size_t)cfg->d_model;
        if (t.ndim == 2) {
            int is_proj = u > 0 && (i == GPT_ATTPROJ_W || i == GPT_FCPROJ_W);
            st_rng_normal_fill(&r, p, n, is_proj ? proj_std : std);
        } else if (strstr(t.name, "ln_") && strstr(t.name, ".weight")) {
            for (size_t k = 0; k < n; k++) p[k] = 1.0f;
        }
    }
}

void gpt_init_params(const gpt_config *cfg, float *params, uint64_t seed) {
    for (int u = 0; u < gpt_num_units(cfg); u++) gpt_init_unit(cfg, u, params + gpt_unit_offset(cfg, u), seed);
}

double gpt_train_flops(const gpt_config *cfg, int B, int T) {
    const double C = cfg->d_model, L = cfg->n_layer, tokens = (double)B * T;
    double matmul_params = L * 12.0 * C * C + (double)cfg->vocab_size * C;
    /* attention scores and weighted sum: 2 * 2 * T * C per token per layer forward
     * (causal: half of the T x T is useful, counted in full as is customary) */
    double attn = L * 2.0 * 2.0 * T * C;
    return 3.0 * tokens * (2.0 * matmul_params + attn);
}

st_status gpt_precision_parse(const char *name, gpt_precision *out, st_error *err) {
    if (!strcmp(name, "fp32")) *out = GPT_FP32;
    else if (!strcmp(name, "mixed") || !strcmp(name, "bf16")) *out = GPT_MIXED_BF16;
    else return st_fail(err, ST_EINVAL, "precision must be fp32 or mixed, not '%s'", name);
    return ST_OK;
}

const char *gpt_precision_name(gpt_precision p) { return p == GPT_MIXED_BF16 ? "mixed" : "fp32"; }
