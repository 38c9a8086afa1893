/* cmd_export.c - `strata export RUN_DIR --out DIR|FILE.safetensors`: the
 * weights of a store's last commit as a Hugging Face checkpoint (GPT-2 or
 * Llama), read one unit at a time (a model larger than memory exports too);
 * of a run of several ranks, from every rank's store. */
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
    const char *out, *dtype;
    uint64_t shard_size;
    int overwrite;
} export_opts;

static const cli_flag export_flags[] = {
    CLI_STRING("out", offsetof(export_opts, out), "PATH",
               "a model directory to write (config.json, model.safetensors or shards and\n"
               "their index), or FILE.safetensors (config.json goes beside it)"),
    CLI_STRING("dtype", offsetof(export_opts, dtype), "T", "F32 (default), BF16 or F16"),
    CLI_SIZE("shard-size", offsetof(export_opts, shard_size), "SIZE",
             "a directory's weights in shards of at most SIZE (default 5G, as Hugging Face;\n"
             "0: one file)"),
    CLI_ON("overwrite", offsetof(export_opts, overwrite), "replace what is there"),
};

static const cli_spec export_spec = {
    .command = "export",
    .usage = "usage: strata export RUN_DIR|STORE_DIR[,DIR...] --out DIR|FILE.safetensors",
    .about = "Writes the fp32 master weights of the store's last commit (a run commits\n"
             "its store whenever it saves its weights, and at the end) as a Hugging Face\n"
             "checkpoint that transformers loads (GPT2LMHeadModel or LlamaForCausalLM).\n"
             "The store is opened read-only; files already at --out are replaced only\n"
             "with --overwrite. A run of several ranks (mpirun) is read from every rank's\n"
             "store, at the last step every rank committed.",
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

static int ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

int cmd_export(int argc, char **argv) {
    export_opts o = {.dtype = "F32", .shard_size = 5000000000ull};
    cli_parsed flags;
    int parsed = cli_parse_flags(&export_spec, argc, argv, &o, &flags);
    if (parsed != CLI_PARSED) return parsed;
    const char *arg = flags.n_args ? flags.args[0] : NULL, *out = o.out;
    if (!arg || !arg[0]) return cli_usage_error("export", "give a run directory or the store's directories");
    if (!out) return cli_usage_error("export", "--out DIR or FILE.safetensors is required");
    safetensors_dtype dtype;
    if (!strcmp(o.dtype, "F32")) dtype = SAFETENSORS_F32;
    else if (!strcmp(o.dtype, "BF16")) dtype = SAFETENSORS_BF16;
    else if (!strcmp(o.dtype, "F16")) dtype = SAFETENSORS_F16;
    else return cli_usage_error("export", "--dtype %s: must be F32, BF16 or F16", o.dtype);
    const int one_file = ends_with(out, ".safetensors");
    char config_json[PATH_MAX];
    if (one_file) {
        const char *slash = strrchr(out, '/');
        snprintf(config_json, sizeof config_json, "%.*sconfig.json", slash ? (int)(slash - out + 1) : 0, out);
    } else {
        snprintf(config_json, sizeof config_json, "%s/config.json", out);
    }
    const char *const written[2] = {one_file ? out : config_json, config_json};
    for (int i = 0; i < 2 && !o.overwrite; i++)
        if (access(written[i], F_OK) == 0)
            return cli_error("export: %s exists; pass --overwrite to replace it, or choose another --out", written[i]);
    store_dirs dirs;
    st_error err = {0};
    st_status s = cli_store_dirs(arg, &dirs, &err);
    /* a run of several ranks: every rank's store, each unit read from the ranks that hold its shards */
    const int ranks = s == ST_OK ? cli_store_ranks(&dirs) : 1;
    store **stores = calloc((size_t)ranks, sizeof *stores);
    ckpt_record *records = calloc((size_t)ranks, sizeof *records);
    ckpt_reader *r = NULL;
    ckpt_record commit = {0};
    int ahead = 0;
    if (s == ST_OK && (!stores || !records)) s = st_fail(&err, ST_ENOMEM, "out of memory");
    if (s == ST_OK) s = cli_open_rank_stores(&dirs, ranks, stores, records, &ahead, &err);
    if (s == ST_OK) commit = records[0];
    if (s == ST_OK) s = ranks > 1 ? ckpt_reader_open_ranks(&r, stores, ranks, &commit.model, &err)
                                  : ckpt_reader_open(&r, stores[0], &commit.model, &err);
    const gpt_config cfg = commit.model;
    if (s == ST_OK && one_file) {
        s = gpt_save_safetensors_by_unit(out, &cfg, read_unit, r, dtype, commit.vocab_fingerprint, &err);
        if (s == ST_OK) s = gpt_write_hf_config(config_json, &cfg, dtype, &err);
    } else if (s == ST_OK) {
        const hf_save_opts so = {.dtype = dtype, .shard_bytes = o.shard_size,
                                 .vocab_fingerprint = commit.vocab_fingerprint};
        s = hf_checkpoint_save(out, &cfg, read_unit, r, &so, &err);
    }
    ckpt_reader_free(r);
    for (int i = 0; stores && i < ranks; i++) store_close(stores[i]);
    free(stores);
    free(records);
    if (s != ST_OK) return cli_error("export: %s", err.msg);
    printf("%s: the weights of step %ld (%s, %d layers, d_model %d, %.2fM parameters, %s), with %s\n", out,
           commit.step, gpt_arch_name(cfg.arch), cfg.n_layer, cfg.d_model, (double)gpt_num_real_params(&cfg) / 1e6,
           o.dtype, config_json);
    if (ranks > 1)
        printf("(from the stores of its %d ranks%s)\n", ranks,
               ahead ? ", the last commit every rank completed: the job stopped between the ranks' commits" : "");
    return 0;
}
