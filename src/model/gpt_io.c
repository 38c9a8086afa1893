/* gpt_io.c - Hugging Face checkpoints (GPT-2 and Llama) in and out: model
 * directories, single files and sharded ones, config.json, streamed one
 * unit at a time. strata/gpt_io.h states what is accepted. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strata/fs.h"
#include "strata/gpt_io.h"

/* config.json and the index are small by nature; anything larger is not one. */
#define CONFIG_MAX_BYTES (1u << 20)
#define INDEX_MAX_BYTES (64u << 20)
#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
/* Bytes of a repeated tied head compared at once against the embedding. */
#define COMPARE_CHUNK (4u << 20)

void gpt_hf_tensor_name(const gpt_config *cfg, int unit, const char *suffix, char *out, size_t cap) {
    if (!gpt_unit_is_block(cfg, unit)) snprintf(out, cap, "%s", suffix);
    else snprintf(out, cap, cfg->arch == GPT_ARCH_LLAMA ? "model.layers.%d.%s" : "h.%d.%s", unit - 1, suffix);
}

/* Tensors of a config in unit order: unit 0's, each block's, then a head
 * unit's (tensors of units before u, plus i). */
static size_t flat_index(const gpt_config *cfg, int u, int i) {
    if (u == 0) return (size_t)i;
    return (size_t)gpt_unit_tensor_count(cfg, 0) + (size_t)(u - 1) * (size_t)gpt_unit_tensor_count(cfg, 1) +
           (size_t)i;
}
static size_t tensor_total(const gpt_config *cfg) {
    const int last = gpt_num_units(cfg) - 1;
    return flat_index(cfg, last, gpt_unit_tensor_count(cfg, last));
}

/* ---- config.json --------------------------------------------------------------------- */

/* An integer field in [lo, hi]: *out set, 1 if present, 0 if absent; -1 (err
 * filled) if present and not such an integer. */
static int json_int(const cJSON *root, const char *key, long lo, long hi, long *out, const char *path, st_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi) {
        st_fail(err, ST_ECORRUPT, "%s: \"%s\" must be an integer in [%ld, %ld]", path, key, lo, hi);
        return -1;
    }
    *out = (long)v->valuedouble;
    return 1;
}

static int json_number(const cJSON *root, const char *key, double *out, const char *path, st_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        st_fail(err, ST_ECORRUPT, "%s: \"%s\" must be a number", path, key);
        return -1;
    }
    *out = v->valuedouble;
    return 1;
}

/* A boolean field; absent gives dflt. -1 if present and not a boolean. */
static int json_bool(const cJSON *root, const char *key, int dflt, const char *path, st_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return dflt;
    if (!cJSON_IsBool(v)) {
        st_fail(err, ST_ECORRUPT, "%s: \"%s\" must be true or false", path, key);
        return -1;
    }
    return cJSON_IsTrue(v);
}

static st_status llama_rope_scaling(const cJSON *root, const char *path, gpt_rope_scaling *out, st_error *err) {
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    *out = (gpt_rope_scaling){0};
    if (!rs || cJSON_IsNull(rs)) return ST_OK;
    if (!cJSON_IsObject(rs)) return st_fail(err, ST_ECORRUPT, "%s: \"rope_scaling\" must be an object or null", path);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!type) type = cJSON_GetObjectItemCaseSensitive(rs, "type");
    const char *t = cJSON_GetStringValue(type);
    if (t && !strcmp(t, "default")) return ST_OK;
    if (!t || strcmp(t, "llama3"))
        return st_fail(err, ST_EUNSUPPORTED, "%s: rope_scaling of type \"%s\" is not supported (only \"llama3\" and "
                       "\"default\")", path, t ? t : "?");
    double factor = 0, lo = 0, hi = 0;
    long orig = 0;
    if (json_number(rs, "factor", &factor, path, err) != 1 || json_number(rs, "low_freq_factor", &lo, path, err) != 1 ||
        json_number(rs, "high_freq_factor", &hi, path, err) != 1 ||
        json_int(rs, "original_max_position_embeddings", 1, 1 << 24, &orig, path, err) != 1)
        return err && err->status ? err->status
                                  : st_fail(err, ST_ECORRUPT, "%s: rope_scaling \"llama3\" needs factor, "
                                            "low_freq_factor, high_freq_factor and original_max_position_embeddings",
                                            path);
    *out = (gpt_rope_scaling){.factor = (float)factor, .low_freq_factor = (float)lo, .high_freq_factor = (float)hi,
                              .original_context = (int)orig};
    return ST_OK;
}

/* LlamaForCausalLM's config.json into cfg (its fields and their defaults as
 * transformers' LlamaConfig has them), refusing what Strata does not compute. */
static st_status llama_config(const cJSON *root, const char *path, gpt_config *cfg, st_error *err) {
    static const struct { const char *key; long lo, hi; } need[] = {
        {"hidden_size", 1, 65536}, {"intermediate_size", 1, 1 << 20}, {"num_hidden_layers", 1, 1024},
        {"num_attention_heads", 1, 65536}, {"vocab_size", 2, 1 << 24}, {"max_position_embeddings", 1, 1 << 24},
    };
    long v[6];
    for (int k = 0; k < 6; k++) {
        int r = json_int(root, need[k].key, need[k].lo, need[k].hi, &v[k], path, err);
        if (r < 0) return err->status;
        if (r == 0) return st_fail(err, ST_ECORRUPT, "%s: missing \"%s\"", path, need[k].key);
    }
    long kv = v[3], head_dim = 0;
    double eps = 1e-6, theta = 10000.0;
    if (json_int(root, "num_key_value_heads", 1, 65536, &kv, path, err) < 0 ||
        json_int(root, "head_dim", 1, 65536, &head_dim, path, err) < 0 ||
        json_number(root, "rms_norm_eps", &eps, path, err) < 0 || json_number(root, "rope_theta", &theta, path, err) < 0)
        return err->status;
    if (head_dim && head_dim * v[3] != v[0])
        return st_fail(err, ST_EUNSUPPORTED, "%s: head_dim %ld is not hidden_size / num_attention_heads (%ld / %ld); "
                       "only that head size is supported", path, head_dim, v[0], v[3]);
    const char *act = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "hidden_act"));
    if (act && strcmp(act, "silu"))
        return st_fail(err, ST_EUNSUPPORTED, "%s: hidden_act \"%s\" is not supported (only \"silu\")", path, act);
    static const char *const off[] = {"attention_bias", "mlp_bias"};
    for (int k = 0; k < 2; k++) {
        int b = json_bool(root, off[k], 0, path, err);
        if (b < 0) return err->status;
        if (b) return st_fail(err, ST_EUNSUPPORTED, "%s: \"%s\": true is not supported (Llama without biases)", path,
                              off[k]);
    }
    long tp = 1;
    if (json_int(root, "pretraining_tp", 1, 1024, &tp, path, err) < 0) return err->status;
    if (tp != 1) return st_fail(err, ST_EUNSUPPORTED, "%s: pretraining_tp %ld is not supported (only 1)", path, tp);
    const int tied = json_bool(root, "tie_word_embeddings", 0, path, err);
    if (tied < 0) return err->status;
    *cfg = (gpt_config){.arch = GPT_ARCH_LLAMA, .d_model = (int)v[0], .d_ff = (int)v[1], .n_layer = (int)v[2],
                        .n_head = (int)v[3], .vocab_size = (int)v[4], .n_ctx = (int)v[5], .n_kv_head = (int)kv,
                        .norm_eps = (float)eps, .rope_theta = (float)theta, .tied = tied};
    st_status s = llama_rope_scaling(root, path, &cfg->rope_scaling, err);
    if (s != ST_OK) return s;
    st_error e = {0};
    if ((s = gpt_config_check(cfg, &e)) != ST_OK) return st_fail(err, ST_ECORRUPT, "%s: %s", path, e.msg);
    return ST_OK;
}

/* What config.json says: the architecture (GPT-2 when there is no file),
 * Llama's whole shape, GPT-2's n_head (0 if it does not say). */
typedef struct hf_config {
    int found;
    gpt_arch arch;
    gpt_config llama;
    int gpt2_n_head;
} hf_config;

static st_status read_config_json(const char *path, hf_config *out, st_error *err) {
    *out = (hf_config){0};
    if (access(path, F_OK) != 0) return ST_OK;
    char *text;
    size_t n;
    st_status s = st_read_file(path, CONFIG_MAX_BYTES, &text, &n, err);
    if (s != ST_OK) return s;
    cJSON *root = cJSON_ParseWithLength(text, n);
    free(text);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return st_fail(err, ST_ECORRUPT, "%s: not a JSON object", path);
    }
    out->found = 1;
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "model_type"));
    if (type && !strcmp(type, "llama")) {
        out->arch = GPT_ARCH_LLAMA;
        s = llama_config(root, path, &out->llama, err);
    } else if (!type || !strcmp(type, "gpt2")) {
        long nh = 0;
        if (json_int(root, "n_head", 1, 4096, &nh, path, err) < 0) s = err->status;
        out->gpt2_n_head = (int)nh;
    } else {
        s = st_fail(err, ST_EUNSUPPORTED, "%s: model_type \"%s\" is not supported (gpt2 and llama are)", path, type);
    }
    cJSON_Delete(root);
    return s;
}

/* Shortest decimal that reads back as the same float ("1e-05", not
 * "9.99999975e-06"): config.json is read by people too. */
static void format_float(char *buf, size_t cap, float x) {
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, cap, "%.*g", digits, (double)x);
        if (strtof(buf, NULL) == x) return;
    }
}

/* config.json's torch_dtype: the dtype the weights are stored in. */
static const char *torch_dtype_name(safetensors_dtype dtype) {
    switch (dtype) {
    case SAFETENSORS_BF16: return "bfloat16";
    case SAFETENSORS_F16: return "float16";
    default: return "float32";
    }
}

st_status gpt_write_hf_config(const char *json_path, const gpt_config *cfg, safetensors_dtype dtype, st_error *err) {
    st_atomic_file out;
    FILE *f;
    st_status s = st_atomic_open_stream(&out, json_path, &f, err);
    if (s != ST_OK) return s;
    if (cfg->arch == GPT_ARCH_GPT2) {
        /* GPT-2's <|endoftext|> is the last of its 50257 ids; a vocabulary
         * without it gets no bos/eos (generate would index past the head) */
        char special[96] = "";
        if (cfg->vocab_size > 50256)
            snprintf(special, sizeof special, ",\n  \"bos_token_id\": 50256,\n  \"eos_token_id\": 50256");
        fprintf(f,
                "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
                "  \"vocab_size\": %d,\n  \"n_positions\": %d,\n  \"n_ctx\": %d,\n  \"n_embd\": %d,\n"
                "  \"n_layer\": %d,\n  \"n_head\": %d,\n  \"n_inner\": null,\n"
                "  \"activation_function\": \"gelu_new\",\n  \"layer_norm_epsilon\": 1e-05,\n"
                "  \"tie_word_embeddings\": true,\n  \"torch_dtype\": \"%s\"%s\n}\n",
                cfg->vocab_size, cfg->n_ctx, cfg->n_ctx, cfg->d_model, cfg->n_layer, cfg->n_head,
                torch_dtype_name(dtype), special);
        return st_atomic_commit(&out, err);
    }
    char eps[32], theta[32], scaling[256] = "null";
    format_float(eps, sizeof eps, cfg->norm_eps);
    format_float(theta, sizeof theta, cfg->rope_theta);
    const gpt_rope_scaling *r = &cfg->rope_scaling;
    if (r->factor != 0) {
        char fa[32], lo[32], hi[32];
        format_float(fa, sizeof fa, r->factor);
        format_float(lo, sizeof lo, r->low_freq_factor);
        format_float(hi, sizeof hi, r->high_freq_factor);
        snprintf(scaling, sizeof scaling,
                 "{\"rope_type\": \"llama3\", \"factor\": %s, \"low_freq_factor\": %s, \"high_freq_factor\": %s, "
                 "\"original_max_position_embeddings\": %d}",
                 fa, lo, hi, r->original_context);
    }
    fprintf(f,
            "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
            "  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n"
            "  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n"
            "  \"head_dim\": %d,\n  \"max_position_embeddings\": %d,\n  \"rms_norm_eps\": %s,\n"
            "  \"rope_theta\": %s,\n  \"rope_scaling\": %s,\n  \"tie_word_embeddings\": %s,\n"
            "  \"hidden_act\": \"silu\",\n  \"attention_bias\": false,\n  \"attention_dropout\": 0.0,\n"
            "  \"mlp_bias\": false,\n  \"pretraining_tp\": 1,\n  \"initializer_range\": 0.02,\n"
            "  \"use_cache\": true,\n  \"torch_dtype\": \"%s\"\n}\n",
            cfg->vocab_size, cfg->d_model, cfg->d_ff, cfg->n_layer, cfg->n_head, cfg->n_kv_head,
            cfg->d_model / cfg->n_head, cfg->n_ctx, eps, theta, scaling, cfg->tied ? "true" : "false",
            torch_dtype_name(dtype));
    return st_atomic_commit(&out, err);
}

/* ---- opening a checkpoint ------------------------------------------------------------ */

struct hf_checkpoint {
    gpt_config cfg;
    char dir[PATH_MAX];
    size_t n_files;
    safetensors_file **files;
    const safetensors_tensor **tensor;   /* per flat index: where each of the model's tensors is */
    safetensors_file **file_of;
    const safetensors_tensor *extra_head;   /* a tied head the file repeats (checked equal when read) */
    safetensors_file *extra_head_file;
    uint64_t vocab_fp;
};

void hf_checkpoint_close(hf_checkpoint *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n_files; i++) safetensors_close(c->files[i]);
    free(c->files);
    free(c->tensor);
    free(c->file_of);
    free(c);
}

const gpt_config *hf_checkpoint_config(const hf_checkpoint *c) { return &c->cfg; }
const char *hf_checkpoint_dir(const hf_checkpoint *c) { return c->dir; }
uint64_t hf_checkpoint_vocab_fingerprint(const hf_checkpoint *c) { return c->vocab_fp; }

/* The name without GPT-2's optional "transformer." prefix. */
static const char *unprefixed(const gpt_config *cfg, const char *name) {
    return cfg->arch == GPT_ARCH_GPT2 && !strncmp(name, "transformer.", 12) ? name + 12 : name;
}

/* Buffers that published files carry and that are not parameters. */
static int ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), m = strlen(suffix);
    return n > m && !strcmp(s + n - m, suffix);
}

static int is_ignored_buffer(const gpt_config *cfg, const char *n) {
    if (cfg->arch == GPT_ARCH_LLAMA)
        return !strncmp(n, "model.layers.", 13) && ends_with(n, ".self_attn.rotary_emb.inv_freq");
    return (!strncmp(n, "h.", 2) && ends_with(n, ".attn.bias")) || ends_with(n, ".attn.masked_bias");
}

static st_status expect_shape(const char *path, const safetensors_tensor *t, int ndim, int64_t d0, int64_t d1,
                              st_error *err) {
    int ok = t->ndim == ndim && t->shape[0] == d0 && (ndim < 2 || t->shape[1] == d1);
    if (ok) return ST_OK;
    char got[128] = "", want[64];
    size_t off = 0;
    for (int i = 0; i < t->ndim && off < sizeof got - 24; i++)
        off += (size_t)snprintf(got + off, sizeof got - off, "%s%" PRId64, i ? ", " : "", t->shape[i]);
    if (ndim == 2) snprintf(want, sizeof want, "%" PRId64 ", %" PRId64, d0, d1);
    else snprintf(want, sizeof want, "%" PRId64, d0);
    return st_fail(err, ST_ECORRUPT, "%s: tensor %s has shape [%s], expected [%s]", path, t->name, got, want);
}

static int float_dtype(safetensors_dtype d) {
    return d == SAFETENSORS_F32 || d == SAFETENSORS_BF16 || d == SAFETENSORS_F16 || d == SAFETENSORS_F64;
}

/* Finds a tensor by its Hugging Face name in any of the files (GPT-2's may
 * carry the "transformer." prefix). */
static const safetensors_tensor *find_any(const hf_checkpoint *c, const char *name, safetensors_file **in) {
    for (size_t k = 0; k < c->n_files; k++) {
        const safetensors_tensor *t = safetensors_find(c->files[k], name);
        if (!t && c->cfg.arch == GPT_ARCH_GPT2) {
            char prefixed[256];
            snprintf(prefixed, sizeof prefixed, "transformer.%s", name);
            t = safetensors_find(c->files[k], prefixed);
        }
        if (t) {
            *in = c->files[k];
            return t;
        }
    }
    return NULL;
}

/* GPT-2's shape from its tensors (see the header). */
static st_status gpt2_infer_config(hf_checkpoint *c, int n_head, const char *path, st_error *err) {
    gpt_config probe = {0};
    safetensors_file *in;
    const safetensors_tensor *wte = find_any(c, "wte.weight", &in), *wpe = find_any(c, "wpe.weight", &in);
    if (!wte) {
        safetensors_file *any;
        if (find_any(c, "model.embed_tokens.weight", &any))
            return st_fail(err, ST_EINVAL, "%s: a Llama checkpoint needs its config.json (heads, key/value heads, "
                           "rotary base), beside the weights", path);
        return st_fail(err, ST_ECORRUPT, "%s: missing tensor wte.weight (is this a GPT-2 checkpoint?)", path);
    }
    if (!wpe) return st_fail(err, ST_ECORRUPT, "%s: missing tensor wpe.weight", path);
    if (wte->ndim != 2) return st_fail(err, ST_ECORRUPT, "%s: tensor %s must have 2 dimensions", path, wte->name);
    if (wpe->ndim != 2) return st_fail(err, ST_ECORRUPT, "%s: tensor %s must have 2 dimensions", path, wpe->name);
    int64_t V = wte->shape[0], C = wte->shape[1], n_ctx = wpe->shape[0];
    if (wpe->shape[1] != C) return expect_shape(path, wpe, 2, n_ctx, C, err);
    int n_layer = 0;
    for (size_t k = 0; k < c->n_files; k++)
        for (size_t i = 0; i < safetensors_count(c->files[k]); i++) {
            const char *n = unprefixed(&probe, safetensors_at(c->files[k], i)->name);
            int l;
            char rest[64];
            if (sscanf(n, "h.%d.%63s", &l, rest) == 2 && l >= 0 && l < 100000 && l + 1 > n_layer) n_layer = l + 1;
        }
    if (n_layer == 0) return st_fail(err, ST_ECORRUPT, "%s: no transformer blocks (tensors named h.N.*)", path);
    if (n_head <= 0) n_head = C >= 64 ? (int)(C / 64) : 1;
    if (V > INT32_MAX || C > INT32_MAX || n_ctx > INT32_MAX)
        return st_fail(err, ST_ECORRUPT, "%s: tensor shapes are too large", path);
    c->cfg = (gpt_config){.n_layer = n_layer, .n_head = n_head, .d_model = (int)C, .n_ctx = (int)n_ctx,
                          .vocab_size = (int)V};
    st_error e = {0};
    if (gpt_config_check(&c->cfg, &e) != ST_OK)
        return st_fail(err, ST_ECORRUPT, "%s: inferred configuration is invalid: %s", path, e.msg);
    return ST_OK;
}

/* A shard's file name from the index: a plain name in the directory. */
static int plain_file_name(const char *n) {
    size_t len = strlen(n);
    return len > 12 && len < 256 && !strchr(n, '/') && n[0] != '.' && !strcmp(n + len - 12, ".safetensors");
}

static st_status open_file(hf_checkpoint *c, const char *path, st_error *err) {
    safetensors_file **grown = realloc(c->files, (c->n_files + 1) * sizeof *grown);
    if (!grown) return st_fail(err, ST_ENOMEM, "out of memory");
    c->files = grown;
    st_status s = safetensors_open(&c->files[c->n_files], path, err);
    if (s == ST_OK) c->n_files++;
    return s;
}

/* The shards model.safetensors.index.json names, each opened once. */
static st_status open_index(hf_checkpoint *c, const char *index_path, st_error *err) {
    char *text;
    size_t n;
    st_status s = st_read_file(index_path, INDEX_MAX_BYTES, &text, &n, err);
    if (s != ST_OK) return s;
    cJSON *root = cJSON_ParseWithLength(text, n);
    free(text);
    const cJSON *map = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(root);
        return st_fail(err, ST_ECORRUPT, "%s: no \"weight_map\" object (not a safetensors index)", index_path);
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, map) {
        const char *file = cJSON_GetStringValue(e);
        if (!file || !plain_file_name(file)) {
            s = st_fail(err, ST_ECORRUPT, "%s: tensor %s maps to %s%s%s, not a .safetensors file in the directory",
                        index_path, e->string, file ? "\"" : "", file ? file : "a non-string", file ? "\"" : "");
            break;
        }
        int seen = 0;
        for (size_t k = 0; k < c->n_files && !seen; k++) {
            const char *p = safetensors_path(c->files[k]), *slash = strrchr(p, '/');
            seen = !strcmp(slash ? slash + 1 : p, file);
        }
        if (seen) continue;
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", c->dir, file);
        if ((s = open_file(c, path, err)) != ST_OK) break;
    }
    /* every tensor the index names must be in the shard it names */
    cJSON_ArrayForEach(e, map) {
        if (s != ST_OK) break;
        const char *file = cJSON_GetStringValue(e);
        for (size_t k = 0; k < c->n_files; k++) {
            const char *p = safetensors_path(c->files[k]), *slash = strrchr(p, '/');
            if (strcmp(slash ? slash + 1 : p, file)) continue;
            if (!safetensors_find(c->files[k], e->string))
                s = st_fail(err, ST_ECORRUPT, "%s: names %s for tensor %s, which that file does not hold", index_path,
                            file, e->string);
        }
    }
    cJSON_Delete(root);
    if (s == ST_OK && c->n_files == 0) s = st_fail(err, ST_ECORRUPT, "%s: lists no tensors", index_path);
    return s;
}

/* Every tensor of the model found with its shape and a float dtype; every
 * tensor of the files accounted for. */
static st_status resolve_tensors(hf_checkpoint *c, const char *path, st_error *err) {
    const gpt_config *cfg = &c->cfg;
    const size_t total = tensor_total(cfg);
    c->tensor = calloc(total, sizeof *c->tensor);
    c->file_of = calloc(total, sizeof *c->file_of);
    if (!c->tensor || !c->file_of) return st_fail(err, ST_ENOMEM, "out of memory");
    for (int u = 0; u < gpt_num_units(cfg); u++)
        for (int i = 0; i < gpt_unit_tensor_count(cfg, u); i++) {
            const gpt_tensor_info ti = gpt_unit_tensor(cfg, u, i);
            char name[128];
            gpt_hf_tensor_name(cfg, u, ti.name, name, sizeof name);
            safetensors_file *in = NULL;
            const safetensors_tensor *t = find_any(c, name, &in);
            if (!t) return st_fail(err, ST_ECORRUPT, "%s: missing tensor %s", path, name);
            st_status s = expect_shape(safetensors_path(in), t, ti.ndim, ti.shape[0], ti.shape[1], err);
            if (s != ST_OK) return s;
            if (!float_dtype(t->dtype))
                return st_fail(err, ST_EUNSUPPORTED, "%s: tensor %s has dtype %s; expected F32, BF16 or F16",
                               safetensors_path(in), t->name, safetensors_dtype_name(t->dtype));
            c->tensor[flat_index(cfg, u, i)] = t;
            c->file_of[flat_index(cfg, u, i)] = in;
        }
    /* A tied model's file may repeat the head (transformers writes GPT-2's);
     * it must then equal the embedding, which hf_checkpoint_read_unit checks. */
    const char *head_name = "lm_head.weight";
    safetensors_file *hin = NULL;
    const safetensors_tensor *head = cfg->tied ? find_any(c, head_name, &hin) : NULL;
    if (head) {
        st_status s = expect_shape(safetensors_path(hin), head, 2, cfg->vocab_size, cfg->d_model, err);
        if (s != ST_OK) return s;
        if (!float_dtype(head->dtype))
            return st_fail(err, ST_EUNSUPPORTED, "%s: tensor %s has dtype %s", safetensors_path(hin), head->name,
                           safetensors_dtype_name(head->dtype));
        c->extra_head = head;
        c->extra_head_file = hin;
    }
    /* anything else is not part of this model */
    for (size_t k = 0; k < c->n_files; k++)
        for (size_t i = 0; i < safetensors_count(c->files[k]); i++) {
            const safetensors_tensor *t = safetensors_at(c->files[k], i);
            if (t == head || is_ignored_buffer(cfg, unprefixed(cfg, t->name))) continue;
            int known = 0;
            for (size_t j = 0; j < total && !known; j++) known = c->tensor[j] == t;
            if (!known)
                return st_fail(err, ST_ECORRUPT, "%s: unexpected tensor %s (not part of a %s model of this shape)",
                               safetensors_path(c->files[k]), t->name, gpt_arch_name(cfg->arch));
        }
    return ST_OK;
}

st_status hf_checkpoint_open(hf_checkpoint **out, const char *path, int n_head, st_error *err) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return st_fail_errno(err, errno, "%s", path);
    hf_checkpoint *c = calloc(1, sizeof *c);
    if (!c) return st_fail(err, ST_ENOMEM, "out of memory");
    const int is_dir = S_ISDIR(sb.st_mode);
    if (is_dir) {
        snprintf(c->dir, sizeof c->dir, "%s", path);
    } else {
        const char *slash = strrchr(path, '/');
        if (slash) snprintf(c->dir, sizeof c->dir, "%.*s", (int)(slash - path), path);
        else snprintf(c->dir, sizeof c->dir, ".");
    }
    char config_path[PATH_MAX + 16], index_path[PATH_MAX + 64], single[PATH_MAX + 32];
    snprintf(config_path, sizeof config_path, "%s/config.json", c->dir);
    snprintf(index_path, sizeof index_path, "%s/%s", c->dir, INDEX_NAME);
    snprintf(single, sizeof single, "%s/%s", c->dir, SINGLE_NAME);
    hf_config hc;
    st_status s = read_config_json(config_path, &hc, err);
    if (s == ST_OK) {
        if (!is_dir) s = open_file(c, path, err);
        else if (access(index_path, F_OK) == 0) s = open_index(c, index_path, err);
        else if (access(single, F_OK) == 0) s = open_file(c, single, err);
        else
            s = st_fail(err, ST_ENOENT, "%s: no %s or %s (a Hugging Face model directory holds its weights in one of "
                        "them)", path, SINGLE_NAME, INDEX_NAME);
    }
    if (s == ST_OK && hc.arch == GPT_ARCH_LLAMA) {
        c->cfg = hc.llama;
        if (n_head > 0 && n_head != c->cfg.n_head)
            s = st_fail(err, ST_EINVAL, "--n-head %d: %s says %d heads", n_head, config_path, c->cfg.n_head);
    } else if (s == ST_OK) {
        s = gpt2_infer_config(c, n_head > 0 ? n_head : hc.gpt2_n_head, path, err);
    }
    if (s == ST_OK) s = resolve_tensors(c, path, err);
    const char *fp = s == ST_OK ? safetensors_metadata(c->files[0], GPT_META_VOCAB_FINGERPRINT) : NULL;
    if (fp && !st_parse_hex64(fp, &c->vocab_fp))
        s = st_fail(err, ST_ECORRUPT, "%s: metadata %s is \"%.40s\", not 16 hex digits", safetensors_path(c->files[0]),
                    GPT_META_VOCAB_FINGERPRINT, fp);
    if (s != ST_OK) {
        hf_checkpoint_close(c);
        return s;
    }
    *out = c;
    return ST_OK;
}

/* A tied head a file repeats must be the embedding: compared a chunk at a
 * time, so no second copy of a 128k-row matrix is held. */
static st_status check_repeated_head(hf_checkpoint *c, const float *embed, st_error *err) {
    const safetensors_tensor *h = c->extra_head;
    const uint64_t per = COMPARE_CHUNK / sizeof(float);
    float *piece = malloc(COMPARE_CHUNK);
    if (!piece) return st_fail(err, ST_ENOMEM, "out of memory");
    st_status s = ST_OK;
    for (uint64_t done = 0; done < h->numel && s == ST_OK; done += per) {
        const uint64_t n = h->numel - done < per ? h->numel - done : per;
        s = safetensors_read_f32_range(c->extra_head_file, h, done, piece, n, err);
        if (s == ST_OK && memcmp(piece, embed + done, n * sizeof(float)) != 0)
            s = st_fail(err, ST_EUNSUPPORTED, "%s: lm_head.weight differs from the embedding, but the model ties them; "
                        "only a tied head is supported%s", safetensors_path(c->extra_head_file),
                        c->cfg.arch == GPT_ARCH_LLAMA ? " when config.json says tie_word_embeddings" : " for GPT-2");
    }
    free(piece);
    return s;
}

st_status hf_checkpoint_read_unit(void *ctx, int u, float *out, st_error *err) {
    hf_checkpoint *c = ctx;
    const gpt_config *cfg = &c->cfg;
    memset(out, 0, gpt_unit_numel(cfg, u) * sizeof(float));   /* the padded vocabulary rows */
    for (int i = 0; i < gpt_unit_tensor_count(cfg, u); i++) {
        const size_t k = flat_index(cfg, u, i);
        const safetensors_tensor *t = c->tensor[k];
        st_status s = safetensors_read_f32(c->file_of[k], t, out + gpt_unit_tensor(cfg, u, i).offset, t->numel, err);
        if (s != ST_OK) return s;
    }
    if (u == 0 && c->extra_head) return check_repeated_head(c, out, err);
    return ST_OK;
}

st_status hf_checkpoint_read_all(hf_checkpoint *c, float **params_out, st_error *err) {
    *params_out = NULL;
    const gpt_config *cfg = &c->cfg;
    const size_t n = gpt_num_params(cfg);
    float *params = st_alloc_aligned(64, n * sizeof(float));
    st_status s = params ? ST_OK : st_fail(err, ST_ENOMEM, "%s: out of memory for %zu parameters", c->dir, n);
    for (int u = 0; s == ST_OK && u < gpt_num_units(cfg); u++)
        s = hf_checkpoint_read_unit(c, u, params + gpt_unit_offset(cfg, u), err);
    if (s != ST_OK) {
        st_free_aligned(params);
        return s;
    }
    *params_out = params;
    return ST_OK;
}

st_status gpt_load_safetensors(const char *path, int n_head, gpt_config *cfg, float **params_out, st_error *err) {
    *params_out = NULL;
    hf_checkpoint *c;
    st_status s = hf_checkpoint_open(&c, path, n_head, err);
    if (s != ST_OK) return s;
    *cfg = c->cfg;
    s = hf_checkpoint_read_all(c, params_out, err);
    hf_checkpoint_close(c);
    return s;
}

/* ---- writing ------------------------------------------------------------------------- */

/* Streaming state: which unit is in buf, and where each entry lives. */
typedef struct unit_feed {
    const gpt_config *cfg;
    gpt_unit_reader read_unit;
    void *ctx;
    float *buf;
    int loaded;              /* unit in buf, or -1 */
    size_t first;            /* the global index of the file's entry 0 */
    int *entry_unit;
    size_t *entry_offset;    /* within its unit */
} unit_feed;

static st_status feed_entry(void *ctx, size_t i, const void **data, st_error *err) {
    unit_feed *f = ctx;
    const int u = f->entry_unit[f->first + i];
    if (f->loaded != u) {
        st_status s = f->read_unit(f->ctx, u, f->buf, err);
        if (s != ST_OK) return s;
        f->loaded = u;
    }
    *data = f->buf + f->entry_offset[f->first + i];
    return ST_OK;
}

/* Every tensor of the model in unit order, as safetensors entries of dtype. */
typedef struct model_entries {
    size_t n;
    safetensors_entry *e;
    char (*names)[128];
    unit_feed feed;
} model_entries;

static void entries_free(model_entries *m) {
    free(m->e);
    free(m->names);
    st_free_aligned(m->feed.buf);
    free(m->feed.entry_unit);
    free(m->feed.entry_offset);
}

static st_status entries_of(const gpt_config *cfg, safetensors_dtype dtype, gpt_unit_reader read_unit, void *ctx,
                            model_entries *m, const char *path, st_error *err) {
    *m = (model_entries){0};
    if (dtype != SAFETENSORS_F32 && dtype != SAFETENSORS_BF16 && dtype != SAFETENSORS_F16)
        return st_fail(err, ST_EINVAL, "%s: weights can be saved as F32, BF16 or F16, not %s", path,
                       safetensors_dtype_name(dtype));
    const size_t cap = tensor_total(cfg);
    size_t max_unit = 0;
    for (int u = 0; u < gpt_num_units(cfg); u++)
        if (gpt_unit_numel(cfg, u) > max_unit) max_unit = gpt_unit_numel(cfg, u);
    m->e = calloc(cap, sizeof *m->e);
    m->names = calloc(cap, sizeof *m->names);
    m->feed = (unit_feed){.cfg = cfg, .read_unit = read_unit, .ctx = ctx, .loaded = -1,
                          .buf = st_alloc_aligned(64, max_unit * sizeof(float)),
                          .entry_unit = malloc(cap * sizeof(int)), .entry_offset = malloc(cap * sizeof(size_t))};
    if (!m->e || !m->names || !m->feed.buf || !m->feed.entry_unit || !m->feed.entry_offset) {
        entries_free(m);
        return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    }
    for (int u = 0; u < gpt_num_units(cfg); u++)
        for (int i = 0; i < gpt_unit_tensor_count(cfg, u); i++, m->n++) {
            const gpt_tensor_info ti = gpt_unit_tensor(cfg, u, i);
            gpt_hf_tensor_name(cfg, u, ti.name, m->names[m->n], sizeof m->names[m->n]);
            m->e[m->n] = (safetensors_entry){.name = m->names[m->n], .dtype = dtype, .ndim = ti.ndim,
                                             .shape = {ti.shape[0], ti.shape[1]}, .from_f32 = 1};
            m->feed.entry_unit[m->n] = u;
            m->feed.entry_offset[m->n] = ti.offset;
        }
    return ST_OK;
}

static uint64_t entry_bytes(const safetensors_entry *e) {
    uint64_t n = safetensors_dtype_size(e->dtype);
    for (int d = 0; d < e->ndim; d++) n *= (uint64_t)e->shape[d];
    return n;
}

/* Entries [first, first + n) into one file. */
static st_status write_file(const char *path, model_entries *m, size_t first, size_t n, uint64_t vocab_fingerprint,
                            st_error *err) {
    /* transformers refuses safetensors files without format=pt */
    char fp[17];
    snprintf(fp, sizeof fp, "%016" PRIx64, vocab_fingerprint);
    const char *meta[] = {"format", "pt", vocab_fingerprint ? GPT_META_VOCAB_FINGERPRINT : NULL, fp, NULL};
    m->feed.first = first;
    return safetensors_write_streamed(path, m->e + first, n, meta, feed_entry, &m->feed, err);
}

st_status gpt_save_safetensors_by_unit(const char *path, const gpt_config *cfg, gpt_unit_reader read_unit, void *ctx,
                                       safetensors_dtype dtype, uint64_t vocab_fingerprint, st_error *err) {
    model_entries m;
    st_status s = entries_of(cfg, dtype, read_unit, ctx, &m, path, err);
    if (s != ST_OK) return s;
    s = write_file(path, &m, 0, m.n, vocab_fingerprint, err);
    entries_free(&m);
    return s;
}

typedef struct params_in_memory {
    const gpt_config *cfg;
    const float *params;
} params_in_memory;

static st_status copy_unit(void *ctx, int u, float *out, st_error *err) {
    (void)err;
    const params_in_memory *p = ctx;
    memcpy(out, p->params + gpt_unit_offset(p->cfg, u), gpt_unit_numel(p->cfg, u) * sizeof(float));
    return ST_OK;
}

st_status gpt_save_safetensors(const char *path, const gpt_config *cfg, const float *params, safetensors_dtype dtype,
                               st_error *err) {
    params_in_memory p = {cfg, params};
    return gpt_save_safetensors_by_unit(path, cfg, copy_unit, &p, dtype, 0, err);
}

static int is_shard_name(const char *n) {
    unsigned a, b;
    char tail[32];
    return sscanf(n, "model-%5u-of-%5u%31s", &a, &b, tail) == 3 && !strcmp(tail, ".safetensors");
}

/* Removes what an earlier save left in dir that this one did not write:
 * other shards, a single file replaced by shards, an index no longer used. */
static st_status remove_stale(const char *dir, size_t shards, st_error *err) {
    DIR *d = opendir(dir);
    if (!d) return st_fail_errno(err, errno, "%s", dir);
    st_status s = ST_OK;
    struct dirent *e;
    while ((e = readdir(d)) && s == ST_OK) {
        int stale;
        if (is_shard_name(e->d_name)) {
            unsigned a, b;
            sscanf(e->d_name, "model-%5u-of-%5u", &a, &b);
            stale = shards <= 1 || b != shards;
        } else {
            stale = (!strcmp(e->d_name, SINGLE_NAME) && shards > 1) || (!strcmp(e->d_name, INDEX_NAME) && shards <= 1);
        }
        if (!stale) continue;
        char p[PATH_MAX + 256];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0) s = st_fail_errno(err, errno, "%s: removing what an earlier save left", p);
    }
    closedir(d);
    return s;
}

st_status hf_checkpoint_save(const char *dir, const gpt_config *cfg, gpt_unit_reader read_unit, void *ctx,
                             const hf_save_opts *o, st_error *err) {
    st_status s = st_mkdir_p(dir, err);
    if (s != ST_OK) return s;
    model_entries m;
    if ((s = entries_of(cfg, o->dtype, read_unit, ctx, &m, dir, err)) != ST_OK) return s;
    /* shard boundaries: greedy in unit order, a tensor never split */
    size_t *start = malloc((m.n + 1) * sizeof *start), shards = 0;
    uint64_t total = 0, in_shard = 0;
    if (!start) s = st_fail(err, ST_ENOMEM, "out of memory");
    for (size_t i = 0; s == ST_OK && i < m.n; i++) {
        const uint64_t b = entry_bytes(&m.e[i]);
        if (i == 0 || (o->shard_bytes && in_shard > 0 && in_shard + b > o->shard_bytes)) {
            start[shards++] = i;
            in_shard = 0;
        }
        in_shard += b;
        total += b;
    }
    if (s == ST_OK) start[shards] = m.n;
    char path[PATH_MAX + 64];
    for (size_t k = 0; s == ST_OK && k < shards; k++) {
        if (shards == 1) snprintf(path, sizeof path, "%s/%s", dir, SINGLE_NAME);
        else snprintf(path, sizeof path, "%s/model-%05zu-of-%05zu.safetensors", dir, k + 1, shards);
        s = write_file(path, &m, start[k], start[k + 1] - start[k], o->vocab_fingerprint, err);
    }
    if (s == ST_OK && shards > 1) {
        cJSON *root = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(root, "metadata"),
              *map = cJSON_AddObjectToObject(root, "weight_map");
        cJSON_AddNumberToObject(meta, "total_size", (double)total);
        for (size_t k = 0; k < shards; k++)
            for (size_t i = start[k]; i < start[k + 1]; i++) {
                char file[64];
                snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", k + 1, shards);
                cJSON_AddStringToObject(map, m.names[i], file);
            }
        char *text = cJSON_Print(root);
        cJSON_Delete(root);
        snprintf(path, sizeof path, "%s/%s", dir, INDEX_NAME);
        s = text ? st_write_file_atomic(path, text, strlen(text), err) : st_fail(err, ST_ENOMEM, "out of memory");
        free(text);
    }
    if (s == ST_OK) {
        snprintf(path, sizeof path, "%s/config.json", dir);
        s = gpt_write_hf_config(path, cfg, o->dtype, err);
    }
    if (s == ST_OK) s = remove_stale(dir, shards, err);
    free(start);
    entries_free(&m);
    return s;
}
