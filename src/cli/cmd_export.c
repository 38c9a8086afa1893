/* cmd_export.c - `strata export RUN_DIR --out FILE.safetensors`: the fp32
 * weights of a store's last commit, in the Hugging Face GPT-2 layout, read
 * one unit at a time (a model larger than memory exports too). */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_flags.h"
#include "strata/checkpoint.h"
#include "strata/gpt_io.h"
#include "strata/store.h"

typedef struct export_opts {
    const char *out;
    int overwrite;
} export_opts;

static const cli_flag export_flags[] = {
    CLI_STRING("out", offsetof(export_opts, out), "FILE", "the safetensors file to write (config.json goes beside it)"),
    CLI_ON("overwrite", offsetof(export_opts, overwrite), "replace FILE and the config.json beside it if they exist"),
};

static const cli_spec export_spec = {
    .command = "export",
    .usage = "usage: strata export RUN_DIR|STORE_DIR[,DIR...] --out FILE.safetensors",
    .about = "Writes the fp32 master weights of the store's last commit (a run commits\n"
             "its store whenever it saves its weights, and at the end) as a Hugging Face\n"
             "GPT-2 safetensors file, with config.json beside it. The store is opened\n"
             "read-only; an existing FILE or config.json is replaced only with --overwrite.",
    .flags = export_flags,
    .n_flags = CLI_COUNT(export_flags),
    .one_arg = "RUN_DIR or store",
};

/* Unit u's master weights, from the last commit (gpt_unit_reader). */
static st_status read_unit(void *ctx, int u, float *out, st_error *err) {
    ckpt_reader *r = ctx;
    size_t n = 0;
    st_status s = ckpt_unit_numel(r, u, &n, err);
    return s == ST_OK ? ckpt_read_range(r, STORE_MASTER, u, 0, n, out, err) : s;
}

int cmd_export(int argc, char **argv) {
    export_opts o = {0};
    cli_parsed flags;
    int parsed = cli_parse_flags(&export_spec, argc, argv, &o, &flags);
    if (parsed != CLI_PARSED) return parsed;
    const char *arg = flags.n_args ? flags.args[0] : NULL, *out = o.out;
    if (!arg || !arg[0]) return cli_usage_error("export", "give a run directory or the store's directories");
    if (!out) return cli_usage_error("export", "--out FILE.safetensors is required");
    char config_json[PATH_MAX];
    const char *slash = strrchr(out, '/');
    snprintf(config_json, sizeof config_json, "%.*sconfig.json", slash ? (int)(slash - out + 1) : 0, out);
    const char *const written[2] = {out, config_json};
    for (int i = 0; i < 2 && !o.overwrite; i++)
        if (access(written[i], F_OK) == 0)
            return cli_error("export: %s exists; pass --overwrite to replace it, or choose another --out", written[i]);
    store_dirs dirs;
    st_error err = {0};
    st_status s = cli_store_dirs(arg, &dirs, &err);
    store *st = NULL;
    ckpt_reader *r = NULL;
    ckpt_record commit = {0};
    if (s == ST_OK) {
        store_config sc = store_default_config();
        sc.paths = dirs.paths;
        sc.n_paths = dirs.n;
        sc.mode = STORE_OPEN_EXISTING;
        sc.read_only = 1;
        s = store_open(&sc, &st, NULL, 0, &err);
    }
    if (s == ST_OK) s = cli_commit_read(st, &commit, &err);
    if (s == ST_OK) s = ckpt_reader_open(&r, st, &commit.model, &err);
    const gpt_config cfg = commit.model;
    if (s == ST_OK) s = gpt_save_safetensors_by_unit(out, &cfg, read_unit, r, SAFETENSORS_F32, commit.vocab_fingerprint, &err);
    if (s == ST_OK) s = gpt_write_hf_config(config_json, &cfg, &err);
    ckpt_reader_free(r);
    store_close(st);
    if (s != ST_OK) return cli_error("export: %s", err.msg);
    printf("%s: the weights of step %ld (%d layers, d_model %d, %.2fM parameters), with %s\n", out, commit.step, cfg.n_layer,
           cfg.d_model, (double)gpt_num_real_params(&cfg) / 1e6, config_json);
    return 0;
}
