/* cmd_export.c - `strata export RUN_DIR --out FILE.safetensors`: the fp32
 * weights of a store's last commit, in the Hugging Face GPT-2 layout, read
 * one unit at a time (a model larger than memory exports too). */
#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "strata/gpt_io.h"
#include "strata/store.h"

static void usage(FILE *f) {
    fprintf(f, "usage: strata export RUN_DIR|STORE_DIR[,DIR...] --out FILE.safetensors\n"
               "\n"
               "Writes the fp32 master weights of the store's last commit (a run commits\n"
               "its store whenever it saves its weights, and at the end) as a Hugging Face\n"
               "GPT-2 safetensors file, with config.json beside it. The store is opened\n"
               "read-only. A run that kept its optimizer state in memory has no master\n"
               "weights in its store: its model.safetensors is the export.\n");
}

typedef struct export_src {
    store *st;
    const gpt_config *cfg;
    unsigned char *buf;     /* one tensor, aligned for O_DIRECT */
    uint64_t buf_bytes;
} export_src;

/* Unit u's master weights: its tensors master[u, i] in index order (parts,
 * then segments) laid end to end. */
static st_status read_unit(void *ctx, int u, float *out, st_error *err) {
    export_src *x = ctx;
    const size_t want = gpt_unit_numel(x->cfg, u);
    size_t have = 0;
    for (int32_t next = 0;;) {
        /* the smallest index >= next among master[u, *] */
        int found = -1;
        store_tensor_info best = {0};
        for (int i = 0; i < store_tensor_count(x->st); i++) {
            store_tensor_info ti;
            st_status s = store_tensor_info_at(x->st, i, &ti, err);
            if (s != ST_OK) return s;
            if (ti.key.kind != STORE_MASTER || ti.key.block != u || ti.key.index < next) continue;
            if (found < 0 || ti.key.index < best.key.index) found = i, best = ti;
        }
        if (found < 0) break;
        if (best.bytes % 4 || have + best.bytes / 4 > want || best.padded_bytes > x->buf_bytes)
            return st_fail(err, ST_ECORRUPT, "unit %d's master weights do not match the model's shape (%zu floats)", u,
                           want);
        st_status s = store_read(x->st, best.key, x->buf, best.padded_bytes, err);
        if (s != ST_OK) return s;
        memcpy(out + have, x->buf, best.bytes);
        have += best.bytes / 4;
        next = best.key.index + 1;
    }
    if (have != want)
        return st_fail(err, ST_ENOENT,
                       "the store holds %zu of unit %d's %zu master weights (a run that kept its optimizer state in "
                       "memory has none there: use its model.safetensors)",
                       have, u, want);
    return ST_OK;
}

/* The model's shape from the commit's meta (written by strata train). */
static st_status model_from_meta(store *st, gpt_config *cfg, long *step, st_error *err) {
    size_t n = 0;
    const void *meta = store_user_meta(st, &n);
    cJSON *j = meta && n ? cJSON_ParseWithLength(meta, n) : NULL;
    if (!j) return st_fail(err, ST_ENOENT, "the store's last commit records no model (it was made before training saved)");
    const char *keys[6] = {"step", "n_layer", "n_head", "d_model", "n_ctx", "vocab"};
    double v[6];
    for (int k = 0; k < 6; k++) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, keys[k]);
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > INT_MAX) {
            cJSON_Delete(j);
            return st_fail(err, ST_ECORRUPT, "the store's commit record: field %s missing or out of range", keys[k]);
        }
        v[k] = it->valuedouble;
    }
    cJSON_Delete(j);
    *step = (long)v[0];
    *cfg = (gpt_config){.n_layer = (int)v[1], .n_head = (int)v[2], .d_model = (int)v[3], .n_ctx = (int)v[4],
                        .vocab_size = (int)v[5]};
    return gpt_config_check(cfg, err);
}

int cmd_export(int argc, char **argv) {
    const char *arg = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--out")) {
            if (i + 1 >= argc) return cli_usage_error("export", "--out needs a file name");
            out = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("export", "unknown flag: %s", a);
        } else if (arg) {
            return cli_usage_error("export", "one RUN_DIR or store argument, not '%s' and '%s'", arg, a);
        } else {
            arg = a;
        }
    }
    if (!arg || !arg[0]) return cli_usage_error("export", "give a run directory or the store's directories");
    if (!out) return cli_usage_error("export", "--out FILE.safetensors is required");
    char *list = NULL, sub[PATH_MAX];
    const char *paths[STORE_MAX_PATHS];
    int n = 0;
    st_error err = {0};
    st_status s = cli_store_dirs(arg, &list, paths, &n, sub, sizeof sub, &err);
    store *st = NULL;
    export_src x = {0};
    gpt_config cfg;
    long step = 0;
    if (s == ST_OK) {
        store_config sc = store_default_config();
        sc.paths = paths;
        sc.n_paths = n;
        sc.mode = STORE_OPEN_EXISTING;
        sc.read_only = 1;
        s = store_open(&sc, &st, NULL, 0, &err);
    }
    if (s == ST_OK) s = model_from_meta(st, &cfg, &step, &err);
    if (s == ST_OK) {
        for (int i = 0; i < store_tensor_count(st); i++) {
            store_tensor_info ti;
            if (store_tensor_info_at(st, i, &ti, NULL) == ST_OK && ti.padded_bytes > x.buf_bytes) x.buf_bytes = ti.padded_bytes;
        }
        x.st = st;
        x.cfg = &cfg;
        if (!(x.buf = st_alloc_aligned(4096, x.buf_bytes ? x.buf_bytes : 4096)))
            s = st_fail(&err, ST_ENOMEM, "out of memory");
    }
    if (s == ST_OK) s = gpt_save_safetensors_by_unit(out, &cfg, read_unit, &x, SAFETENSORS_F32, &err);
    char config_json[PATH_MAX];
    if (s == ST_OK) {
        const char *slash = strrchr(out, '/');
        snprintf(config_json, sizeof config_json, "%.*sconfig.json", slash ? (int)(slash - out + 1) : 0, out);
        s = gpt_write_hf_config(config_json, &cfg, &err);
    }
    st_free_aligned(x.buf);
    store_close(st);
    free(list);
    if (s != ST_OK) return cli_error("export: %s", err.msg);
    printf("%s: the weights of step %ld (%d layers, d_model %d, %.2fM parameters), with %s\n", out, step, cfg.n_layer,
           cfg.d_model, (double)gpt_num_real_params(&cfg) / 1e6, config_json);
    return 0;
}
