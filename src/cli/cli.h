/*
 * cli.h - the strata command line. Each subcommand lives in its own
 * cmd_<name>.c and is listed in the table in main.c. Only this layer prints
 * errors and chooses exit codes: 0 success, 1 failure, 2 bad usage.
 */
#ifndef STRATA_CLI_H
#define STRATA_CLI_H

#include <stdint.h>
#include "strata/base.h"
#include "strata/model.h"
#include "strata/checkpoint.h"
#include "strata/hw.h"
#include "strata/schedule.h"
#include "strata/store.h"

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);   /* argv[0] is the subcommand name */
} cli_command;

/* Prints "strata: <msg>" to stderr and returns 1 (for `return cli_error(...)`). */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints an st_error as "strata: <msg>" and returns 1. */
int cli_fail(const st_error *err);
/* Prints "strata <cmd>: <msg>" and a hint to run --help; returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Strict parsers for flag values: the whole string must be a valid number in
 * range, or they fail with a message naming the flag. Sizes accept K, M, G, T
 * suffixes (powers of 1024) and an optional B/iB: "1M", "512KiB", "2G". */
st_status cli_parse_int(const char *flag, const char *s, long min, long max, long *out, st_error *err);
st_status cli_parse_u64(const char *flag, const char *s, uint64_t *out, st_error *err);
st_status cli_parse_double(const char *flag, const char *s, double min, double max, double *out, st_error *err);
st_status cli_parse_size(const char *flag, const char *s, uint64_t *out, st_error *err);

/* Flag values that several commands share (train, simulate). */

/* "vertical" or "horizontal" (--schedule). */
st_status cli_parse_schedule(const char *s, sched_kind *out, st_error *err);

/* --offload: a comma-separated list of weights, optim, acts, grads, or
 * "none"; with allow_auto also "auto" (then *is_auto is set and nothing is
 * placed). Names the bad item: "--offload: unknown state 'x' (...)". */
st_status cli_parse_offload(const char *s, int allow_auto, placement *out, int *is_auto, st_error *err);

/* The model shape from --model NAME or an explicit --n-layer/--n-head/--d-model
 * (with --n-ctx, default seq, and --vocab, default 50257), checked. Zero
 * (NULL) means the flag was not given; no name and no shape
 * is gpt2-124m. An explicit shape is GPT-2's unless --arch llama, which
 * also takes --d-ff (required), --n-kv-head (default n_head), --tied
 * (default 0), --norm-eps (default 1e-5), --rope-theta (default 10000) and
 * --rope-scaling (default none). The flags are CLI_MODEL_SHAPE_FLAGS and
 * CLI_SEQ_FLAG (cli_flags.h). */
typedef struct cli_model_flags {
    const char *model;
    long n_layer, n_head, d_model, n_ctx, vocab;
    long seq;
    const char *arch, *rope_scaling;
    long n_kv_head, d_ff, tied;
    double norm_eps, rope_theta;
} cli_model_flags;
/* --rope-scaling: "none" or "llama3:FACTOR,LOW,HIGH,ORIGINAL" (Llama 3.1's
 * factor, low_freq_factor, high_freq_factor, original_max_position_embeddings),
 * and back; the text goes into buf. */
st_status cli_parse_rope_scaling(const char *s, gpt_rope_scaling *out, st_error *err);
const char *cli_format_rope_scaling(const gpt_rope_scaling *r, char *buf, size_t cap);
st_status cli_model_config(const cli_model_flags *f, gpt_config *out, st_error *err);

/* The directories of a tensor store named on the command line: a comma-
 * separated list (store_dirs_parse), or a run directory (one with
 * run.json), whose store is where its run.json says ("store"), else
 * RUN_DIR/store. ST_EINVAL for an empty list or too many paths, ST_ENOENT
 * for a run directory without a store. */
st_status cli_store_dirs(const char *arg, store_dirs *out, st_error *err);

/* How many ranks committed the store in dirs (cli_store_dirs's): a run of
 * several ranks (mpirun) keeps one store per rank below them
 * (store_dirs_of_rank); its rank 0's commit record says how many, or, when
 * that cannot be read, the ranks' stores found there. 1 when dirs hold a
 * store themselves (or no rank's). */
int cli_store_ranks(const store_dirs *dirs);

/* Opens read-only the stores of every rank of such a run (ranks of them:
 * stores[r], records[r]; one process: the store in dirs) at the step every
 * rank completed: a rank whose store is a commit ahead (a job that stopped
 * between the ranks' commits) is opened at the commit before its last
 * (store_config.previous), as a resume would go back to it. *ahead: how
 * many were. On failure nothing is left open. */
st_status cli_open_rank_stores(const store_dirs *dirs, int ranks, store **stores, ckpt_record *records, int *ahead,
                               st_error *err);

/* The tokenizer a command that reads a model uses: the --tokenizer flag's
 * value when given, else model_dir/tokenizer.json when it exists (written
 * into buf), else NULL (GPT-2's default, for tokenizer_load_path). */
const char *cli_model_tokenizer(const char *flag, const char *model_dir, char *buf, size_t cap);

/* The record of st's last commit (strata/checkpoint.h's ckpt_record_parse
 * of the store's user meta). */
st_status cli_commit_read(store *st, ckpt_record *out, st_error *err);

/* hw_load_json, and a warning on stderr when the description's compute
 * rates were measured with another set of matrix-product kernels than this
 * process runs (hw_probe_record.blas_kernels): its predictions are then
 * off by up to the two sets' ratio, 3-4x on this project's machines. */
st_status cli_load_hw(const char *path, hw_desc *out, st_error *err);

/* True when stdout is a terminal (live status lines) rather than a log. */
int cli_stdout_is_tty(void);

/* The planner's progress (plan_request.progress = cli_plan_progress_show,
 * progress_ctx a cli_plan_progress from cli_plan_progress_start) on
 * stderr, once a search has taken a second: a line redrawn in place on a
 * terminal, at most ten times a second and erased when the search ends;
 * in a log, a line at each quarter. A quick search says nothing. */
typedef struct cli_plan_progress {
    double t0, last_draw;
    int tty, last_quarter, drawn;
} cli_plan_progress;
void cli_plan_progress_start(cli_plan_progress *p);
void cli_plan_progress_show(void *ctx, int done, int total);

#endif
