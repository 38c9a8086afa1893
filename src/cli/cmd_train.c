/* cmd_train.c - `strata train`: the main job. Reads a dataset, trains a GPT
 * in memory, reports progress, writes metrics, a loss plot and the weights
 * into a run directory. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_flags.h"
#include "cli/run_dir.h"
#include "strata/batches.h"
#include "strata/fs.h"
#include "strata/gpt_io.h"
#include "strata/offload.h"
#include "strata/planner.h"
#include "strata/train.h"

typedef struct train_opts {
    const char *model, *init, *data, *run_dir, *precision, *schedule, *offload, *store;
    long n_layer, n_head, d_model, n_ctx, vocab;
    long batch, micro_batch, seq, steps, warmup, threads;
    double lr, min_lr, clip, weight_decay, beta1, beta2, alpha;
    long eval_every, eval_batches, log_every, save_every, commit_every;
    uint64_t seed;
    const char *mem_device, *mem_host, *trace, *plan, *hw, *resume;
    int recompute, overwrite;
} train_opts;

#define O(field) offsetof(train_opts, field)
#define INT_FLAG(name, field, metavar, help) CLI_INT(name, O(field), 0, INT_MAX, metavar, help)   /* used as int */
#define DOUBLE_FLAG(name, field, metavar, help) CLI_DOUBLE(name, O(field), 0, 1e9, metavar, help)
/* The order is run.json's. */
static const cli_flag train_flags[] = {
    CLI_MODEL_SHAPE_FLAGS(O),
    CLI_STRING("init", O(init), "FILE", "start from these weights (.safetensors) to fine-tune"),
    CLI_STRING("data", O(data), "PATH", "dataset directory (strata prepare) or token file"),
    INT_FLAG("batch", batch, "N", "sequences per optimizer step (global batch)"),
    INT_FLAG("micro-batch", micro_batch, "N", "sequences per forward/backward (default: --batch)"),
    CLI_SEQ_FLAG(O(seq)),
    INT_FLAG("steps", steps, "N", "optimizer steps"),
    DOUBLE_FLAG("lr", lr, "X", "peak learning rate"),
    DOUBLE_FLAG("min-lr", min_lr, "X", "final learning rate (default lr/10)"),
    INT_FLAG("warmup", warmup, "N", "warmup steps (default steps/10)"),
    DOUBLE_FLAG("clip", clip, "X", "global gradient-norm clipping, 0 = off"),
    DOUBLE_FLAG("weight-decay", weight_decay, "X", "AdamW weight decay on matrices"),
    DOUBLE_FLAG("beta1", beta1, "X", "AdamW beta1"),
    DOUBLE_FLAG("beta2", beta2, "X", "AdamW beta2"),
    CLI_STRING("precision", O(precision), "P", "fp32 or mixed (bf16 compute weights, fp32 master)"),
    CLI_ON("recompute", O(recompute), "keep only block inputs, recompute in backward (default)"),
    CLI_OFF("no-recompute", O(recompute), "keep all activations (faster, more memory)"),
    CLI_STRING("schedule", O(schedule), "S",
               "vertical (default), horizontal (the schedule executor: units\n"
               "streamed, optimizer per unit), or memory (the plain\n"
               "in-memory trainer)"),
    DOUBLE_FLAG("alpha", alpha, "X", "executor: share of each unit's optimizer step deferred to the next forward"),
    CLI_STRING("offload", O(offload), "LIST",
               "executor: state kept on the SSD store: weights,optim,acts,grads,\n"
               "none, or auto (default: the least SSD traffic that fits\n"
               "the budgets)"),
    CLI_STRING("store", O(store), "DIRS", "store directories, comma separated, one per drive (default RUN_DIR/store)"),
    CLI_STRING("mem-device", O(mem_device), "SIZE",
               "executor: budget for the compute working set (e.g. 512M; default none)"),
    CLI_STRING("trace", O(trace), "FILE", "executor: write a Chrome trace (Perfetto) of compute, optimizer, SSD paths"),
    CLI_STRING("mem-host", O(mem_host), "SIZE", "executor: budget for state kept in host memory (e.g. 2G; default none)"),
    CLI_STRING("plan", O(plan), "auto",
               "choose --schedule, --micro-batch, --offload and --alpha for --batch and the\n"
               "budgets by simulating the candidates (strata plan; needs --hw)"),
    CLI_HW_FLAG(O(hw)),
    CLI_THREADS_FLAG(O(threads)),
    CLI_U64("seed", O(seed), "S", "initialization seed"),
    CLI_STRING("run-dir", O(run_dir), "DIR", "where metrics, plot and weights go"),
    CLI_ON("overwrite", O(overwrite), "replace a run already in --run-dir"),
    CLI_STRING("resume", O(resume), "RUN_DIR",
               "continue the run in RUN_DIR from its last commit, with its settings\n"
               "(budgets, --offload, --store, --threads, logging and\n"
               "--save-every may change)"),
    INT_FLAG("eval-every", eval_every, "N", "validation loss every N steps (0 = only at the end)"),
    INT_FLAG("eval-batches", eval_batches, "N", "micro-batches of validation data per evaluation"),
    INT_FLAG("log-every", log_every, "N", "a log line every N steps when stdout is not a terminal"),
    INT_FLAG("save-every", save_every, "N", "also save the weights (and commit) every N steps (0 = at the end)"),
    INT_FLAG("commit-every", commit_every, "N",
             "commit the training state every N steps, without writing the weights\n"
             "file (cheap with the state on the SSD; 0 = with saves only)"),
};
#define N_OPTS CLI_COUNT(train_flags)

static const cli_spec train_spec = {
    .command = "train",
    .usage = "usage: strata train --data PATH [--model NAME | --init FILE] [flags]\n"
             "       strata train --config FILE.json [flags]   (flags override the file)",
    .flags = train_flags,
    .n_flags = N_OPTS,
    .config_help = "JSON object of the same settings: {\"model\": \"gpt2-mini\", \"steps\": 200}",
    .lists_models = 1,
};

/* What run.json records: every setting but those that only say how to
 * start. The settings that make the run what it is (its model, data, math
 * and state layout) are kept by a resumed run; the others may change. */
static const char *const not_recorded[] = {"model", "init", "plan", "hw", "run-dir", "overwrite", "resume", "trace"};
static const char *const kept_on_resume[] = {"n-layer", "n-head", "d-model", "n-ctx", "vocab", "data", "batch",
                                             "micro-batch", "seq", "steps", "lr", "min-lr", "warmup", "clip",
                                             "weight-decay", "beta1", "beta2", "precision", "recompute", "schedule",
                                             "alpha", "seed"};
#define NAME_IN(name, list) cli_name_in(name, list, CLI_COUNT(list))

static train_opts train_opts_defaults(void) {
    return (train_opts){.batch = 8, .seq = 256, .steps = 100, .lr = 6e-4, .min_lr = -1, .warmup = -1,
                        .clip = 1.0, .weight_decay = 0.1, .beta1 = 0.9, .beta2 = 0.95, .precision = "fp32",
                        .seed = 1337, .recompute = 1, .run_dir = "runs/latest", .eval_every = 0,
                        .eval_batches = 8, .log_every = 10, .schedule = "vertical", .offload = "auto"};
}

/* Equal values; paths (--data) are equal when they name the same file. */
static int same_opt(const train_opts *a, const train_opts *b, const cli_flag *d) {
    char x[4200], y[4200];
    cli_flag_format(d, a, x, sizeof x);
    cli_flag_format(d, b, y, sizeof y);
    if (!strcmp(d->name, "data") && st_same_path(x, y)) return 1;
    return !strcmp(x, y);   /* paths that do not resolve (any more) compare as written */
}

/* run.json: the run's settings under their flag names, so that it is also
 * a --config file that repeats the run, and what --resume reads back. */
static char *run_settings_json(const train_opts *o) {
    return cli_settings_json(&train_spec, o, not_recorded, CLI_COUNT(not_recorded));
}

/* SIGINT or SIGTERM: finish the step, commit, exit; a second one exits at
 * once (the last commit is intact: commits are atomic). */
static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) {
    if (stop_signal) _exit(128 + sig);
    stop_signal = sig;
}

static void format_duration(double s, char *buf, size_t n) {
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%02ld:%02ld", t / 60, t % 60);
}

/* --resume RUN_DIR: the run's settings from its run.json; the flags given
 * now may change only what does not make the run what it is. *run_store
 * is where the run last committed. */
static st_status merge_resume(train_opts *o, const unsigned char *given, cJSON **doc, const char **run_store,
                              st_error *err) {
    static const char *const refused[] = {"model", "init", "plan", "hw", "run-dir", "overwrite"};
    for (size_t i = 0; i < N_OPTS; i++)
        if (given[i] && NAME_IN(train_flags[i].name, refused))
            return st_fail(err, ST_EINVAL, "--resume takes the model and settings from %s/run.json; drop --%s",
                           o->resume, train_flags[i].name);
    char path[4200];
    snprintf(path, sizeof path, "%s/run.json", o->resume);
    if (access(path, F_OK) != 0)
        return st_fail_errno(err, errno, "%s: not a run directory (no run.json to resume from)", o->resume);
    train_opts r = train_opts_defaults();
    st_status s = cli_config_apply(&train_spec, &r, path, doc, err);
    if (s != ST_OK) return s;
    *run_store = r.store;
    for (size_t i = 0; i < N_OPTS; i++) {
        const cli_flag *d = &train_flags[i];
        if (!given[i] || same_opt(o, &r, d)) continue;
        if (NAME_IN(d->name, kept_on_resume)) {
            char now[4200], was[4200];
            cli_flag_format(d, o, now, sizeof now);
            cli_flag_format(d, &r, was, sizeof was);
            return st_fail(err, ST_EINVAL,
                           "--%s %s: the run in %s has %s, and a resumed run keeps its model, data and training "
                           "settings (budgets, --offload, --store, --threads, logging, --save-every and --commit-every "
                           "may change)",
                           d->name, now, o->resume, was);
        }
        cli_flag_copy(d, &r, o);
    }
    r.resume = r.run_dir = o->resume;
    *o = r;
    return ST_OK;
}

/* A store's directories, from a comma-separated list. */
typedef struct store_dirs {
    char list[4200];
    const char *paths[STORE_MAX_PATHS];
    int n;
} store_dirs;

static st_status store_dirs_parse(const char *list, store_dirs *d, st_error *err) {
    snprintf(d->list, sizeof d->list, "%s", list);   /* cut into the paths */
    d->n = 0;
    for (char *save = NULL, *tok = strtok_r(d->list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (d->n == STORE_MAX_PATHS) return st_fail(err, ST_EINVAL, "--store: at most %d directories", STORE_MAX_PATHS);
        d->paths[d->n++] = tok;
    }
    if (d->n == 0) return st_fail(err, ST_EINVAL, "--store: no directory given");
    return ST_OK;
}

/* list (comma-separated paths) with each relative path made absolute, so
 * that run.json finds them from any working directory. */
static st_status absolute_paths(const char *list, char *out, size_t cap, st_error *err) {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return st_fail_errno(err, errno, "cannot read the working directory");
    size_t len = 0;
    for (const char *p = list; *p;) {
        const size_t n = strcspn(p, ",");
        char one[PATH_MAX], resolved[PATH_MAX];
        snprintf(one, sizeof one, "%.*s", (int)n, p);
        int w;
        if (realpath(one, resolved)) w = snprintf(out + len, cap - len, "%s%s", len ? "," : "", resolved);
        else w = snprintf(out + len, cap - len, "%s%s%s%s", len ? "," : "", one[0] == '/' ? "" : cwd,
                          one[0] == '/' ? "" : "/", one);
        if (w < 0 || (size_t)w >= cap - len) return st_fail(err, ST_EINVAL, "store paths too long");
        len += (size_t)w;
        p += n + (p[n] == ',');
    }
    return ST_OK;
}

/* The same directories in the same order (after resolving links and ./). */
static int store_dirs_same(const store_dirs *a, const store_dirs *b) {
    return st_same_paths(a->paths, a->n, b->paths, b->n);
}

/* Opens the store in d to look at it (the lock is shared; nothing is written). */
static st_status open_read_only(const store_dirs *d, store **out, st_error *err) {
    store_config sc = store_default_config();
    sc.paths = d->paths;
    sc.n_paths = d->n;
    sc.mode = STORE_OPEN_EXISTING;
    sc.read_only = 1;
    return store_open(&sc, out, NULL, 0, err);
}

/* The record of the last commit of the store in dirs. */
static st_status read_last_commit(const store_dirs *dirs, const char *run_path, ckpt_record *out, st_error *err) {
    store *st;
    st_error e = {0};
    st_status s = open_read_only(dirs, &st, &e);
    if (s == ST_OK) {
        s = cli_commit_read(st, out, &e);
        store_close(st);
    } else if (s != ST_ENOENT || access(dirs->paths[0], F_OK) != 0) {   /* ENOENT in a directory: no store yet */
        return st_fail(err, s, "%s: cannot open the run's store in %s: %s", run_path, dirs->paths[0], e.msg);
    }
    if (s == ST_ENOENT)
        return st_fail(err, s,
                       "%s: the run stopped before its first commit (--commit-every, --save-every); start it again with "
                       "--overwrite",
                       run_path);
    if (s != ST_OK) return st_fail(err, s, "%s: %s", run_path, e.msg);
    return ST_OK;
}

/* Where a resume moves the state to: nothing there; or a copy an
 * interrupted move left there, removed: a store without a commit record
 * (the copy had not committed), or one whose record is this very commit's
 * (it had, but run.json did not name it yet). Any other store is someone's
 * state and is refused. */
static st_status clear_unfinished_copy(const store_dirs *to, const ckpt_record *ours, st_error *err) {
    store *st;
    st_error e = {0};
    st_status s = open_read_only(to, &st, &e);
    if (s == ST_ENOENT && access(to->paths[0], F_OK) == 0) return ST_OK;   /* no store there */
    if (s != ST_OK) return st_fail(err, s, "--store %s: %s", to->list, e.msg);
    size_t n = 0;
    store_user_meta(st, &n);
    ckpt_record c;
    const int no_record = n == 0;
    const int same = !no_record && cli_commit_read(st, &c, &e) == ST_OK && c.step == ours->step &&
                     c.data_pos == ours->data_pos && c.data_epoch == ours->data_epoch &&
                     c.data_tokens == ours->data_tokens && !memcmp(&c.model, &ours->model, sizeof c.model);
    store_close(st);
    if (!no_record && !same)
        return st_fail(err, ST_EEXIST,
                       "--store %s already holds a store with a commit of its own: choose an empty directory",
                       to->paths[0]);
    for (int i = 0; i < to->n; i++)
        if ((s = run_dir_clear_store(to->paths[i], err)) != ST_OK) return s;
    printf("removed an unfinished copy of this run's state from %s (an interrupted resume)\n", to->paths[0]);
    return ST_OK;
}

/* The commit belongs to this run: its model, its dataset, not finished. */
static st_status check_commit(const ckpt_record *c, const gpt_config *model, const token_file *tf, long steps,
                              st_error *err) {
    const gpt_config *m = &c->model;
    if (m->n_layer != model->n_layer || m->n_head != model->n_head || m->d_model != model->d_model ||
        m->n_ctx != model->n_ctx || m->vocab_size != model->vocab_size)
        return st_fail(err, ST_EINVAL,
                       "the store's commit is of another model (%d layers, %d heads, d_model %d, context %d, vocab "
                       "%d) than run.json's",
                       m->n_layer, m->n_head, m->d_model, m->n_ctx, m->vocab_size);
    if (c->data_tokens != token_file_count(tf))
        return st_fail(err, ST_EINVAL,
                       "the training data changed since the commit: it held %llu tokens, now %llu; a resumed run "
                       "reads the same data from the same position",
                       (unsigned long long)c->data_tokens, (unsigned long long)token_file_count(tf));
    if (c->step >= steps)
        return st_fail(err, ST_EINVAL, "the run finished: its last commit is at step %ld of %ld", c->step, steps);
    return ST_OK;
}

/* STRATA_FAULT=OP:ERRNO:STEP:N (testing): after step STEP, the N-th store
 * transfer of kind OP (read, write, sync) and every one after it fail with
 * ERRNO (EIO or ENOSPC): a disk that dies or fills up in the middle of a
 * step. The executor's runs only. */
typedef struct fault_plan {
    long armed_after;   /* -1: none */
    io_fault fault;
} fault_plan;

static st_status fault_parse(const char *spec, fault_plan *f, st_error *err) {
    *f = (fault_plan){.armed_after = -1};
    if (!spec || !*spec) return ST_OK;
    char op[16], errname[16];
    long step;
    unsigned long long n;
    if (sscanf(spec, "%15[a-z]:%15[A-Z]:%ld:%llu", op, errname, &step, &n) != 4 || step < 1 || n < 1)
        return st_fail(err, ST_EINVAL, "STRATA_FAULT=%s: expected OP:ERRNO:STEP:N, e.g. write:ENOSPC:3:40", spec);
    f->fault.ops = !strcmp(op, "read")    ? IO_FAULT_READ
                   : !strcmp(op, "write") ? IO_FAULT_WRITE
                   : !strcmp(op, "sync")  ? IO_FAULT_SYNC
                                          : 0;
    f->fault.fail_errno = !strcmp(errname, "EIO") ? EIO : !strcmp(errname, "ENOSPC") ? ENOSPC : 0;
    if (!f->fault.ops || !f->fault.fail_errno)
        return st_fail(err, ST_EINVAL, "STRATA_FAULT=%s: OP is read, write or sync; ERRNO is EIO or ENOSPC", spec);
    f->fault.fail_at = n;
    f->armed_after = step;
    return ST_OK;
}

/* The trainer behind a run: the in-memory one, or the schedule executor. */
typedef struct engine {
    trainer *mem;
    offload_trainer *off;
    store *ckpt;      /* the in-memory trainer's commits */
    void *stage;      /* and its staging buffer */
    io_engine *io;    /* the executor's I/O engine when faults are injected, else NULL (its store's own) */
    int vocab;
} engine;

#define CKPT_SEGMENT ((size_t)1 << 21)   /* elements per state tensor the in-memory trainer commits */

/* The in-memory trainer, and the store it commits to (reopened in place,
 * or created where the state moves to, on resume). */
static st_status engine_create_memory(engine *e, const train_config *tc, const float *init, const store_dirs *dirs,
                                      const store_dirs *resume_from, long steps_done, st_error *err) {
    st_status s = trainer_create(&e->mem, tc, init, err);
    if (s != ST_OK) return s;
    const int in_place = resume_from && store_dirs_same(dirs, resume_from);
    store_config sc = store_default_config();
    sc.paths = dirs->paths;
    sc.n_paths = dirs->n;
    sc.mode = in_place ? STORE_OPEN_EXISTING : STORE_CREATE;
    if ((s = store_open(&sc, &e->ckpt, NULL, 0, err)) != ST_OK) return s;
    if (!(e->stage = st_alloc_aligned(4096, store_padded_bytes(CKPT_SEGMENT * 4))))
        return st_fail(err, ST_ENOMEM, "out of memory for the commit buffer");
    if (!resume_from) return ST_OK;
    store *from = e->ckpt;
    if (!in_place && (s = open_read_only(resume_from, &from, err)) != ST_OK) return s;
    ckpt_reader *r = NULL;
    s = ckpt_reader_open(&r, from, &tc->model, err);
    if (s == ST_OK) s = trainer_load_state(e->mem, r, steps_done, err);
    ckpt_reader_free(r);
    if (from != e->ckpt) store_close(from);
    return s;
}

static st_status engine_step(engine *e, const int32_t *tokens, train_step_stats *st, st_error *err) {
    if (e->mem) {
        trainer_step(e->mem, tokens, st);
        return ST_OK;
    }
    return offload_trainer_step(e->off, tokens, st, err);
}

static st_status engine_eval(engine *e, const int32_t *tokens, int B, int T, float *loss, st_error *err) {
    if (e->mem) {
        *loss = trainer_eval(e->mem, tokens, B, T);
        return ST_OK;
    }
    return offload_trainer_eval(e->off, tokens, B, T, loss, err);
}

/* Unit u's fp32 weights of the last completed step (gpt_unit_reader): the
 * executor has flushed its deferred optimizer work first (save_weights). */
static st_status engine_read_unit(void *ctx, int u, float *out, st_error *err) {
    engine *e = ctx;
    if (e->off) return offload_trainer_read_unit(e->off, u, out, err);
    const gpt_config *c = &trainer_config(e->mem)->model;
    memcpy(out, trainer_params(e->mem) + gpt_unit_offset(c, u), gpt_unit_numel(c, u) * sizeof(float));
    return ST_OK;
}

static long engine_steps_done(const engine *e) {
    return e->mem ? trainer_steps_done(e->mem) : offload_trainer_steps_done(e->off);
}

static void engine_free(engine *e) {
    trainer_free(e->mem);
    offload_trainer_free(e->off);
    store_close(e->ckpt);
    st_free_aligned(e->stage);
    if (e->io) io_engine_destroy(e->io);   /* after the store that used it */
}

/* Commits the state of the last completed step, with its record (step,
 * model, data position), and says what it cost. */
static st_status commit_state(engine *e, const gpt_config *cfg, const batch_loader *bl, uint64_t data_tokens,
                              st_error *err) {
    const ckpt_record c = {.step = engine_steps_done(e), .model = *cfg, .data_pos = bl->pos, .data_epoch = bl->epoch,
                          .data_tokens = data_tokens};
    char meta[512];
    const int n = ckpt_record_format(&c, meta, sizeof meta);
    if (n < 0) return st_fail(err, ST_EINVAL, "commit record too long");
    const double t0 = st_now();
    st_status s;
    if (e->off) {
        s = offload_trainer_commit(e->off, meta, (size_t)n, err);
    } else {
        s = trainer_save_state(e->mem, e->ckpt, CKPT_SEGMENT, e->stage, err);
        if (s == ST_OK) s = store_set_user_meta(e->ckpt, meta, (size_t)n, err);
        if (s == ST_OK) s = store_commit(e->ckpt, err);
    }
    if (s == ST_OK) printf("committed step %ld in %.2f s\n", c.step, st_now() - t0);
    return s;
}

/* The weights of the last completed step into the run directory, then a
 * commit of the whole state at that step (what --resume, strata export and
 * strata fsck read). */
static st_status save_weights(run_dir *rd, engine *e, const gpt_config *cfg, const batch_loader *bl,
                              uint64_t data_tokens, st_error *err) {
    const double t0 = st_now();
    st_status s = run_dir_sync_metrics(rd, err);
    if (s == ST_OK && e->off) s = offload_trainer_flush(e->off, err);
    if (s == ST_OK) s = run_dir_save_weights(rd, cfg, engine_read_unit, e, err);
    if (s == ST_OK) printf("saved model.safetensors in %.2f s\n", st_now() - t0);
    if (s == ST_OK) s = commit_state(e, cfg, bl, data_tokens, err);
    return s;
}

/* Where an executor run's time went and what it moved through the store. */
static void print_executor_summary(offload_trainer *t, const char *trace_path) {
    offload_stats st;
    st_error err = {0};
    if (trace_path && offload_trainer_close_trace(t, &err) != ST_OK) cli_fail(&err);
    offload_trainer_stats(t, &st);
    const double n = st.steps > 0 ? (double)st.steps : 1.0;
    const double moved = (double)(st.bytes_blocking + st.bytes_overlapped);
    printf("per iteration: %.2f s; compute %.2f s, compute waiting on the SSD %.2f s, waiting for the optimizer %.2f s; "
           "optimizer busy %.2f s (of it on the SSD %.2f s)\n",
           st.step_s / n, st.compute_s / n, st.compute_io_s / n, st.optimizer_wait_s / n, st.optimizer_s / n,
           st.worker_io_s / n);
    uint64_t rd = 0, wr = 0;
    char line[1024] = "";
    size_t len = 0;
    for (int k = 0; k < STORE_KIND_COUNT; k++) {
        rd += st.bytes_read[k];
        wr += st.bytes_written[k];
        if (!st.bytes_read[k] && !st.bytes_written[k]) continue;
        char a[32], b[32];
        len += (size_t)snprintf(line + len, sizeof line - len, "%s%s %s read / %s written", len ? ", " : "",
                                store_kind_name((store_kind)k), st_format_bytes((double)st.bytes_read[k] / n, a, sizeof a),
                                st_format_bytes((double)st.bytes_written[k] / n, b, sizeof b));
        if (len >= sizeof line) break;
    }
    if (rd || wr) {
        char a[32], b[32];
        printf("SSD per iteration: %s\n", line);
        if (st.step_s > 0)
            printf("SSD achieved: %.3f GB/s read, %.3f GB/s written (averaged over the training steps)\n",
                   (double)rd / st.step_s / 1e9, (double)wr / st.step_s / 1e9);
        printf("SSD total: %s read, %s written (%s per step of drive wear); I/O hidden behind compute: %.0f%% of "
               "the bytes moved by prefetches or the optimizer thread, %.2f s per iteration of compute waiting on it\n",
               st_format_bytes((double)rd, a, sizeof a), st_format_bytes((double)wr, b, sizeof b),
               st_format_bytes((double)wr / n, line, 32), moved > 0 ? 100.0 * (double)st.bytes_overlapped / moved : 0.0,
               (st.compute_io_s + st.optimizer_wait_s) / n);
    }
    if (wr && st.step_s > 0) {
        /* what the write rate means for a drive: a 1 TB NVMe SSD is typically rated for 600 TB written */
        double days = store_endurance_days((double)wr / n, st.step_s / n, 600e12);
        printf("SSD wear: at this rate a drive rated for 600 TB written lasts %.0f days of training\n", days);
    }
    if (trace_path) printf("trace: %s (open in https://ui.perfetto.dev)\n", trace_path);
}

/* Mean loss over eval_batches micro-batches from the start of the validation file. */
static st_status validation_loss(engine *e, token_file *val, int B, int T, long batches, int32_t *buf,
                                 float *out, st_error *err) {
    batch_loader bl;
    st_status s = batch_loader_init(&bl, val, T, e->vocab, err);
    if (s != ST_OK) return s;
    double sum = 0;
    for (long i = 0; i < batches; i++) {
        s = batch_loader_next(&bl, B, buf, err);
        if (s != ST_OK) return s;
        float loss;
        if ((s = engine_eval(e, buf, B, T, &loss, err)) != ST_OK) return s;
        sum += loss;
    }
    *out = (float)(sum / (double)batches);
    return ST_OK;
}

static st_status build_model_config(const train_opts *o, gpt_config *cfg, float **init, st_error *err) {
    *init = NULL;
    if (o->init) {
        if (o->model || o->n_layer || o->d_model || o->n_ctx || o->vocab)
            return st_fail(err, ST_EINVAL,
                           "--init takes the model shape from the file; drop --model/--n-layer/--d-model/--n-ctx/--vocab");
        return gpt_load_safetensors(o->init, (int)o->n_head, cfg, init, err);
    }
    const cli_model_flags shape = {.model = o->model, .n_layer = o->n_layer, .n_head = o->n_head, .d_model = o->d_model,
                                   .n_ctx = o->n_ctx, .vocab = o->vocab, .seq = o->seq};
    return cli_model_config(&shape, cfg, err);
}

int cmd_train(int argc, char **argv) {
    train_opts o = train_opts_defaults();
    st_error err = {0};
    cli_parsed flags;
    int rc = cli_parse_flags(&train_spec, argc, argv, &o, &flags);
    if (rc != CLI_PARSED) return rc;
    cJSON *docs[2] = {flags.config, NULL};   /* --config's and run.json's: o's strings point into them */
#define USAGE_ERROR(...)                                   \
    do {                                                   \
        cJSON_Delete(docs[0]);                             \
        cJSON_Delete(docs[1]);                             \
        return cli_usage_error("train", __VA_ARGS__);      \
    } while (0)
    const char *run_store = NULL;   /* --resume: where the run last committed */
    rc = 1;
    if (o.resume) {
        if (docs[0]) USAGE_ERROR("--resume takes the settings from the run's run.json; drop --config");
        if (merge_resume(&o, flags.given, &docs[1], &run_store, &err) != ST_OK) {
            cJSON_Delete(docs[1]);
            return cli_fail(&err);
        }
    }
    if (!o.data) USAGE_ERROR("--data is required (a dataset from 'strata prepare' or a token file)");
    if (!o.micro_batch) o.micro_batch = o.batch;
    if (o.batch < 1 || o.micro_batch < 1 || o.batch % o.micro_batch)
        USAGE_ERROR("--batch %ld must be a positive multiple of --micro-batch %ld", o.batch, o.micro_batch);
    if (o.steps < 1 || o.seq < 1) USAGE_ERROR("--steps and --seq must be at least 1");
    if (o.log_every < 1 || o.eval_batches < 1) USAGE_ERROR("--log-every and --eval-batches must be at least 1");
    gpt_precision precision;
    if (gpt_precision_parse(o.precision, &precision, &err) != ST_OK) USAGE_ERROR("--%s", err.msg);
    /* The schedule and what goes to the SSD. */
    int executor = 0;
    sched_kind kind = SCHED_VERTICAL;
    if (strcmp(o.schedule, "memory") != 0) {
        if (cli_parse_schedule(o.schedule, &kind, &err) != ST_OK)
            USAGE_ERROR("--schedule must be vertical, horizontal or memory, not '%s'", o.schedule);
        executor = 1;
    }
    placement pl;   /* what lives on the SSD */
    int auto_offload;
    if (cli_parse_offload(o.offload, 1, &pl, &auto_offload, &err) != ST_OK) USAGE_ERROR("%s", err.msg);
    int any_ssd = placement_any_ssd(pl);
    if ((any_ssd || o.alpha > 0) && !executor) USAGE_ERROR("--offload and --alpha need --schedule vertical or horizontal");
    if (executor && !o.recompute)
        USAGE_ERROR("the schedule executor always recomputes activations; drop --no-recompute or use --schedule memory");
    if (o.alpha < 0 || o.alpha > 1) USAGE_ERROR("--alpha %g must be in [0, 1]", o.alpha);
    uint64_t mem_device = 0, mem_host = 0;
    if ((o.mem_device && cli_parse_size("--mem-device", o.mem_device, &mem_device, &err) != ST_OK) ||
        (o.mem_host && cli_parse_size("--mem-host", o.mem_host, &mem_host, &err) != ST_OK))
        USAGE_ERROR("%s", err.msg);
    if ((mem_device || mem_host || o.trace) && !executor)
        USAGE_ERROR("--mem-device, --mem-host and --trace need --schedule vertical or horizontal");
    if (o.threads > 0) omp_set_num_threads((int)o.threads);
    o.threads = omp_get_max_threads();   /* recorded: a resumed run computes with as many */
    if (o.min_lr < 0) o.min_lr = o.lr / 10;
    if (o.warmup < 0) o.warmup = o.steps / 10;

    engine eng = {0};
    fault_plan fault = {.armed_after = -1};
    int committed = 0;   /* a commit of this run exists (say so if it fails) */
    token_file *train_tf = NULL, *val_tf = NULL;
    float *init = NULL;
    int32_t *tokens = NULL;
    run_dir *rd = NULL;
    train_config tc = train_config_defaults();
    if (build_model_config(&o, &tc.model, &init, &err) != ST_OK) goto fail;
    /* recorded as resolved: the shape (also one read from --init), absolute paths */
    o.n_layer = tc.model.n_layer, o.n_head = tc.model.n_head, o.d_model = tc.model.d_model;
    o.n_ctx = tc.model.n_ctx, o.vocab = tc.model.vocab_size;
    char data_abs[PATH_MAX];
    if (realpath(o.data, data_abs)) o.data = data_abs;
    tc.precision = precision;
    tc.B = (int)o.micro_batch;
    tc.T = (int)o.seq;
    tc.micro_batches = (int)(o.batch / o.micro_batch);
    tc.recompute = o.recompute;
    tc.lr = (lr_schedule){.max_lr = (float)o.lr, .min_lr = (float)o.min_lr, .warmup = o.warmup, .total = o.steps};
    tc.adam = (adamw_hparams){.beta1 = (float)o.beta1, .beta2 = (float)o.beta2, .eps = 1e-8f,
                              .weight_decay = (float)o.weight_decay};
    tc.clip = (float)o.clip;
    tc.seed = o.seed;
    if (train_config_check(&tc, &err) != ST_OK) goto fail;
    char plan_list[64];
    if (o.plan) {
        /* the planner decides the schedule, micro-batch, placement and alpha */
        if (strcmp(o.plan, "auto") != 0) {
            st_fail(&err, ST_EINVAL, "--plan: only 'auto' is known, not '%s'", o.plan);
            goto fail;
        }
        if (!executor) {
            st_fail(&err, ST_EINVAL, "--plan auto chooses the schedule; drop --schedule memory");
            goto fail;
        }
        if (!o.hw) {
            st_fail(&err, ST_EINVAL, "--plan auto needs --hw FILE, a description of this machine: write one with "
                                     "'strata probe --store DIR --out FILE' (about 20 s, on an idle machine)");
            goto fail;
        }
        hw_desc hw;
        if (hw_load_json(o.hw, &hw, &err) != ST_OK) goto fail;
        plan_request q = plan_default_request();
        q.model = tc.model;
        q.T = tc.T;
        q.global_batch = (int)o.batch;
        q.precision = tc.precision;
        q.clipping = tc.clip > 0;
        q.mem_device = mem_device;
        q.mem_host = mem_host;
        q.n_best = 1;
        plan_result pr;
        if (plan_search(&hw, &q, &pr, &err) != ST_OK) goto fail;
        const plan_choice *best = &pr.best[0];
        kind = best->config.schedule;
        o.schedule = kind == SCHED_VERTICAL ? "vertical" : "horizontal";
        o.micro_batch = tc.B = best->config.B;
        tc.micro_batches = best->config.micro_batches;
        o.alpha = best->config.alpha;
        pl = best->config.place;
        o.offload = placement_name(pl, plan_list, sizeof plan_list);
        any_ssd = placement_any_ssd(pl);
        auto_offload = 0;
        printf("plan (%s, %d candidates simulated): --schedule %s --micro-batch %d --alpha %.2f --offload %s; "
               "predicted %.2f s per step (%.0f tokens/s), bound by %s\n",
               hw.name, pr.simulated, o.schedule, tc.B, o.alpha, o.offload, best->result.iter_s,
               best->result.tokens_per_s, sim_resource_name(best->result.bottleneck));
        if (train_config_check(&tc, &err) != ST_OK) goto fail;
    }

    char train_path[4096], val_path[4096];
    if (dataset_resolve(o.data, train_path, val_path, sizeof train_path, &err) != ST_OK) goto fail;
    if (token_file_open(&train_tf, train_path, &err) != ST_OK) goto fail;
    if (token_file_open(&val_tf, val_path, &err) != ST_OK) goto fail;
    batch_loader loader;
    if (batch_loader_init(&loader, train_tf, tc.T, tc.model.vocab_size, &err) != ST_OK) goto fail;

    /* The store every run commits to: --store, or RUN_DIR/store. run.json
     * records --store (as absolute paths) and not the default, so that it
     * stays a --config file for another run directory. A resumed run finds
     * its state where it last committed (run.json's "store"). */
    char store_list[4200], old_list[4200], default_store[4200], store_abs[4200];
    snprintf(default_store, sizeof default_store, "%s/store", o.run_dir);
    snprintf(store_list, sizeof store_list, "%s", o.store ? o.store : default_store);
    snprintf(old_list, sizeof old_list, "%s", run_store ? run_store : default_store);
    if (o.store && absolute_paths(o.store, store_abs, sizeof store_abs, &err) != ST_OK) goto fail;
    if (o.store) o.store = store_abs;
    store_dirs dirs = {0}, old_dirs = {0}, default_dirs = {0};
    ckpt_record commit = {0};
    if (store_dirs_parse(store_list, &dirs, &err) != ST_OK || store_dirs_parse(default_store, &default_dirs, &err) != ST_OK)
        goto fail;
    if (!o.resume) {
        char *settings = run_settings_json(&o);
        st_status rs = settings ? run_dir_create(&rd, o.run_dir, settings, o.overwrite, &err)
                                : st_fail(&err, ST_ENOMEM, "out of memory");
        free(settings);
        if (rs != ST_OK) goto fail;
        if (!o.store && run_dir_clear_store(default_store, &err) != ST_OK) goto fail;
    } else {
        if (store_dirs_parse(old_list, &old_dirs, &err) != ST_OK) goto fail;
        if (read_last_commit(&old_dirs, o.run_dir, &commit, &err) != ST_OK) goto fail;
        if (check_commit(&commit, &tc.model, train_tf, o.steps, &err) != ST_OK) goto fail;
        loader.pos = commit.data_pos;
        loader.epoch = commit.data_epoch;
        if (run_dir_resume(&rd, o.run_dir, commit.step, &err) != ST_OK) goto fail;
        if (store_dirs_same(&dirs, &default_dirs)) o.store = NULL;   /* back in RUN_DIR/store: the default again */
    }
    const int move_store = o.resume && !store_dirs_same(&dirs, &old_dirs);
    for (int i = 0; move_store && i < dirs.n; i++)   /* where the state moves to may be new */
        if (mkdir(dirs.paths[i], 0755) != 0 && errno != EEXIST) {
            st_fail_errno(&err, errno, "--store %s: cannot create", dirs.paths[i]);
            goto fail;
        }
    if (move_store && clear_unfinished_copy(&dirs, &commit, &err) != ST_OK) goto fail;

    char mem[32];
    printf("model: %d layers, %d heads, d_model %d, context %d, vocab %d: %.2fM parameters (%s)\n", tc.model.n_layer,
           tc.model.n_head, tc.model.d_model, tc.model.n_ctx, tc.model.vocab_size,
           (double)gpt_num_real_params(&tc.model) / 1e6, o.resume ? "resumed" : o.init ? o.init : "fresh init");
    printf("data: %s (%llu tokens), validation %s (%llu tokens)\n", train_path,
           (unsigned long long)token_file_count(train_tf), val_path, (unsigned long long)token_file_count(val_tf));
    printf("batch: %ld x %ld tokens per step (%d micro-batches of %d), %ld steps, %s, %d threads, needs %s\n",
           o.batch, o.seq, tc.micro_batches, tc.B, o.steps, o.precision, omp_get_max_threads(),
           st_format_bytes((double)trainer_memory_bytes(&tc), mem, sizeof mem));
    if (o.resume)
        printf("resuming %s from its commit at step %ld of %ld%s%s\n", o.run_dir, commit.step, o.steps,
               move_store ? "; moving its state to " : "", move_store ? store_list : "");
    eng.vocab = tc.model.vocab_size;
    if (fault_parse(getenv("STRATA_FAULT"), &fault, &err) != ST_OK) goto fail;
    if (fault.armed_after >= 0) {
        io_engine_config ec = io_engine_default_config();
        if (io_engine_create(&ec, &eng.io, &err) != ST_OK) goto fail;
    }
    const double t_create = st_now();
    if (executor) {
        if (auto_offload && (mem_host || mem_device)) {
            /* Of the 16 placements, the one that fits the budgets with the
             * least SSD traffic per step (then: the fewest kinds moved) */
            int found = -1, smallest = 0;
            uint64_t smallest_host = UINT64_MAX, best_traffic = UINT64_MAX;
            for (int cand = 0; cand < PLACEMENT_COUNT; cand++) {
                offload_config probe = {.train = tc, .schedule = kind, .alpha = o.alpha, .place = placement_at(cand),
                                        .n_store_paths = dirs.n, .n_resume_paths = old_dirs.n};
                layout_memory need;
                layout_traffic traffic;
                offload_memory_need(&probe, &need);
                if (need.host < smallest_host) smallest_host = need.host, smallest = cand;
                if ((mem_host && need.host > mem_host) || (mem_device && need.device > mem_device)) continue;
                if (offload_traffic_per_step(&probe, &traffic, &err) != ST_OK) goto fail;
                const uint64_t bytes = traffic.total_read + traffic.total_written;
                if (bytes < best_traffic || (bytes == best_traffic && __builtin_popcount((unsigned)cand) <
                                                                         __builtin_popcount((unsigned)found)))
                    best_traffic = bytes, found = cand;
            }
            /* nothing fits: take the smallest, and let the executor say what it needs */
            if (found < 0) found = smallest;
            pl = placement_at(found);
            any_ssd = found != 0;
        }
        char placed[64];
        placement_name(pl, placed, sizeof placed);
        offload_config oc = {.train = tc, .schedule = kind, .alpha = o.alpha, .place = pl,
                             .store_paths = dirs.paths, .n_store_paths = dirs.n, .mem_device = mem_device,
                             .mem_host = mem_host, .trace_path = o.trace, .engine = eng.io};
        if (o.resume) {
            oc.resume_paths = old_dirs.paths;
            oc.n_resume_paths = old_dirs.n;
            oc.resume_steps = commit.step;
        }
        layout_memory need;
        offload_memory_need(&oc, &need);
        char dv[32], hv[32];
        printf("memory: device working set %s, host %s\n", st_format_bytes((double)need.device, dv, sizeof dv),
               st_format_bytes((double)need.host, hv, sizeof hv));
        printf("schedule: %s, alpha %.2f, on the SSD: %s; commits to %s\n", o.schedule, o.alpha,
               any_ssd ? placed : "nothing", store_list);
        layout_traffic traffic;
        if (any_ssd && offload_traffic_per_step(&oc, &traffic, &err) == ST_OK) {
            char tr[32], tw[32];
            printf("SSD traffic per step of this schedule and placement: %s read, %s written (%llu, %llu bytes)\n",
                   st_format_bytes((double)traffic.total_read, tr, sizeof tr),
                   st_format_bytes((double)traffic.total_written, tw, sizeof tw),
                   (unsigned long long)traffic.total_read, (unsigned long long)traffic.total_written);
        }
        if (offload_trainer_create(&eng.off, &oc, init, &err) != ST_OK) goto fail;
    } else {
        printf("schedule: memory (the in-memory trainer); commits to %s\n", store_list);
        if (engine_create_memory(&eng, &tc, init, &dirs, o.resume ? &old_dirs : NULL, commit.step, &err) != ST_OK)
            goto fail;
    }
    st_free_aligned(init);
    init = NULL;
    committed = o.resume != NULL;
    if (o.resume) {
        /* the state moved: commit it where it is now, record that, then
         * remove it from where it was */
        if (move_store && commit_state(&eng, &tc.model, &loader, token_file_count(train_tf), &err) != ST_OK) goto fail;
        char *settings = run_settings_json(&o);
        st_status rs = settings ? run_dir_write_settings(rd, settings, &err) : st_fail(&err, ST_ENOMEM, "out of memory");
        free(settings);
        if (rs != ST_OK) goto fail;
        for (int i = 0; move_store && i < old_dirs.n; i++)
            if (run_dir_clear_store(old_dirs.paths[i], &err) != ST_OK) goto fail;
        printf("resumed in %.2f s\n", st_now() - t_create);
    }
    tokens = malloc(sizeof(int32_t) * (size_t)o.batch * (size_t)(o.seq + 1));
    if (!tokens) {
        st_fail(&err, ST_ENOMEM, "out of memory for a batch");
        goto fail;
    }

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    const int tty = cli_stdout_is_tty();
    const double start = st_now();
    const double tokens_per_step = (double)o.batch * (double)o.seq;
    float val_loss = NAN, first_val = NAN;
    if (!o.resume) {
        if (validation_loss(&eng, val_tf, tc.B, tc.T, o.eval_batches, tokens, &first_val, &err) != ST_OK) goto fail;
        val_loss = first_val;
        printf("step 0: validation loss %.4f\n", first_val);
        if (run_dir_log_metrics(rd, &err, "{\"step\": 0, \"val_loss\": %.6f}", first_val) != ST_OK) goto fail;
    }
    const long first_step = commit.step + 1;
    long step;
    double train_seconds = 0;
    for (step = first_step; step <= o.steps && !stop_signal; step++) {
        if (batch_loader_next(&loader, (int)o.batch, tokens, &err) != ST_OK) goto fail;
        train_step_stats st;
        if (engine_step(&eng, tokens, &st, &err) != ST_OK) goto fail;
        train_seconds += st.seconds;
        if (!isfinite(st.loss) || !isfinite(st.grad_norm)) {
            st_fail(&err, ST_EINVAL, "loss became %f (gradient norm %f) at step %ld; lower --lr or enable --clip",
                    st.loss, st.grad_norm, step);
            goto fail;
        }
        const double tok_s = tokens_per_step / st.seconds, elapsed = st_now() - start;
        const double eta = train_seconds / (double)(step - first_step + 1) * (double)(o.steps - step);
        int do_eval = (o.eval_every > 0 && step % o.eval_every == 0) || step == o.steps;
        if (do_eval && validation_loss(&eng, val_tf, tc.B, tc.T, o.eval_batches, tokens, &val_loss, &err) != ST_OK)
            goto fail;
        /* the loss with every digit of the float, so that runs compare exactly */
        if (run_dir_log_metrics(rd, &err,
                                do_eval ? "{\"step\": %ld, \"loss\": %.9g, \"lr\": %.6g, \"grad_norm\": %.6f, "
                                          "\"tokens_per_s\": %.1f, \"step_s\": %.4f, \"elapsed_s\": %.3f, "
                                          "\"val_loss\": %.6f}"
                                        : "{\"step\": %ld, \"loss\": %.9g, \"lr\": %.6g, \"grad_norm\": %.6f, "
                                          "\"tokens_per_s\": %.1f, \"step_s\": %.4f, \"elapsed_s\": %.3f}",
                                step, st.loss, st.lr, st.grad_norm, tok_s, st.seconds, elapsed, val_loss) != ST_OK)
            goto fail;
        char el[32], et[32];
        format_duration(elapsed, el, sizeof el);
        format_duration(eta, et, sizeof et);
        if (tty) {
            printf("\r\033[Kstep %ld/%ld | loss %.4f | val %.4f | lr %.2e | %.0f tok/s | %s elapsed | ETA %s", step,
                   o.steps, st.loss, val_loss, st.lr, tok_s, el, et);
            if (do_eval && step != o.steps) printf("\n");
            fflush(stdout);
        } else if (step % o.log_every == 0 || step == first_step || do_eval) {
            printf("step %ld/%ld loss %.4f lr %.2e grad_norm %.3f %.0f tok/s elapsed %s eta %s\n", step, o.steps,
                   st.loss, st.lr, st.grad_norm, tok_s, el, et);
            if (do_eval) printf("step %ld: validation loss %.4f\n", step, val_loss);
            fflush(stdout);
        }
        if (fault.armed_after == step) io_engine_set_fault(eng.io, &fault.fault);
        const int save = o.save_every > 0 && step % o.save_every == 0 && step != o.steps;
        if (save || (o.commit_every > 0 && step % o.commit_every == 0 && step != o.steps)) {
            if (tty) printf("\n");
            st_status cs = save ? save_weights(rd, &eng, &tc.model, &loader, token_file_count(train_tf), &err)
                                : run_dir_sync_metrics(rd, &err);
            if (cs == ST_OK && !save) cs = commit_state(&eng, &tc.model, &loader, token_file_count(train_tf), &err);
            if (cs != ST_OK) goto fail;
            run_dir_committed(rd);
            committed = 1;
        }
    }
    if (tty) printf("\n");
    long done = engine_steps_done(&eng);
    if (stop_signal) {
        printf("stopping after step %ld on %s; saving the weights and committing\n", done, strsignal(stop_signal));
        if (validation_loss(&eng, val_tf, tc.B, tc.T, o.eval_batches, tokens, &val_loss, &err) != ST_OK) goto fail;
    }
    if (save_weights(rd, &eng, &tc.model, &loader, token_file_count(train_tf), &err) != ST_OK) goto fail;
    run_dir_committed(rd);
    char plot_msg[256] = "";
    run_dir_plot(rd, plot_msg, sizeof plot_msg);
    char peak[32];
    const long trained = done - commit.step;
    printf("done: %ld steps in %.1f s (%.0f tokens/s), validation loss %.4f -> %.4f, peak memory %s\n", trained,
           st_now() - start, trained > 0 ? tokens_per_step * (double)trained / train_seconds : 0.0, first_val,
           val_loss, st_format_bytes((double)st_peak_rss_bytes(), peak, sizeof peak));
    printf("weights: %s/model.safetensors (+ config.json)\nmetrics: %s/metrics.jsonl\n%s\n", o.run_dir, o.run_dir,
           plot_msg);
    if (eng.off) print_executor_summary(eng.off, o.trace);
    rc = stop_signal ? 128 + stop_signal : 0;
    goto out;
fail:
    rc = cli_fail(&err);
    if (committed)
        fprintf(stderr, "strata: the run's last commit is intact; continue it with: strata train --resume %s\n",
                o.run_dir);
out:
    run_dir_finish(rd, rc == 0 || rc == 128 + SIGINT || rc == 128 + SIGTERM);   /* stopped on request: committed */
    engine_free(&eng);
    token_file_close(train_tf);
    token_file_close(val_tf);
    st_free_aligned(init);
    free(tokens);
    cJSON_Delete(docs[0]);
    cJSON_Delete(docs[1]);
    return rc;
}
