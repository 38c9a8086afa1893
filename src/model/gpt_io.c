/* gpt_io.c - GPT-2 weights in and out of safetensors files with the Hugging
 * Face names, and the config.json that transformers reads beside them. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/fs.h"
#include "strata/gpt_io.h"

/* The name without its optional "transformer." prefix. */
static const char *hf_name(const char *name) {
    return strncmp(name, "transformer.", 12) == 0 ? name + 12 : name;
}

/* Buffers that published GPT-2 files carry and that are not parameters. */
static int is_ignored_buffer(const char *n) {
    size_t len = strlen(n);
    return (len > 10 && !strcmp(n + len - 10, ".attn.bias") && !strncmp(n, "h.", 2)) ||
           (len > 17 && !strcmp(n + len - 17, ".attn.masked_bias"));
}

/* n_head from config.json beside the file, 0 if there is none. */
static st_status n_head_from_config_json(const char *model_path, int *n_head, st_error *err) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", model_path);
    char *slash = strrchr(dir, '/');
    char json_path[4200];
    if (slash) {
        *slash = 0;
        snprintf(json_path, sizeof json_path, "%s/config.json", dir);
    } else {
        snprintf(json_path, sizeof json_path, "config.json");
    }
    FILE *f = fopen(json_path, "rb");
    if (!f) return ST_OK;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *root = cJSON_Parse(buf);
    if (!root) return st_fail(err, ST_ECORRUPT, "%s: not valid JSON", json_path);
    const cJSON *nh = cJSON_GetObjectItemCaseSensitive(root, "n_head");
    st_status s = ST_OK;
    if (nh) {
        if (!cJSON_IsNumber(nh) || nh->valuedouble < 1 || nh->valuedouble > 4096 || nh->valuedouble != (int)nh->valuedouble)
            s = st_fail(err, ST_ECORRUPT, "%s: n_head must be a positive integer", json_path);
        else *n_head = (int)nh->valuedouble;
    }
    cJSON_Delete(root);
    return s;
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

static const safetensors_tensor *find_hf(const safetensors_file *f, const char *name) {
    const safetensors_tensor *t = safetensors_find(f, name);
    if (t) return t;
    char prefixed[256];
    snprintf(prefixed, sizeof prefixed, "transformer.%s", name);
    return safetensors_find(f, prefixed);
}

static st_status infer_config(safetensors_file *f, const char *path, int n_head, gpt_config *cfg, st_error *err) {
    const safetensors_tensor *wte = find_hf(f, "wte.weight"), *wpe = find_hf(f, "wpe.weight");
    if (!wte) return st_fail(err, ST_ECORRUPT, "%s: missing tensor wte.weight (is this a GPT-2 checkpoint?)", path);
    if (!wpe) return st_fail(err, ST_ECORRUPT, "%s: missing tensor wpe.weight", path);
    if (wte->ndim != 2) return st_fail(err, ST_ECORRUPT, "%s: tensor %s must have 2 dimensions", path, wte->name);
    if (wpe->ndim != 2) return st_fail(err, ST_ECORRUPT, "%s: tensor %s must have 2 dimensions", path, wpe->name);
    int64_t V = wte->shape[0], C = wte->shape[1], n_ctx = wpe->shape[0];
    if (wpe->shape[1] != C) return expect_shape(path, wpe, 2, n_ctx, C, err);
    int n_layer = 0;
    for (size_t i = 0; i < safetensors_count(f); i++) {
        const char *n = hf_name(safetensors_at(f, i)->name);
        int l;
        char rest[64];
        if (sscanf(n, "h.%d.%63s", &l, rest) == 2 && l >= 0 && l < 100000 && l + 1 > n_layer) n_layer = l + 1;
    }
    if (n_layer == 0) return st_fail(err, ST_ECORRUPT, "%s: no transformer blocks (tensors named h.N.*)", path);
    if (n_head <= 0) {
        st_status s = n_head_from_config_json(path, &n_head, err);
        if (s != ST_OK) return s;
    }
    if (n_head <= 0) n_head = C >= 64 ? (int)(C / 64) : 1;
    if (V > INT32_MAX || C > INT32_MAX || n_ctx > INT32_MAX)
        return st_fail(err, ST_ECORRUPT, "%s: tensor shapes are too large", path);
    *cfg = (gpt_config){.n_layer = n_layer, .n_head = n_head, .d_model = (int)C, .n_ctx = (int)n_ctx,
                        .vocab_size = (int)V};
    st_status s = gpt_config_check(cfg, err);
    if (s != ST_OK) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        return st_fail(err, s, "%s: inferred configuration is invalid: %s", path, msg);
    }
    return ST_OK;
}

st_status gpt_load_safetensors(const char *path, int n_head, gpt_config *cfg, float **params_out,
                               st_error *err) {
    *params_out = NULL;
    safetensors_file *f;
    st_status s = safetensors_open(&f, path, err);
    if (s != ST_OK) return s;
    s = infer_config(f, path, n_head, cfg, err);
    float *params = NULL;
    if (s == ST_OK) {
        size_t n = gpt_num_params(cfg);
        params = st_alloc_aligned(64, n * sizeof(float));
        if (!params) s = st_fail(err, ST_ENOMEM, "%s: out of memory for %zu parameters", path, n);
        else memset(params, 0, n * sizeof(float));
    }
    /* Every parameter must be present with its exact shape. */
    for (int u = 0; s == ST_OK && u < gpt_num_units(cfg); u++) {
        for (int i = 0; s == ST_OK && i < gpt_unit_tensor_count(u); i++) {
            gpt_tensor_info ti = gpt_unit_tensor(cfg, u, i);
            char name[128];
            if (u == 0) snprintf(name, sizeof name, "%s", ti.name);
            else snprintf(name, sizeof name, "h.%d.%s", u - 1, ti.name);
            const safetensors_tensor *t = find_hf(f, name);
            if (!t) {
                s = st_fail(err, ST_ECORRUPT, "%s: missing tensor %s", path, name);
                break;
            }
            s = expect_shape(path, t, ti.ndim, ti.shape[0], ti.shape[1], err);
            if (s != ST_OK) break;
            if (t->dtype != SAFETENSORS_F32 && t->dtype != SAFETENSORS_BF16 && t->dtype != SAFETENSORS_F16 &&
                t->dtype != SAFETENSORS_F64) {
                s = st_fail(err, ST_EUNSUPPORTED, "%s: tensor %s has dtype %s; expected F32, BF16 or F16", path,
                            t->name, safetensors_dtype_name(t->dtype));
                break;
            }
            s = safetensors_read_f32(f, t, params + gpt_unit_offset(cfg, u) + ti.offset, t->numel, err);
        }
    }
    /* Anything else must be a known buffer or a tied LM head. */
    for (size_t i = 0; s == ST_OK && i < safetensors_count(f); i++) {
        const safetensors_tensor *t = safetensors_at(f, i);
        const char *n = hf_name(t->name);
        if (is_ignored_buffer(n)) continue;
        if (!strcmp(t->name, "lm_head.weight")) {
            s = expect_shape(path, t, 2, cfg->vocab_size, cfg->d_model, err);
            float *head = s == ST_OK ? malloc(t->numel * sizeof(float)) : NULL;
            if (s == ST_OK && !head) s = st_fail(err, ST_ENOMEM, "%s: out of memory reading %s", path, t->name);
            if (s == ST_OK) s = safetensors_read_f32(f, t, head, t->numel, err);
            if (s == ST_OK && memcmp(head, params, t->numel * sizeof(float)) != 0)
                s = st_fail(err, ST_EUNSUPPORTED, "%s: lm_head.weight differs from wte.weight; only a tied LM head "
                            "is supported", path);
            free(head);
            continue;
        }
        int known = 0, l;
        char rest[128];
        if (sscanf(n, "h.%d.%127s", &l, rest) == 2 && l >= 0 && l < cfg->n_layer) {
            for (int k = 0; k < GPT_BLOCK_TENSORS; k++)
                if (!strcmp(rest, gpt_unit_tensor(cfg, 1, k).name)) known = 1;
            char canon[160];
            snprintf(canon, sizeof canon, "h.%d.%s", l, rest);
            if (strcmp(canon, n) != 0) known = 0;   /* "h.01.x" is not "h.1.x" */
        } else {
            for (int k = 0; k < GPT_EMBED_TENSORS; k++)
                if (!strcmp(n, gpt_unit_tensor(cfg, 0, k).name)) known = 1;
        }
        if (!known) s = st_fail(err, ST_ECORRUPT, "%s: unexpected tensor %s (not part of GPT-2)", path, t->name);
    }
    safetensors_close(f);
    if (s != ST_OK) {
        st_free_aligned(params);
        return s;
    }
    *params_out = params;
    return ST_OK;
}

/* Streaming state: which unit is in buf, and where each entry lives. */
typedef struct unit_feed {
    const gpt_config *cfg;
    gpt_unit_reader read_unit;
    void *ctx;
    float *buf;
    int loaded;              /* unit in buf, or -1 */
    int *entry_unit;
    size_t *entry_offset;    /* within its unit */
} unit_feed;

static st_status feed_entry(void *ctx, size_t i, const void **data, st_error *err) {
    unit_feed *f = ctx;
    const int u = f->entry_unit[i];
    if (f->loaded != u) {
        st_status s = f->read_unit(f->ctx, u, f->buf, err);
        if (s != ST_OK) return s;
        f->loaded = u;
    }
    *data = f->buf + f->entry_offset[i];
    return ST_OK;
}

st_status gpt_save_safetensors_by_unit(const char *path, const gpt_config *cfg, gpt_unit_reader read_unit, void *ctx,
                                       safetensors_dtype dtype, uint64_t vocab_fingerprint, st_error *err) {
    if (dtype != SAFETENSORS_F32 && dtype != SAFETENSORS_BF16 && dtype != SAFETENSORS_F16)
        return st_fail(err, ST_EINVAL, "%s: weights can be saved as F32, BF16 or F16, not %s", path,
                       safetensors_dtype_name(dtype));
    size_t n = 0, cap = GPT_EMBED_TENSORS + (size_t)cfg->n_layer * GPT_BLOCK_TENSORS, max_unit = 0;
    for (int u = 0; u < gpt_num_units(cfg); u++)
        if (gpt_unit_numel(cfg, u) > max_unit) max_unit = gpt_unit_numel(cfg, u);
    safetensors_entry *e = calloc(cap, sizeof *e);
    char (*names)[64] = calloc(cap, sizeof *names);
    unit_feed f = {.cfg = cfg, .read_unit = read_unit, .ctx = ctx, .loaded = -1,
                   .buf = st_alloc_aligned(64, max_unit * sizeof(float)),
                   .entry_unit = malloc(cap * sizeof(int)), .entry_offset = malloc(cap * sizeof(size_t))};
    st_status s = ST_OK;
    if (!e || !names || !f.buf || !f.entry_unit || !f.entry_offset) {
        s = st_fail(err, ST_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    for (int u = 0; u < gpt_num_units(cfg); u++) {
        for (int i = 0; i < gpt_unit_tensor_count(u); i++, n++) {
            gpt_tensor_info ti = gpt_unit_tensor(cfg, u, i);
            if (u == 0) snprintf(names[n], sizeof names[n], "%s", ti.name);
            else snprintf(names[n], sizeof names[n], "h.%d.%s", u - 1, ti.name);
            e[n] = (safetensors_entry){.name = names[n], .dtype = dtype, .ndim = ti.ndim,
                                       .shape = {ti.shape[0], ti.shape[1]}, .from_f32 = 1};
            f.entry_unit[n] = u;
            f.entry_offset[n] = ti.offset;
        }
    }
    /* transformers refuses safetensors files without format=pt. */
    char fp[17];
    snprintf(fp, sizeof fp, "%016" PRIx64, vocab_fingerprint);
    const char *meta[] = {"format", "pt", vocab_fingerprint ? GPT_META_VOCAB_FINGERPRINT : NULL, fp, NULL};
    s = safetensors_write_streamed(path, e, n, meta, feed_entry, &f, err);
done:
    free(e);
    free(names);
    st_free_aligned(f.buf);
    free(f.entry_unit);
    free(f.entry_offset);
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

st_status gpt_save_safetensors(const char *path, const gpt_config *cfg, const float *params,
                               safetensors_dtype dtype, st_error *err) {
    params_in_memory p = {cfg, params};
    return gpt_save_safetensors_by_unit(path, cfg, copy_unit, &p, dtype, 0, err);
}

st_status gpt_safetensors_vocab_fingerprint(const char *path, uint64_t *fingerprint, st_error *err) {
    *fingerprint = 0;
    safetensors_file *f;
    st_status s = safetensors_open(&f, path, err);
    if (s != ST_OK) return s;
    const char *v = safetensors_metadata(f, GPT_META_VOCAB_FINGERPRINT);
    if (v && !st_parse_hex64(v, fingerprint))
        s = st_fail(err, ST_ECORRUPT, "%s: metadata %s is \"%.40s\", not 16 hex digits", path,
                    GPT_META_VOCAB_FINGERPRINT, v);
    safetensors_close(f);
    return s;
}

st_status gpt_write_hf_config(const char *json_path, const gpt_config *cfg, st_error *err) {
    st_atomic_file out;
    FILE *f;
    st_status s = st_atomic_open_stream(&out, json_path, &f, err);
    if (s != ST_OK) return s;
    fprintf(f,
            "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
            "  \"vocab_size\": %d,\n  \"n_positions\": %d,\n  \"n_ctx\": %d,\n  \"n_embd\": %d,\n"
            "  \"n_layer\": %d,\n  \"n_head\": %d,\n  \"n_inner\": null,\n"
            "  \"activation_function\": \"gelu_new\",\n  \"layer_norm_epsilon\": 1e-05,\n"
            "  \"tie_word_embeddings\": true,\n  \"bos_token_id\": 50256,\n  \"eos_token_id\": 50256\n}\n",
            cfg->vocab_size, cfg->n_ctx, cfg->n_ctx, cfg->d_model, cfg->n_layer, cfg->n_head);
    return st_atomic_commit(&out, err);
}
