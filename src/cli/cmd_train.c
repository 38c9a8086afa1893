/* cmd_train.c - `strata train`: the main job. Reads a dataset, trains a GPT
 * in memory, reports progress, writes metrics, a loss plot and the weights
 * into a run directory. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
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
#include "cli/commit_policy.h"
#include "cli/ranks.h"
#include "cli/run_dir.h"
#include "strata/batches.h"
#include "strata/comm.h"
#include "strata/fs.h"
#include "strata/gpt_io.h"
#include "strata/offload.h"
#include "strata/planner.h"
#include "strata/run.h"
#include "strata/tokenizer.h"

typedef struct train_opts {
    const char *model, *init, *tokenizer, *data, *data_format, *run_dir, *precision, *schedule, *offload, *store;
    long n_layer, n_head, d_model, n_ctx, vocab;
    const char *arch, *rope_scaling;
    long n_kv_head, d_ff, tied;
    double norm_eps, rope_theta;
    long batch, micro_batch, seq, steps, warmup, threads, grad_buffers;
    double lr, min_lr, clip, weight_decay, beta1, beta2, alpha;
    long eval_every, eval_batches, log_every, save_every;
    const char *commit_every;
    uint64_t seed;
    const char *mem_device, *mem_host, *optimizer_io, *trace, *plan, *hw, *resume;
    int recompute, overwrite;
} train_opts;

#define O(field) offsetof(train_opts, field)
#define INT_FLAG(name, field, metavar, help) CLI_INT(name, O(field), 0, INT_MAX, metavar, help)   /* used as int */
#define DOUBLE_FLAG(name, field, metavar, help) CLI_DOUBLE(name, O(field), 0, 1e9, metavar, help)
/* The order is run.json's. */
static const cli_flag train_flags[] = {
    CLI_MODEL_SHAPE_FLAGS(O),
    CLI_STRING("init", O(init), "PATH", "start from these weights to fine-tune: a Hugging Face model directory\n"
                                        "(GPT-2 or Llama; read a unit at a time) or a GPT-2 .safetensors file"),
    CLI_STRING("tokenizer", O(tokenizer), "FILE|DIR",
               "the data's tokenizer (tokenizer.json, or a directory holding one; default:\n"
               "--init's, if it has one): checked against the data, copied into the run"),
    CLI_STRING("data", O(data), "PATH", "dataset directory (strata prepare) or token file"),
    CLI_DATA_FORMAT_FLAG(O(data_format)),
    CLI_INT("batch", O(batch), 1, INT_MAX, "N", "sequences per optimizer step (global batch)"),
    INT_FLAG("micro-batch", micro_batch, "N", "sequences per forward/backward (default: --batch)"),
    CLI_SEQ_FLAG(O(seq)),
    CLI_INT("steps", O(steps), 1, INT_MAX, "N", "optimizer steps"),
    DOUBLE_FLAG("lr", lr, "X", "peak learning rate"),
    DOUBLE_FLAG("min-lr", min_lr, "X", "final learning rate (default lr/10)"),
    INT_FLAG("warmup", warmup, "N", "warmup steps (default steps/10)"),
    DOUBLE_FLAG("clip", clip, "X", "global gradient-norm clipping, 0 = off"),
    DOUBLE_FLAG("weight-decay", weight_decay, "X", "AdamW weight decay on matrices"),
    CLI_DOUBLE("beta1", O(beta1), 0, 1, "X", "AdamW beta1, below 1"),
    CLI_DOUBLE("beta2", O(beta2), 0, 1, "X", "AdamW beta2, below 1"),
    CLI_STRING("precision", O(precision), "P", "fp32 or mixed (bf16 compute weights, fp32 master)"),
    CLI_ON("recompute", O(recompute), "keep only block inputs, recompute in backward (default)"),
    CLI_OFF("no-recompute", O(recompute), "keep all activations (faster, more memory)"),
    CLI_STRING("schedule", O(schedule), "S",
               "vertical (default), horizontal (the schedule executor: units\n"
               "streamed, optimizer per unit), or memory (the plain\n"
               "in-memory trainer)"),
    CLI_DOUBLE("alpha", O(alpha), 0, 1, "X",
               "executor: share of each unit's optimizer step deferred to the next\nforward, where the unit's optimizer state or weights are on the SSD\n(every unit's on a device beside the host; default 0)"),
    CLI_STRING("offload", O(offload), "LIST",
               "executor: state kept on the SSD store: weights,optim,acts,grads,\n"
               "a share of a kind's units as KIND=SHARE (optim=0.6), none, or\n"
               "auto (default: the least SSD traffic that fits the budgets,\n"
               "memory filled with whole units; with --hw FILE, the placement\n"
               "the simulator predicts fastest)"),
    CLI_STRING("store", O(store), "DIRS", "store directories, comma separated, one per drive (default RUN_DIR/store)"),
    CLI_STRING("mem-device", O(mem_device), "SIZE",
               "executor: budget for the compute working set (e.g. 512M; default none)"),
    CLI_STRING("optimizer-io", O(optimizer_io), "ORDER",
               "executor: how an optimizer job orders its SSD reads and writes:\n"
               "phased (default: groups of segments read, stepped, written back),\n"
               "interleaved (read ahead, step, write behind), or alternating\n"
               "(phased on even steps, interleaved on odd: to compare the two)"),
    CLI_INT("grad-buffers", O(grad_buffers), 0, LAYOUT_GRAD_BUFFERS - 1, "N",
            "executor: block gradient buffers when gradients live on the SSD, 3 to\n"
            "7 (default 3): the backward runs at most this many blocks ahead of\n"
            "the optimizer's steps, which hold them"),
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
               "(budgets, --offload, --store, --threads, logging, --save-every and\n"
               "--commit-every may change; a larger --steps extends the run)"),
    INT_FLAG("eval-every", eval_every, "N", "validation loss every N steps (0 = only at the end)"),
    CLI_INT("eval-batches", O(eval_batches), 1, INT_MAX, "N", "micro-batches of validation data per evaluation"),
    CLI_INT("log-every", O(log_every), 1, INT_MAX, "N", "a log line every N steps when stdout is not a terminal"),
    INT_FLAG("save-every", save_every, "N", "also save the weights (and commit) every N steps (0 = at the end)"),
    CLI_STRING("commit-every", O(commit_every), "WHEN",
               "commit the training state (what --resume continues from): auto\n"
               "(default: first after 60 s, then as often as keeps commits under\n"
               "2% of the time), N steps, a time (90s, 10m, 2h), or 0 (only with\n"
               "--save-every and at the end)"),
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
static const char *const not_recorded[] = {"model", "init", "tokenizer", "plan", "hw", "run-dir", "overwrite", "resume",
                                           "trace"};
static const char *const kept_on_resume[] = {"n-layer", "n-head", "d-model", "n-ctx", "vocab", "arch", "n-kv-head",
                                             "d-ff", "tied", "norm-eps", "rope-theta", "rope-scaling", "data",
                                             "data-format", "batch", "micro-batch", "seq", "steps", "lr", "min-lr",
                                             "warmup", "clip", "weight-decay", "beta1", "beta2", "precision",
                                             "recompute", "schedule", "alpha", "seed"};
#define NAME_IN(name, list) cli_name_in(name, list, CLI_COUNT(list))

static train_opts train_opts_defaults(void) {
    return (train_opts){.batch = 8, .seq = 256, .steps = 100, .lr = 6e-4, .min_lr = -1, .warmup = -1,
                        .clip = 1.0, .weight_decay = 0.1, .beta1 = 0.9, .beta2 = 0.95, .precision = "fp32",
                        .data_format = "auto", .seed = 1337, .recompute = 1, .run_dir = "runs/latest", .eval_every = 0,
                        .eval_batches = 8, .log_every = 10, .schedule = "vertical", .offload = "auto",
                        .commit_every = "auto"};
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
    static const char again[] = "\nstrata: stopping at once, without a commit; the last one is intact\n";
    static const char first[] = "\nstrata: stopping after this step, with a commit (again to stop at once)\n";
    if (stop_signal) {
        (void)!write(STDERR_FILENO, again, sizeof again - 1);   /* write: safe in a handler, printf is not */
        _exit(128 + sig);
    }
    stop_signal = sig;
    (void)!write(STDERR_FILENO, first, sizeof first - 1);
}

static void format_duration(double s, char *buf, size_t n) {
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%02ld:%02ld", t / 60, t % 60);
}

/* --resume RUN_DIR: the run's settings from its run.json; the flags given
 * now may change only what does not make the run what it is, but for a
 * larger --steps, which extends the run (*extended_from: its steps before,
 * else 0). *run_store is where the run last committed. */
static st_status merge_resume(train_opts *o, const unsigned char *given, cJSON **doc, const char **run_store,
                              long *extended_from, st_error *err) {
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
        if (!strcmp(d->name, "steps")) {
            if (o->steps < r.steps)
                return st_fail(err, ST_EINVAL,
                               "--steps %ld: the run in %s has %ld; a resumed run can be extended (a larger --steps), "
                               "not shortened",
                               o->steps, o->resume, r.steps);
            *extended_from = r.steps;
        } else if (NAME_IN(d->name, kept_on_resume)) {
            char now[4200], was[4200];
            cli_flag_format(d, o, now, sizeof now);
            cli_flag_format(d, &r, was, sizeof was);
            return st_fail(err, ST_EINVAL,
                           "--%s %s: the run in %s has %s, and a resumed run keeps its model, data and training "
                           "settings (budgets, --offload, --store, --threads, logging, --save-every and --commit-every "
                           "may change, and a larger --steps extends it)",
                           d->name, now, o->resume, was);
        }
        cli_flag_copy(d, &r, o);
    }
    r.resume = r.run_dir = o->resume;
    *o = r;
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

/* Where an executor run's time went and what it moved through the store.
 * docs/ARCHITECTURE.md ("What a run prints") defines each figure: the
 * compute thread's parts add up to the iteration; the worker's time runs
 * beside them. */
static void print_executor_summary(offload_trainer *t, const char *trace_path, int ranks, uint64_t comm_bytes_sent) {
    offload_stats st;
    st_error err = {0};
    if (trace_path && offload_trainer_close_trace(t, &err) != ST_OK) cli_fail(&err);
    offload_trainer_stats(t, &st);
    if (st.steps > 0) {
        const double n = (double)st.steps, iter = st.step_s / n;
        const double io_wait = st.compute_io_s / n, opt_wait = st.optimizer_wait_s / n;
        printf("iteration: %.3f s (the mean wall time of %ld steps)\n", iter, st.steps);
        printf("compute thread: computing %.3f s, waiting %.3f s (on the SSD %.3f s, the optimizer %.3f s)\n",
               iter - io_wait - opt_wait, io_wait + opt_wait, io_wait, opt_wait);
        printf("optimizer worker, beside it: busy %.3f s (%.0f%% of the iteration), of it waiting on the SSD %.3f s\n",
               st.optimizer_s / n, iter > 0 ? 100.0 * st.optimizer_s / st.step_s : 0.0, st.worker_io_s / n);
        if (st.optimizer_host_s > 0)
            printf("optimizer's host lane, beside both (AdamW on state in memory): busy %.3f s (%.0f%% of the iteration)\n",
                   st.optimizer_host_s / n, iter > 0 ? 100.0 * st.optimizer_host_s / st.step_s : 0.0);
        if (ranks > 1) {
            char sent[32];
            printf("ranks: %d; this rank's compute thread spent %.3f s of the iteration in collectives (all-gathers of "
                   "weights, reduce-scatters of gradients, sums), and sent %s to the other ranks in all\n",
                   ranks, st.comm_s / n, st_format_bytes((double)comm_bytes_sent, sent, sizeof sent));
        }
    }
    uint64_t rd = 0, wr = 0;
    char line[1024] = "";
    size_t len = 0;
    const uint64_t steps = st.steps > 0 ? (uint64_t)st.steps : 1;
    for (int k = 0; k < STORE_KIND_COUNT; k++) {
        rd += st.bytes_read[k];
        wr += st.bytes_written[k];
        if (!st.bytes_read[k] && !st.bytes_written[k]) continue;
        char a[32], b[32];
        len += (size_t)snprintf(line + len, sizeof line - len, "%s%s %s read / %s written", len ? ", " : "",
                                store_kind_name((store_kind)k),
                                st_format_bytes((double)(st.bytes_read[k] / steps), a, sizeof a),
                                st_format_bytes((double)(st.bytes_written[k] / steps), b, sizeof b));
        if (len >= sizeof line) break;
    }
    char a[32], b[32];
    if (rd || wr)
        printf("SSD per iteration: %s; total %s read, %s written (%llu, %llu bytes)\n", line,
               st_format_bytes((double)(rd / steps), a, sizeof a), st_format_bytes((double)(wr / steps), b, sizeof b),
               (unsigned long long)(rd / steps), (unsigned long long)(wr / steps));
    if ((rd || wr) && st.step_s > 0) {
        printf("SSD achieved: %.3f GB/s read, %.3f GB/s written (the iterations' bytes over their wall time); "
               "compute waited on it %.0f%% of the iteration\n",
               (double)rd / st.step_s / 1e9, (double)wr / st.step_s / 1e9, 100.0 * st.compute_io_s / st.step_s);
        /* what the write rate means for a drive: a 1 TB NVMe SSD is typically rated for 600 TB written */
        if (wr) {
            double days = store_endurance_days((double)wr / (double)steps, st.step_s / (double)steps, 600e12);
            printf("SSD wear: at this rate a drive rated for 600 TB written lasts %.0f days of training\n", days);
        }
    }
    /* the drive's rates while the steps kept it busy: what a description's read_gbps and write_gbps stand for */
    io_path_counters io[STORE_MAX_PATHS];
    double in_steps = 0;
    const int n_paths = offload_trainer_path_io(t, io, &in_steps);
    for (int p = 0; p < n_paths && in_steps > 0; p++) {
        const io_path_counters *c = &io[p];
        if (!(c->read_busy_s > 0) && !(c->write_busy_s > 0)) continue;
        printf("SSD path %d while busy in the steps after the first: read %.3f GB/s (reads in flight %.0f%% of the "
               "time), write %.3f GB/s (%.0f%%), both at once %.0f%%\n",
               p, c->read_busy_s > 0 ? (double)c->bytes_read / c->read_busy_s / 1e9 : 0.0,
               100.0 * c->read_busy_s / in_steps,
               c->write_busy_s > 0 ? (double)c->bytes_written / c->write_busy_s / 1e9 : 0.0,
               100.0 * c->write_busy_s / in_steps, 100.0 * c->both_busy_s / in_steps);
    }
    if (trace_path) printf("trace: %s (open in https://ui.perfetto.dev)\n", trace_path);
}

/* Everything one `strata train` holds, so that its stages can be functions:
 * settings, data, the run directory and store, the run, the training loop. */
typedef struct session {
    train_opts o;
    train_run_config rc;          /* what the run is: the trainer, its settings, its stores */
    int auto_offload;             /* --offload auto: the executor's placement is chosen */
    hf_checkpoint *init;          /* --init's checkpoint, read unit by unit as the run is created */
    char tokenizer_json[4200];    /* the tokenizer.json the run copies into its directory, or "" */
    token_format data_format;     /* --data-format */
    token_file *train_tf, *val_tf;
    char rope_scaling[96];        /* the resolved --rope-scaling, recorded */
    uint64_t vocab_fp;            /* the data's vocabulary (0: not recorded), committed and saved with the weights */
    char train_path[4096], val_path[4096];
    batch_loader loader;
    store_dirs dirs;              /* where the run commits now */
    store_dirs old_dirs;          /* --resume: where it committed last (this rank's store of the commit;
                                     resharding: rank 0's) */
    store_dirs old_given;         /* --resume: the run's store directories, before any rank's spelling */
    int resume_ranks;             /* --resume: the ranks that made the commit (1: one process) */
    store_dirs default_dirs;      /* RUN_DIR/store */
    const char *run_store;        /* --resume: run.json's "store", NULL for the default */
    int move_store;               /* --resume into other directories: the state moves */
    ckpt_record commit;           /* --resume: the commit continued from */
    run_dir *rd;
    train_run *run;
    fault_plan fault;
    int committed;                /* a commit of this run exists (say so if it fails) */
    int state_damaged;            /* --resume: the run's store or last commit cannot be read back */
    int never_committed;          /* --resume: the run stopped before its first commit */
    long steps_trained;           /* by this process */
    store_dirs aside;             /* --overwrite: the overwritten run's --store, until this run commits */
    int has_aside;
    int store_size_said;
    int store_ours;               /* a fresh run's store directories are cleared for it (else another's) */
    long extended_from;           /* --resume with a larger --steps: the run's steps before */
    commit_policy commits;        /* --commit-every */
    double last_commit_end, last_commit_cost;   /* st_now() after it, its seconds (< 0: none yet) */
    store_scrub_result checked;   /* --resume: the last commit, read back before the first step */
    double check_seconds;
    int32_t *tokens;              /* one batch */
    comm *comm;                   /* the job's ranks (mpirun; cli/ranks.h), one without mpirun */
    int rank, ranks;
    int stopping;                 /* a stop was asked for (a signal, on any rank): the steps end */
    int failure_shared;           /* the ranks know of the failure (ranks_agree): no rank waits on another */
    int peer_failed;              /* ... and it was another rank's, which says why */
    char store_abs[4200], data_abs[PATH_MAX], plan_list[128];
} session;

/* Flag values a run cannot start with: a usage error (exit 2) naming them,
 * or 0. The settings then go into s->rc. */
static int check_flags(session *s) {
    train_opts *o = &s->o;
    train_run_config *rc = &s->rc;
    st_error err = {0};
    if (!o->data) return cli_usage_error("train", "--data is required (a dataset from 'strata prepare' or a token file)");
    if (!o->micro_batch) o->micro_batch = o->batch;
    /* ranges are the flag table's; here what relates two flags or excludes an end */
    if (o->batch % o->micro_batch)
        return cli_usage_error("train", "--batch %ld: must be a multiple of --micro-batch %ld", o->batch, o->micro_batch);
    if (!(o->lr > 0)) return cli_usage_error("train", "--lr %g: must be positive", o->lr);
    if (o->min_lr > o->lr) return cli_usage_error("train", "--min-lr %g: must be at most --lr %g", o->min_lr, o->lr);
    if (o->beta1 >= 1 || o->beta2 >= 1)
        return cli_usage_error("train", "--beta%d %g: must be below 1", o->beta1 >= 1 ? 1 : 2,
                               o->beta1 >= 1 ? o->beta1 : o->beta2);
    if (gpt_precision_parse(o->precision, &rc->train.precision, &err) != ST_OK)
        return cli_usage_error("train", "--%s", err.msg);
    if (token_format_parse(o->data_format, &s->data_format, &err) != ST_OK)
        return cli_usage_error("train", "--%s", err.msg);
    if (commit_policy_parse(o->commit_every, &s->commits, &err) != ST_OK)
        return cli_usage_error("train", "--%s", err.msg);
    /* The schedule and what goes to the SSD. */
    rc->schedule = SCHED_VERTICAL;
    if (strcmp(o->schedule, "memory") != 0) {
        if (cli_parse_schedule(o->schedule, &rc->schedule, &err) != ST_OK)
            return cli_usage_error("train", "--schedule must be vertical, horizontal or memory, not '%s'", o->schedule);
        rc->executor = 1;
    }
    if (cli_parse_offload(o->offload, 1, &rc->place, &s->auto_offload, &err) != ST_OK)
        return cli_usage_error("train", "%s", err.msg);
    if ((placement_any_ssd(rc->place) || o->alpha > 0) && !rc->executor)
        return cli_usage_error("train", "--offload and --alpha need --schedule vertical or horizontal");
    if (rc->executor && !o->recompute)
        return cli_usage_error("train", "the schedule executor always recomputes activations; drop --no-recompute or "
                                        "use --schedule memory");
    rc->alpha = o->alpha;
    if ((o->mem_device && cli_parse_size("--mem-device", o->mem_device, &rc->mem_device, &err) != ST_OK) ||
        (o->mem_host && cli_parse_size("--mem-host", o->mem_host, &rc->mem_host, &err) != ST_OK))
        return cli_usage_error("train", "%s", err.msg);
    if ((rc->mem_device || rc->mem_host || o->trace || o->optimizer_io || o->grad_buffers) && !rc->executor)
        return cli_usage_error("train", "--mem-device, --mem-host, --optimizer-io, --grad-buffers and --trace need "
                                        "--schedule vertical or horizontal");
    if (o->grad_buffers && o->grad_buffers < LAYOUT_GRAD_BLOCK_BUFFERS)
        return cli_usage_error("train", "--grad-buffers %ld: from %d to %d", o->grad_buffers, LAYOUT_GRAD_BLOCK_BUFFERS,
                               LAYOUT_GRAD_BUFFERS - 1);
    rc->grad_buffers = (int)o->grad_buffers;
    if (o->optimizer_io && opt_io_order_parse(o->optimizer_io, &rc->opt_io, &err) != ST_OK)
        return cli_usage_error("train", "--optimizer-io: %s", err.msg);
    rc->trace_path = o->trace;
    if (o->threads > 0) omp_set_num_threads((int)o->threads);
    o->threads = omp_get_max_threads();   /* recorded: a resumed run computes with as many */
    if (o->min_lr < 0) o->min_lr = o->lr / 10;
    if (o->warmup < 0) o->warmup = o->steps / 10;
    return 0;
}

static st_status build_model_config(const train_opts *o, gpt_config *cfg, hf_checkpoint **init, st_error *err) {
    *init = NULL;
    if (o->init) {
        if (o->model) return st_fail(err, ST_EINVAL, "--init takes the model shape from the checkpoint; drop --model");
        st_status st = hf_checkpoint_open(init, o->init, (int)o->n_head, err);
        if (st != ST_OK) return st;
        *cfg = *hf_checkpoint_config(*init);
        /* a shape given too (a run.json as --config, say) must be the checkpoint's */
        const struct { const char *flag; long given; int file; } shape[] = {
            {"n-layer", o->n_layer, cfg->n_layer}, {"d-model", o->d_model, cfg->d_model},
            {"n-ctx", o->n_ctx, cfg->n_ctx},       {"vocab", o->vocab, cfg->vocab_size},
            {"n-kv-head", o->n_kv_head, cfg->n_kv_head}, {"d-ff", o->d_ff, cfg->d_ff}};
        for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++)
            if (shape[i].given && shape[i].given != shape[i].file) {
                hf_checkpoint_close(*init);
                *init = NULL;
                return st_fail(err, ST_EINVAL, "--%s %ld: the model in %s has %s %d (--init takes the shape from it)",
                               shape[i].flag, shape[i].given, o->init, shape[i].flag, shape[i].file);
            }
        return ST_OK;
    }
    const cli_model_flags shape = {.model = o->model, .n_layer = o->n_layer, .n_head = o->n_head, .d_model = o->d_model,
                                   .n_ctx = o->n_ctx, .vocab = o->vocab, .seq = o->seq, .arch = o->arch,
                                   .rope_scaling = o->rope_scaling, .n_kv_head = o->n_kv_head, .d_ff = o->d_ff,
                                   .tied = o->tied, .norm_eps = o->norm_eps, .rope_theta = o->rope_theta};
    return cli_model_config(&shape, cfg, err);
}

/* The model and the math of the run, into s->rc.train. */
static st_status build_train_config(session *s, st_error *err) {
    train_opts *o = &s->o;
    train_config *tc = &s->rc.train;
    const gpt_precision precision = tc->precision;
    *tc = train_config_defaults();
    st_status st = build_model_config(o, &tc->model, &s->init, err);
    if (st != ST_OK) return st;
    /* recorded as resolved: the shape (also one read from --init), absolute paths */
    o->n_layer = tc->model.n_layer, o->n_head = tc->model.n_head, o->d_model = tc->model.d_model;
    o->n_ctx = tc->model.n_ctx, o->vocab = tc->model.vocab_size;
    const gpt_config *m = &tc->model;
    o->arch = gpt_arch_name(m->arch), o->n_kv_head = m->n_kv_head, o->d_ff = m->d_ff, o->tied = m->tied;
    o->norm_eps = m->norm_eps, o->rope_theta = m->rope_theta;
    o->rope_scaling = cli_format_rope_scaling(&m->rope_scaling, s->rope_scaling, sizeof s->rope_scaling);
    if (realpath(o->data, s->data_abs)) o->data = s->data_abs;
    tc->precision = precision;
    tc->B = (int)o->micro_batch;
    tc->T = (int)o->seq;
    tc->micro_batches = (int)(o->batch / o->micro_batch);
    tc->recompute = o->recompute;
    tc->lr = (lr_schedule){.max_lr = (float)o->lr, .min_lr = (float)o->min_lr, .warmup = o->warmup, .total = o->steps};
    tc->adam = (adamw_hparams){.beta1 = (float)o->beta1, .beta2 = (float)o->beta2, .eps = 1e-8f,
                               .weight_decay = (float)o->weight_decay};
    tc->clip = (float)o->clip;
    tc->seed = o->seed;
    return train_config_check(tc, err);
}

/* What the planner is asked for this run: its model, batch, precision,
 * clipping and budgets, the best candidate only; its progress shown on
 * stderr through *progress. */
static plan_request run_plan_request(const session *s, cli_plan_progress *progress) {
    const train_run_config *rc = &s->rc;
    plan_request q = plan_default_request();
    q.model = rc->train.model;
    q.T = rc->train.T;
    q.global_batch = (int)s->o.batch;
    q.precision = rc->train.precision;
    q.clipping = rc->train.clip > 0;
    q.mem_device = rc->mem_device;
    q.mem_host = rc->mem_host;
    q.n_best = 1;
    cli_plan_progress_start(progress);
    q.progress = cli_plan_progress_show, q.progress_ctx = progress;
    return q;
}

/* --plan auto: the planner decides the schedule, micro-batch, placement and alpha. */
static st_status plan_auto(session *s, st_error *err) {
    train_opts *o = &s->o;
    train_run_config *rc = &s->rc;
    if (strcmp(o->plan, "auto") != 0) return st_fail(err, ST_EINVAL, "--plan: only 'auto' is known, not '%s'", o->plan);
    if (!rc->executor) return st_fail(err, ST_EINVAL, "--plan auto chooses the schedule; drop --schedule memory");
    if (!o->hw)
        return st_fail(err, ST_EINVAL, "--plan auto needs --hw FILE, a description of this machine: write one with "
                                       "'strata probe --store DIR --out FILE' (about 20 s, on an idle machine)");
    hw_desc hw;
    st_status st = cli_load_hw(o->hw, &hw, err);
    if (st != ST_OK) return st;
    cli_plan_progress progress;
    plan_request q = run_plan_request(s, &progress);
    plan_result pr;
    if ((st = plan_search(&hw, &q, &pr, err)) != ST_OK) return st;
    const plan_choice *best = &pr.best[0];
    rc->schedule = best->config.schedule;
    o->schedule = rc->schedule == SCHED_VERTICAL ? "vertical" : "horizontal";
    o->micro_batch = rc->train.B = best->config.B;
    rc->train.micro_batches = best->config.micro_batches;
    o->alpha = rc->alpha = best->config.alpha;
    o->grad_buffers = rc->grad_buffers = best->config.grad_buffers;
    rc->place = best->config.place;
    o->offload = placement_name(rc->place, s->plan_list, sizeof s->plan_list);
    s->auto_offload = 0;
    printf("plan (%s, %d candidates simulated): --schedule %s --micro-batch %d --alpha %.2f --grad-buffers %d "
           "--offload %s; predicted %.2f s per step (%.0f tokens/s), bound by %s\n",
           hw.name, pr.simulated, o->schedule, rc->train.B, o->alpha, layout_grad_buffers(rc->grad_buffers), o->offload,
           best->result.iter_s,
           best->result.tokens_per_s, sim_resource_name(best->result.bottleneck));
    return train_config_check(&rc->train, err);
}

/* --offload auto with --hw FILE (and no --plan): the placement, fractions
 * included, that the simulator predicts fastest within the budgets for the
 * run's schedule, micro-batch and alpha (without a description the executor
 * takes the least traffic, train_run_auto_placement). */
static st_status offload_auto_by_time(session *s, st_error *err) {
    train_opts *o = &s->o;
    train_run_config *rc = &s->rc;
    hw_desc hw;
    st_status st = cli_load_hw(o->hw, &hw, err);
    if (st != ST_OK) return st;
    cli_plan_progress progress;
    plan_request q = run_plan_request(s, &progress);
    q.micro_batches = q.max_micro_batches = rc->train.micro_batches;
    q.schedule = (int)rc->schedule;
    q.alpha = rc->alpha;
    q.grad_buffers = rc->grad_buffers;
    plan_result pr;
    if ((st = plan_search(&hw, &q, &pr, err)) != ST_OK) return st;
    const plan_choice *best = &pr.best[0];
    rc->place = best->config.place;
    o->offload = placement_name(rc->place, s->plan_list, sizeof s->plan_list);
    s->auto_offload = 0;
    printf("offload auto (%s, %d placements simulated): --offload %s; predicted %.2f s per step (%.0f tokens/s), "
           "bound by %s\n",
           hw.name, pr.simulated, o->offload, best->result.iter_s, best->result.tokens_per_s,
           sim_resource_name(best->result.bottleneck));
    return ST_OK;
}

/* --tokenizer (else the tokenizer.json of --init's directory): its
 * vocabulary must be the data's and fit the model's; it goes into the run
 * directory, which is then a model directory that sample reads whole. */
static st_status check_tokenizer(session *s, st_error *err) {
    char beside[4200];
    const char *path = cli_model_tokenizer(s->o.tokenizer, s->init ? hf_checkpoint_dir(s->init) : NULL, beside,
                                           sizeof beside);
    if (!path) return ST_OK;
    tokenizer *tok;
    st_status st = tokenizer_load_path(&tok, path, err);
    if (st != ST_OK) return st;
    const uint64_t fp = tokenizer_fingerprint(tok);
    const int V = tokenizer_vocab_size(tok);
    st = vocab_fingerprint_check(s->train_path, s->vocab_fp, tokenizer_source(tok), fp, err);
    if (st == ST_OK && V > s->rc.train.model.vocab_size)
        st = st_fail(err, ST_EINVAL, "%s has %d tokens, more than the model's vocabulary of %d", tokenizer_source(tok),
                     V, s->rc.train.model.vocab_size);
    struct stat sb;
    const int dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    if (st == ST_OK && !strstr(tokenizer_source(tok), "encoder.json") &&   /* a tokenizer.json, not GPT-2's own files */
        snprintf(s->tokenizer_json, sizeof s->tokenizer_json, "%s%s", path, dir ? "/tokenizer.json" : "") >=
            (int)sizeof s->tokenizer_json)
        st = st_fail(err, ST_EINVAL, "%s: path too long", path);
    if (st == ST_OK && !s->vocab_fp) s->vocab_fp = fp;   /* data without a fingerprint: the tokenizer's */
    tokenizer_free(tok);
    return st;
}

/* The training and validation files, each checked now rather than at its
 * first use: every id within the model's vocabulary, and one batch's worth
 * of tokens (a micro-batch for validation). */
static st_status open_data(session *s, st_error *err) {
    const train_config *tc = &s->rc.train;
    batch_loader val;
    st_status st = dataset_resolve(s->o.data, s->train_path, s->val_path, sizeof s->train_path, err);
    if (st == ST_OK) st = token_file_open(&s->train_tf, s->train_path, s->data_format, err);
    if (st == ST_OK) st = token_file_open(&s->val_tf, s->val_path, s->data_format, err);
    const int same = st == ST_OK && st_same_path(s->train_path, s->val_path);
    if (st == ST_OK && !same)
        st = vocab_fingerprint_check(s->train_path, token_file_vocab_fingerprint(s->train_tf), s->val_path,
                                     token_file_vocab_fingerprint(s->val_tf), err);
    if (st == ST_OK) {
        s->vocab_fp = token_file_vocab_fingerprint(s->train_tf);
        if (!s->vocab_fp) s->vocab_fp = token_file_vocab_fingerprint(s->val_tf);
    }
    /* the weights --init starts from know their vocabulary when Strata saved them */
    const uint64_t init_fp = s->init ? hf_checkpoint_vocab_fingerprint(s->init) : 0;
    if (st == ST_OK) st = vocab_fingerprint_check(s->train_path, s->vocab_fp, s->o.init, init_fp, err);
    if (st == ST_OK && !s->vocab_fp) s->vocab_fp = init_fp;
    if (st == ST_OK) st = check_tokenizer(s, err);
    if (st == ST_OK) st = token_file_check_ids(s->train_tf, tc->model.vocab_size, err);
    if (st == ST_OK && !same) st = token_file_check_ids(s->val_tf, tc->model.vocab_size, err);
    if (st == ST_OK)
        st = batch_loader_init(&s->loader, s->train_tf, (int)s->o.batch, tc->T, tc->model.vocab_size, err);
    if (st == ST_OK) st = batch_loader_init(&val, s->val_tf, tc->B, tc->T, tc->model.vocab_size, err);
    if (st == ST_OK && same && s->rank == 0)   /* said once, by rank 0 */
        fprintf(stderr,
                "strata: warning: the validation data is the training data itself (%s): the validation loss will "
                "say how well the model remembers its training text, not how it does on text it has not seen; "
                "give a dataset with a validation split of its own ('strata prepare' makes one)\n",
                s->train_path);
    return st;
}

/* The --store of the run in dir (n = 0: none, or no run there). */
static st_status previous_run_store(const char *dir, store_dirs *out, st_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/run.json", dir);
    out->n = 0;
    if (access(path, F_OK) != 0) return ST_OK;
    train_opts r = train_opts_defaults();
    cJSON *doc = NULL;
    st_status st = cli_config_apply(&train_spec, &r, path, &doc, err);
    if (st == ST_OK && r.store) st = store_dirs_parse(r.store, out, err);
    cJSON_Delete(doc);
    return st;
}

/* A fresh run's --store: its directories are made if missing, and a store
 * already there is refused unless it is the one of the run --overwrite
 * replaces. That one is set aside (STORE_ASIDE in each directory) until
 * this run commits, and put back if it fails first, as the run directory's
 * files are. */
#define STORE_ASIDE ".previous-run-store"
static st_status claim_store(session *s, const store_dirs *previous, st_error *err) {
    for (int i = 0; i < s->dirs.n; i++) {
        st_status st = st_mkdir_p(s->dirs.paths[i], err);
        if (st != ST_OK) return st;
    }
    const int replaced = previous->n && store_dirs_same(previous, &s->dirs);
    if (!store_dirs_hold_store(&s->dirs))   /* what the replaced run's creation of it left, if anything */
        return replaced ? store_remove(&s->dirs, err) : ST_OK;
    if (!replaced)
        return st_fail(err, ST_EEXIST,
                       "--store %s already holds a store that is not %s's%s; choose other directories, or delete its "
                       "files (strata-store.*) if nothing needs it",
                       s->dirs.list, s->o.run_dir,
                       previous->n ? "" : s->o.overwrite ? " (the run there has no --store)" : "");
    char list[sizeof s->aside.list];
    size_t len = 0;
    for (int i = 0; i < s->dirs.n; i++) {   /* DIR/STORE_ASIDE for each DIR, as a list */
        const int w = snprintf(list + len, sizeof list - len, "%s%s/" STORE_ASIDE, i ? "," : "", s->dirs.paths[i]);
        if (w < 0 || (size_t)w >= sizeof list - len) return st_fail(err, ST_EINVAL, "store paths too long");
        len += (size_t)w;
    }
    st_status st = store_dirs_parse(list, &s->aside, err);
    if (st == ST_OK && store_dirs_hold_store(&s->aside))
        return st_fail(err, ST_EEXIST,
                       "%s holds a store: an earlier --overwrite was interrupted and the run before it kept its state "
                       "there; move its files back into %s or delete them",
                       s->aside.paths[0], s->dirs.paths[0]);
    if (st == ST_OK) st = store_move(&s->dirs, &s->aside, err);
    if (st == ST_OK) s->has_aside = 1;
    return st;
}

/* What the store holds on disk and why it is that large, once its commit
 * tensors exist (after the first commit). */
static void print_store_size(const session *s) {
    char d[32], c[32];
    const uint64_t commit_bytes = (uint64_t)gpt_num_params(&s->rc.train.model) * 12;
    printf("store: %s on disk in %s: each committed tensor twice, so that a commit never overwrites the last one: "
           "the fp32 master weights and both Adam moments, 2 x 12 bytes a parameter (2 x %s), and padding%s\n",
           st_format_bytes((double)store_dirs_disk_bytes(&s->dirs), d, sizeof d), s->dirs.list,
           st_format_bytes((double)commit_bytes, c, sizeof c),
           s->rc.executor && placement_any_ssd(s->rc.place) ? "; also the state --offload keeps on the SSD" : "");
}

/* The run has committed: what it overwrote goes for good. */
static void run_committed(session *s) {
    if (!s->store_size_said) print_store_size(s);
    s->store_size_said = 1;
    run_dir_committed(s->rd);
    s->committed = 1;
    if (s->has_aside) {
        st_error e = {0};
        store_remove(&s->aside, &e);
        for (int i = 0; i < s->aside.n; i++) rmdir(s->aside.paths[i]);
        s->has_aside = 0;
    }
}

/* Resuming on another number of ranks than made the commit (resharding):
 * its record is read from the committing ranks' stores, which must all be
 * of one step, and this rank's new store must be none of theirs (the state
 * moves). A crash between the ranks' commits leaves some a step ahead: the
 * run goes back to the step all completed (s->commit), and those ranks'
 * stores go back to it in go_back_old_ranks. Rank r checks the chunks of
 * old ranks r, r + N, ... */
static st_status reshard_commit(session *s, st_error *err) {
    const int old = s->resume_ranks;
    st_status st = ST_OK;
    st_error e = {0};
    long *steps = malloc(sizeof(long) * (size_t)old);
    if (!steps) return st_fail(err, ST_ENOMEM, "out of memory");
    long target = s->commit.step;
    for (int r = 0; r < old && st == ST_OK; r++) {
        store_dirs d;
        ckpt_record c;
        int found = 0;
        if ((st = store_dirs_of_rank(&s->old_given, r, old, &d, err)) != ST_OK) break;
        if (store_dirs_same(&d, &s->dirs)) {
            st = st_fail(err, ST_EINVAL,
                         "%s: its last commit is %d rank%s', and resuming on %d moves the state: rank %d of the "
                         "commit keeps its share in %s, where rank %d would keep its own; give other directories "
                         "with --store (each rank's spelled below them, or with %%r)",
                         s->o.run_dir, old, old > 1 ? "s" : "", s->ranks, r, d.paths[0], s->rank);
        } else if ((st = train_run_last_commit(&d, &c, &found, &e)) != ST_OK || !found) {
            s->state_damaged = 1;
            st = st_fail(err, st != ST_OK ? st : ST_ENOENT, "%s: rank %d of its last commit's %d: %s", s->o.run_dir,
                         r, old, st != ST_OK ? e.msg : "no commit in its store");
        } else if ((c.ranks > 1 ? c.ranks : 1) != old) {
            st = st_fail(err, ST_ECORRUPT, "%s: the store of rank %d of its last commit's %d holds a commit of %d "
                         "ranks", s->o.run_dir, r, old, c.ranks > 1 ? c.ranks : 1);
        }
        steps[r] = found ? c.step : 0;
        if (st == ST_OK && c.step < target) target = c.step;
    }
    long ahead = target;
    for (int r = 0; r < old && st == ST_OK; r++) {
        store_dirs d;
        ckpt_record prev;
        int kept = 0;
        ahead = steps[r] > ahead ? steps[r] : ahead;
        if ((st = store_dirs_of_rank(&s->old_given, r, old, &d, err)) != ST_OK) break;
        if (steps[r] != target) {   /* ahead: it goes back to the commit before its last */
            if ((st = train_run_commit_before_last(&d, &prev, &kept, &e)) != ST_OK || !kept || prev.step != target) {
                st = st_fail(err, st != ST_OK ? st : ST_ECORRUPT,
                             "%s: the committing ranks' last commits differ (step %ld and step %ld, rank %d's), and "
                             "rank %d's store no longer keeps the commit of step %ld%s%s: start again from "
                             "model.safetensors with --init", s->o.run_dir, target, steps[r], r, r, target,
                             st != ST_OK ? ": " : "", st != ST_OK ? e.msg : "");
                break;
            }
            if (r == 0) s->commit = prev;
        } else if (r % s->ranks == s->rank && (st = train_run_verify_commit(&d, &s->checked, &e)) != ST_OK) {
            s->state_damaged = 1;
            st = st_fail(err, st, "%s: its last commit (step %ld, rank %d's in %s) is damaged: %s", s->o.run_dir,
                         target, r, d.paths[0], e.msg);
        }
    }
    free(steps);
    if (st == ST_OK && ahead != target && s->rank == 0)
        printf("the job stopped while its ranks committed step %ld, and some had not: their stores go back to the "
               "commit of step %ld\n", ahead, target);
    return st;
}

/* Resharding, after reshard_commit on every rank: the committing ranks'
 * stores that are a commit ahead of the run go back (this rank's share
 * of them: old ranks r, r + N, ...), and are checked there. */
static st_status go_back_old_ranks(session *s, st_error *err) {
    st_status st = ST_OK;
    st_error e = {0};
    for (int r = s->rank; r < s->resume_ranks && st == ST_OK; r += s->ranks) {
        store_dirs d;
        ckpt_record c;
        int found = 0;
        if ((st = store_dirs_of_rank(&s->old_given, r, s->resume_ranks, &d, err)) != ST_OK ||
            (st = train_run_last_commit(&d, &c, &found, err)) != ST_OK || !found || c.step == s->commit.step)
            continue;
        if ((st = store_revert_commit(&d, err)) != ST_OK) break;
        if ((st = train_run_verify_commit(&d, &s->checked, &e)) != ST_OK) {
            s->state_damaged = 1;
            st = st_fail(err, st, "%s: its commit of step %ld (rank %d's in %s) is damaged: %s", s->o.run_dir,
                         s->commit.step, r, d.paths[0], e.msg);
        }
    }
    return st;
}

/* Removes the committing ranks' stores this rank checked (r, r + N, ...),
 * once every rank has committed the state resharded. */
static st_status remove_old_ranks(session *s, st_error *err) {
    st_status st = ST_OK;
    for (int r = s->rank; r < s->resume_ranks && st == ST_OK; r += s->ranks) {
        store_dirs d;
        if ((st = store_dirs_of_rank(&s->old_given, r, s->resume_ranks, &d, err)) == ST_OK) st = store_remove(&d, err);
    }
    return st;
}

/* Resuming, no commit of this number of ranks where this rank would keep
 * it: the commit may be another number of ranks' (one process keeps its
 * store in the directories themselves, several ranks below them): *found
 * and the commit's ranks then, from its rank 0's record. */
static st_status find_other_ranks_commit(session *s, int *found, st_error *err) {
    st_error e = {0};
    for (int several = 0; several < 2 && !*found; several++) {
        store_dirs d;
        ckpt_record c;
        int there = 0;
        st_status st = store_dirs_of_rank(&s->old_given, 0, several ? 2 : 1, &d, &e);
        if (st == ST_OK) st = train_run_last_commit(&d, &c, &there, &e);
        if (st != ST_OK || !there || (c.ranks > 1) != several || c.rank != 0) continue;
        *found = 1;
        if (s->ranks > 1 && c.ranks == s->ranks) {
            /* as many ranks, and this rank's store holds no commit where rank
             * 0's does: the job stopped inside the ranks' first commit, which
             * agree_commit finds (step -1: none) */
            s->commit = (ckpt_record){.step = -1, .ranks = s->ranks, .rank = s->rank};
            s->resume_ranks = s->ranks;
            return ST_OK;
        }
        s->commit = c;
        s->old_dirs = d;
        s->resume_ranks = c.ranks > 1 ? c.ranks : 1;
    }
    return *found ? reshard_commit(s, err) : ST_OK;
}

static st_status take_commit(session *s, st_error *err);

/* The run directory and the store every run commits to: --store, or
 * RUN_DIR/store. run.json records --store (as absolute paths) and not the
 * default, so that it stays a --config file for another run directory. A
 * resumed run finds its state where it last committed (run.json's "store"),
 * and continues from that commit. */
static st_status open_run_dir(session *s, st_error *err) {
    train_opts *o = &s->o;
    char default_store[4200];
    snprintf(default_store, sizeof default_store, "%s/store", o->run_dir);
    if (o->store && absolute_paths(o->store, s->store_abs, sizeof s->store_abs, err) != ST_OK) return err->status;
    if (o->store) o->store = s->store_abs;
    if (strchr(o->run_dir, ','))   /* a list of store directories splits at commas */
        return st_fail(err, ST_EINVAL,
                       "--run-dir %s: the name holds a comma, and the run's default store, RUN_DIR/store, would be "
                       "read as a list of directories split there; rename it", o->run_dir);
    st_status st = store_dirs_parse(o->store ? o->store : default_store, &s->dirs, err);
    if (st == ST_OK) st = store_dirs_parse(default_store, &s->default_dirs, err);
    /* several ranks: each its own directories (cli/ranks.h) */
    if (st == ST_OK) st = store_dirs_of_rank(&s->dirs, s->rank, s->ranks, &s->dirs, err);
    if (st == ST_OK) st = store_dirs_of_rank(&s->default_dirs, s->rank, s->ranks, &s->default_dirs, err);
    if (st != ST_OK) {
        char msg[sizeof err->msg];
        memcpy(msg, err->msg, sizeof msg);
        return st_fail(err, st, "--store: %s", msg);
    }
    s->rc.store = &s->dirs;
    if (!o->resume) {
        store_dirs previous = {.n = 0};   /* the store of the run --overwrite replaces */
        if (o->store && o->overwrite && (st = previous_run_store(o->run_dir, &previous, err)) != ST_OK) return st;
        if (previous.n && (st = store_dirs_of_rank(&previous, s->rank, s->ranks, &previous, err)) != ST_OK) return st;
        if (s->rank == 0) {   /* the job's one run directory */
            char *settings = run_settings_json(o);
            st = settings ? run_dir_create(&s->rd, o->run_dir, settings, o->overwrite, err)
                          : st_fail(err, ST_ENOMEM, "out of memory");
            free(settings);
            if (st == ST_OK && s->tokenizer_json[0]) st = run_dir_save_tokenizer(s->rd, s->tokenizer_json, err);
        }
        if (st == ST_OK && !o->store) st = store_remove(&s->default_dirs, err);
        if (st == ST_OK && o->store) st = claim_store(s, &previous, err);
        s->store_ours = st == ST_OK;
        return st;
    }
    if (s->rank == 0 && (st = run_dir_reopen(&s->rd, o->run_dir, err)) != ST_OK) return st;   /* the lock first */
    if ((st = store_dirs_parse(s->run_store ? s->run_store : default_store, &s->old_given, err)) != ST_OK ||
        (st = store_dirs_of_rank(&s->old_given, s->rank, s->ranks, &s->old_dirs, err)) != ST_OK)
        return st;
    /* RUN_DIR/store is made just after run.json: a run stopped between the
     * two has no store yet, not a lost one (an external --store missing may
     * be a drive not mounted, and stays an error) */
    for (int i = 0; !s->run_store && s->rank == 0 && i < s->old_dirs.n; i++)
        if ((st = st_mkdir_p(s->old_dirs.paths[i], err)) != ST_OK) return st;
    int found;
    st_error e = {0};
    /* several ranks: a commit of another number of ranks may have no store where this rank's would be */
    found = 0;
    if ((s->ranks == 1 || store_dirs_hold_store(&s->old_dirs)) &&
        (st = train_run_last_commit(&s->old_dirs, &s->commit, &found, &e)) != ST_OK) {
        s->state_damaged = 1;
        return st_fail(err, st, "%s: %s", o->run_dir, e.msg);
    }
    s->resume_ranks = found ? (s->commit.ranks > 1 ? s->commit.ranks : 1) : s->ranks;
    if (found && s->resume_ranks != s->ranks) {   /* of another number of ranks: from its rank 0 */
        found = 0;
        s->commit = (ckpt_record){0};
    }
    if (!found && (st = find_other_ranks_commit(s, &found, err)) != ST_OK) return st;
    if (!found) {
        s->never_committed = 1;
        return st_fail(err, ST_ENOENT, "%s: the run stopped before its first commit (--commit-every, --save-every)",
                       o->run_dir);
    }
    /* several ranks in place: first they agree on the step (agree_commit) */
    return s->ranks > 1 && s->resume_ranks == s->ranks ? ST_OK : take_commit(s, err);
}

/* Resuming: the run continues from s->commit, this rank's (or, resharding,
 * the committing ranks'): it is held to the run, checked chunk by chunk,
 * and the data position, the metrics and the executor's resume follow it. */
static st_status take_commit(session *s, st_error *err) {
    train_opts *o = &s->o;
    st_status st;
    st_error e = {0};
    const int resharding = s->resume_ranks != s->ranks;
    if (!resharding && s->commit.rank != s->rank)
        return st_fail(err, ST_ECORRUPT, "%s: the store in %s holds rank %d's commit, not rank %d's", o->run_dir,
                       s->old_dirs.list, s->commit.rank, s->rank);
    st = train_run_check_commit(&s->commit, &s->rc.train.model, token_file_count(s->train_tf), o->steps, err);
    if (st == ST_OK) st = vocab_fingerprint_check(s->train_path, s->vocab_fp, "the run's last commit",
                                                  s->commit.vocab_fingerprint, err);
    if (st != ST_OK) return st;
    if (!s->vocab_fp) s->vocab_fp = s->commit.vocab_fingerprint;
    const double t_check = st_now();
    if (!resharding && (st = train_run_verify_commit(&s->old_dirs, &s->checked, &e)) != ST_OK) {
        s->state_damaged = 1;
        return st_fail(err, st, "%s: its last commit (step %ld, in %s) is damaged: %s", o->run_dir, s->commit.step,
                       s->old_dirs.list, e.msg);
    }
    s->check_seconds = st_now() - t_check;
    s->loader.pos = s->commit.data_pos;
    s->loader.epoch = s->commit.data_epoch;
    if (s->rank == 0 && (st = run_dir_cut_to(s->rd, s->commit.step, err)) != ST_OK) return st;
    if (store_dirs_same(&s->dirs, &s->default_dirs)) o->store = NULL;   /* back in RUN_DIR/store: the default again */
    s->rc.resume = resharding ? &s->old_given : &s->old_dirs;   /* resharding: every committing rank's */
    s->rc.resume_ranks = s->resume_ranks;
    s->rc.resume_steps = s->commit.step;
    s->move_store = !store_dirs_same(&s->dirs, &s->old_dirs);
    /* in place the state tensors stay as they were cut; moved, they are cut anew */
    s->rc.segment_elems = s->move_store || resharding ? 0 : s->commit.segment;
    int removed = 0;
    if (s->move_store && (st = train_run_prepare_move(&s->dirs, &s->commit, &removed, err)) != ST_OK) return st;
    if (removed)
        printf("removed an unfinished copy of this run's state from %s (an interrupted resume)\n", s->dirs.paths[0]);
    return ST_OK;
}

static void print_header(const session *s) {
    const train_opts *o = &s->o;
    const train_config *tc = &s->rc.train;
    printf("model: %d layers, %d heads, d_model %d, context %d, vocab %d: %.2fM parameters (%s)\n", tc->model.n_layer,
           tc->model.n_head, tc->model.d_model, tc->model.n_ctx, tc->model.vocab_size,
           (double)gpt_num_real_params(&tc->model) / 1e6, o->resume ? "resumed" : o->init ? o->init : "fresh init");
    printf("data: %s (%llu tokens), validation %s (%llu tokens)\n", s->train_path,
           (unsigned long long)token_file_count(s->train_tf), s->val_path,
           (unsigned long long)token_file_count(s->val_tf));
    printf("batch: %ld x %ld tokens per step (%d micro-batches of %d), %ld steps, %s, %d threads\n", o->batch, o->seq,
           tc->micro_batches, tc->B, o->steps, o->precision, omp_get_max_threads());
    if (s->ranks > 1)
        printf("ranks: %d, data parallel: each trains %d of the micro-batches and keeps 1/%d of the state, rank 0's in "
               "%s\n", s->ranks, tc->micro_batches / s->ranks, s->ranks, s->dirs.list);
    if (o->resume) {
        char bytes[32];
        printf("resuming %s from its commit at step %ld of %ld%s%s\n", o->run_dir, s->commit.step, o->steps,
               s->move_store ? "; moving its state to " : "", s->move_store ? s->dirs.list : "");
        printf("the commit is intact: %llu tensors, %s read back and checked in %.2f s\n",
               (unsigned long long)s->checked.tensors,
               st_format_bytes((double)s->checked.bytes, bytes, sizeof bytes), s->check_seconds);
    }
    if (s->extended_from) {   /* the cosine is stretched to the new end: say what that does to the rate */
        lr_schedule before = tc->lr;
        before.total = s->extended_from;
        printf("extending the run from %ld to %ld steps: the learning rate's decay to --min-lr %.3g now ends at step "
               "%ld instead of %ld, so step %ld trains at %.3g (it would have at %.3g)\n",
               s->extended_from, o->steps, (double)tc->lr.min_lr, o->steps, s->extended_from, s->commit.step + 1,
               (double)lr_schedule_at(&tc->lr, s->commit.step), (double)lr_schedule_at(&before, s->commit.step));
    }
    char when[320];
    commit_policy_describe(&s->commits, o->save_every, when, sizeof when);
    printf("%s\n", when);
}

/* The buffers the run allocates up front (docs/ARCHITECTURE.md, "What a
 * run prints"): the executor's by tier, the in-memory trainer's in one. */
static void print_memory_need(const train_run_config *rc) {
    const uint64_t need = train_run_memory_need(rc);
    char all[32];
    st_format_bytes((double)need, all, sizeof all);
    if (!rc->executor) {
        printf("memory: %s of buffers (%llu bytes: weights, gradients, Adam moments, activations, commit staging), "
               "allocated up front\n", all, (unsigned long long)need);
        return;
    }
    const offload_config oc = train_run_executor_config(rc);
    layout_memory m;
    offload_memory_need(&oc, &m);
    char dv[32], hv[32];
    printf("memory: device working set %s, host %s; %s of buffers (%llu bytes), allocated up front\n",
           st_format_bytes((double)m.device, dv, sizeof dv), st_format_bytes((double)m.host, hv, sizeof hv), all,
           (unsigned long long)need);
}

/* Where each kind of state is, when a kind is split between memory and
 * the SSD: which parts, and their share of the kind's bytes. */
static void print_split(const offload_config *oc) {
    static const char *what[PLACE_KINDS] = {"compute weights", "optimizer state", "checkpoints", "gradients"};
    int split = 0;
    for (int k = 0; k < PLACE_KINDS; k++) {
        const double share = placement_share(oc->place, (place_kind)k);
        split |= share > 0 && share < 1;
    }
    run_layout l;
    if (!split || offload_layout(oc, &l, NULL) != ST_OK) return;
    printf("placement:");
    for (int k = 0; k < PLACE_KINDS; k++) {
        const int n = sched_parts(&l.sched, (place_kind)k), units = placement_units(oc->place, (place_kind)k, n);
        const double bytes = k == PLACE_ACTS ? (double)units / n
                                             : 1.0 - (double)layout_memory_elems(&l, (place_kind)k) / (double)l.n_local;
        printf("%s %s ", k ? ";" : "", what[k]);
        if (units == 0) printf("in memory");
        else if (units == n) printf("on the SSD");
        else if (k == PLACE_ACTS) printf("%.0f%% on the SSD (blocks 1-%d's inputs)", 100 * bytes, units);
        else printf("%.0f%% on the SSD (units %d-%d of 0-%d)", 100 * bytes, n - units, n - 1, n - 1);
    }
    printf("\n");
    layout_free(&l);
}

/* The executor's plan, as the run starts: memory, schedule, SSD traffic. */
static void print_executor_plan(const session *s) {
    const train_run_config *rc = &s->rc;
    const offload_config oc = train_run_executor_config(rc);
    char placed[128];
    print_memory_need(rc);
    const int any_ssd = placement_any_ssd(rc->place);
    const int opt_streams = placement_streams_optimizer(rc->place);
    char buffers[64] = "";
    if (rc->place.grads > 0)
        snprintf(buffers, sizeof buffers, ", %d block gradient buffers", layout_grad_buffers(rc->grad_buffers));
    printf("schedule: %s, alpha %.2f, on the SSD: %s%s%s%s; commits to %s\n", s->o.schedule, s->o.alpha,
           any_ssd ? placement_name(rc->place, placed, sizeof placed) : "nothing",
           opt_streams ? ", optimizer I/O " : "", opt_streams ? opt_io_order_name(rc->opt_io) : "", buffers,
           s->dirs.list);
    print_split(&oc);
    layout_traffic traffic;
    st_error err = {0};
    if (any_ssd && offload_traffic_per_step(&oc, &traffic, &err) == ST_OK) {
        char tr[32], tw[32];
        printf("SSD traffic per step of this schedule and placement: %s read, %s written (%llu, %llu bytes)\n",
               st_format_bytes((double)traffic.total_read, tr, sizeof tr),
               st_format_bytes((double)traffic.total_written, tw, sizeof tw), (unsigned long long)traffic.total_read,
               (unsigned long long)traffic.total_written);
    }
}

/* Every rank says how it went (ranks_agree): afterwards the ranks are in
 * step, and a failure is known to all. */
static st_status agree(session *s, st_status st, st_error *err) {
    int peer = 0;
    st = ranks_agree(s->comm, st, &peer, err);
    if (st != ST_OK) s->failure_shared = 1;
    if (peer) s->peer_failed = 1;   /* (kept when a later agreement only repeats the failure) */
    return st;
}

/* Resuming on several ranks: every rank's last commit must be of one
 * step. A crash between the ranks' commits of a step leaves some ranks a
 * commit ahead; their stores still keep the commit before (store_commit
 * keeps it until the store next writes, and no rank writes after a commit
 * before every rank has completed it), so they go back to it. Resharding,
 * the committing ranks' stores go back (go_back_old_ranks). */
static st_status agree_commit(session *s, st_status st, st_error *err) {
    if ((st = agree(s, st, err)) != ST_OK) return st;
    if (s->resume_ranks != s->ranks) return agree(s, go_back_old_ranks(s, err), err);
    if (s->ranks < 2) return ST_OK;
    /* each rank's last step and the one its store keeps before it (-1: none,
     * or none readable: that matters only to a rank that must go back) */
    ckpt_record prev;
    int kept = 0;
    st_error prev_err = {0};
    int64_t *steps = malloc(sizeof(int64_t) * 2 * (size_t)s->ranks);
    if ((st = agree(s, steps ? ST_OK : st_fail(err, ST_ENOMEM, "out of memory"), err)) != ST_OK) {
        free(steps);
        return st;
    }
    const int prev_unreadable = s->commit.step >= 0 &&
                                train_run_commit_before_last(&s->old_dirs, &prev, &kept, &prev_err) != ST_OK;
    int64_t mine[2] = {s->commit.step, kept ? prev.step : -1};
    st = comm_allgather(s->comm, mine, sizeof mine, steps, err);
    int64_t target = st == ST_OK ? steps[0] : 0, ahead = 0;   /* (steps unset when the gather failed) */
    for (int r = 0; st == ST_OK && r < s->ranks; r++) target = steps[2 * r] < target ? steps[2 * r] : target;
    for (int r = 0; st == ST_OK && r < s->ranks; r++) {
        if (steps[2 * r] == target) continue;
        ahead = steps[2 * r];
        if (target < 0 || steps[2 * r + 1] == target) continue;
        if (r == s->rank && prev_unreadable) fprintf(stderr, "strata: rank %d of %d: %s\n", s->rank, s->ranks, prev_err.msg);
        s->failure_shared = 1, s->peer_failed = s->rank != 0;   /* rank 0 says it */
        st = st_fail(err, ST_ECORRUPT,
                     "%s: the ranks' last commits differ (step %lld, and rank %d's of step %lld), and rank %d's "
                     "store no longer keeps the commit of step %lld: start again from model.safetensors with --init",
                     s->o.run_dir, (long long)target, r, (long long)steps[2 * r], r, (long long)target);
    }
    free(steps);
    if (st != ST_OK) return st;
    if (target < 0) {   /* some rank never completed a commit: there is none to go on from */
        s->failure_shared = 1, s->peer_failed = s->rank != 0, s->never_committed = 1;
        return st_fail(err, ST_ENOENT, "%s: the run stopped before every rank had completed its first commit "
                       "(--commit-every, --save-every)", s->o.run_dir);
    }
    if (ahead && s->rank == 0)
        printf("the job stopped while the ranks committed step %lld, and some had not: those that had go back to "
               "their commit of step %lld\n", (long long)ahead, (long long)target);
    int found = 1;
    if (s->commit.step != target && (st = store_revert_commit(&s->old_dirs, err)) == ST_OK &&
        (st = train_run_last_commit(&s->old_dirs, &s->commit, &found, err)) == ST_OK &&
        (!found || s->commit.step != target))
        st = st_fail(err, ST_ECORRUPT, "%s: rank %d's store went back to another commit than step %lld's",
                     s->o.run_dir, s->rank, (long long)target);
    if (st == ST_OK) st = take_commit(s, err);
    return agree(s, st, err);
}

/* Commits the state of the last completed step, with its record (step,
 * model, data position, the rank), and says what it cost. */
static st_status commit_state(session *s, st_error *err) {
    const ckpt_record c = {.step = train_run_steps_done(s->run), .model = s->rc.train.model,
                           .data_pos = s->loader.pos, .data_epoch = s->loader.epoch,
                           .data_tokens = token_file_count(s->train_tf), .vocab_fingerprint = s->vocab_fp,
                           .ranks = s->ranks, .rank = s->rank};
    const double t0 = st_now();
    st_status st = agree(s, train_run_commit(s->run, &c, err), err);   /* every rank's share is durable */
    if (st != ST_OK) return st;
    s->last_commit_end = st_now();
    s->last_commit_cost = s->last_commit_end - t0;
    const double next = c.step < s->o.steps && !s->stopping ? commit_policy_interval(&s->commits, s->last_commit_cost) : 0;
    if (next > 0) printf("committed step %ld in %.2f s; the next in %.0f s\n", c.step, s->last_commit_cost, next);
    else printf("committed step %ld in %.2f s\n", c.step, s->last_commit_cost);
    return ST_OK;
}

/* The weights of the last completed step into the run directory, then a
 * commit of the whole state at that step (what --resume, strata export and
 * strata fsck read). */
static st_status save_weights(session *s, st_error *err) {
    const double t0 = st_now();
    st_status st = run_dir_sync_metrics(s->rd, err);
    if (st == ST_OK) st = train_run_flush(s->run, err);
    if (st == ST_OK && s->rank == 0) {   /* each unit gathered from every rank's shard as rank 0 names it */
        ranks_unit_source src = {.c = s->comm, .read_unit = train_run_read_unit, .ctx = s->run};
        st = run_dir_save_weights(s->rd, &s->rc.train.model, ranks_read_unit, &src, s->vocab_fp, err);
        if (st == ST_OK) st = ranks_reads_done(s->comm, err);
    } else if (st == ST_OK) {
        size_t largest = 0;
        for (int u = 0; u < gpt_num_units(&s->rc.train.model); u++)
            if (gpt_unit_numel(&s->rc.train.model, u) > largest) largest = gpt_unit_numel(&s->rc.train.model, u);
        float *unit = malloc(largest * sizeof(float));
        st = unit ? ranks_follow_reads(s->comm, train_run_read_unit, s->run, unit, err)
                  : st_fail(err, ST_ENOMEM, "out of memory for a unit");
        free(unit);
    }
    if (st == ST_OK) printf("saved model.safetensors in %.2f s\n", st_now() - t0);
    if (st == ST_OK) st = commit_state(s, err);
    return st;
}

/* The run: its trainer created (the executor's placement chosen first, for
 * --offload auto with budgets); a resumed run that moved its state commits
 * it where it is now, records that, then removes it from where it was. */
static st_status create_run(session *s, st_error *err) {
    train_run_config *rc = &s->rc;
    st_status st = fault_parse(getenv("STRATA_FAULT"), &s->fault, err);
    if (st != ST_OK) return st;
    if (s->fault.armed_after >= 0) {
        io_engine_config ec = io_engine_default_config();
        if ((st = io_engine_create(&ec, &rc->io, err)) != ST_OK) return st;
    }
    const double t_create = st_now();
    if (rc->executor) {
        if (s->auto_offload && (rc->mem_host || rc->mem_device) &&
            (st = train_run_auto_placement(rc, &rc->place, err)) != ST_OK)
            return st;
        print_executor_plan(s);
    } else {
        print_memory_need(rc);
        printf("schedule: memory (the in-memory trainer); commits to %s\n", s->dirs.list);
    }
    rc->init_read = s->init ? hf_checkpoint_read_unit : NULL;
    rc->init_ctx = s->init;
    st = train_run_create(&s->run, rc, NULL, err);
    hf_checkpoint_close(s->init);   /* read: the run has the weights */
    s->init = NULL;
    if (st != ST_OK) return st;
    s->committed = s->o.resume != NULL;
    if (!s->o.resume) return ST_OK;
    if (s->move_store && (st = commit_state(s, err)) != ST_OK) return st;
    if (s->rank == 0) {
        char *settings = run_settings_json(&s->o);
        st = settings ? run_dir_write_settings(s->rd, settings, err) : st_fail(err, ST_ENOMEM, "out of memory");
        free(settings);
    }
    if (st == ST_OK && s->move_store)
        st = s->resume_ranks != s->ranks ? remove_old_ranks(s, err) : store_remove(&s->old_dirs, err);
    if (st == ST_OK) printf("resumed in %.2f s\n", st_now() - t_create);
    return st;
}

/* Mean loss over eval_batches micro-batches from the start of the validation file. */
static st_status validation_loss(session *s, float *out, st_error *err) {
    const train_config *tc = &s->rc.train;
    batch_loader bl;
    st_status st = batch_loader_init(&bl, s->val_tf, tc->B, tc->T, tc->model.vocab_size, err);
    if (st != ST_OK) return st;
    double sum = 0;
    for (long i = 0; i < s->o.eval_batches; i++) {
        float loss;
        if ((st = batch_loader_next(&bl, tc->B, s->tokens, err)) != ST_OK ||
            (st = train_run_eval(s->run, s->tokens, tc->B, tc->T, &loss, err)) != ST_OK)
            return st;
        sum += loss;
    }
    *out = (float)(sum / (double)s->o.eval_batches);
    return ST_OK;
}

/* A non-finite loss (or gradient norm) from a fresh run's initial weights,
 * before any update: the weights are at fault, not the learning rate. */
static st_status fail_initial_weights(const session *s, const char *what, st_error *err) {
    if (s->o.init)
        return st_fail(err, ST_EINVAL,
                       "%s: these initial weights give a non-finite %s before any training: the file holds NaN or "
                       "infinite values, or values too large to compute with; check or replace it (lowering --lr "
                       "cannot help)",
                       s->o.init, what);
    return st_fail(err, ST_EINVAL,
                   "the model's random initial weights (--seed %llu) give a non-finite %s before any training; "
                   "lowering --lr cannot help: this is a bug in strata, please report it with the command line",
                   (unsigned long long)s->o.seed, what);
}

/* The steps from the commit (or 0) to --steps, or to a stop signal, with
 * validation, metrics, progress, and the commits and saves asked for.
 * Returns the validation losses at the start and the end. */
static st_status train_loop(session *s, float *first_val, float *val_loss, double *train_seconds, st_error *err) {
    const train_opts *o = &s->o;
    st_status st;
    const int tty = cli_stdout_is_tty();
    const double start = st_now(), tokens_per_step = (double)o->batch * (double)o->seq;
    *first_val = *val_loss = NAN;
    *train_seconds = 0;
    if (!o->resume && o->eval_every > 0) {   /* --eval-every 0: only at the end */
        if ((st = validation_loss(s, first_val, err)) != ST_OK) return st;
        if (!isfinite(*first_val)) {
            char what[64];
            snprintf(what, sizeof what, "validation loss (%f)", *first_val);
            return fail_initial_weights(s, what, err);
        }
        *val_loss = *first_val;
        printf("step 0: validation loss %.4f\n", *first_val);
        if ((st = run_dir_log_metrics(s->rd, err, "{\"step\": 0, \"val_loss\": %.6f}", *first_val)) != ST_OK) return st;
    }
    const long first_step = s->commit.step + 1;
    s->last_commit_end = st_now();   /* time-based commits count training time from here */
    /* several ranks: each loads the global batch and trains its micro-batches of it */
    const int32_t *mine = s->tokens + (size_t)s->rank * (size_t)(o->batch / s->ranks) * (size_t)(o->seq + 1);
    int commit = 0;
    if ((st = ranks_step_flags(s->comm, stop_signal != 0, 0, &s->stopping, &commit, err)) != ST_OK) return st;
    for (long step = first_step; step <= o->steps && !s->stopping; step++) {
        train_step_stats ss;
        if ((st = batch_loader_next(&s->loader, (int)o->batch, s->tokens, err)) != ST_OK ||
            (st = train_run_step(s->run, mine, &ss, err)) != ST_OK)
            return st;
        s->steps_trained++;
        *train_seconds += ss.seconds;
        if (!isfinite(ss.loss) || !isfinite(ss.grad_norm)) {
            char what[96];
            snprintf(what, sizeof what, "loss (%f, gradient norm %f) at step 1", ss.loss, ss.grad_norm);
            if (!o->resume && step == 1) return fail_initial_weights(s, what, err);   /* computed before any update */
            return st_fail(err, ST_EINVAL, "loss became %f (gradient norm %f) at step %ld; lower --lr or enable --clip",
                           ss.loss, ss.grad_norm, step);
        }
        const double tok_s = tokens_per_step / ss.seconds, elapsed = st_now() - start;
        const double eta = *train_seconds / (double)(step - first_step + 1) * (double)(o->steps - step);
        const int do_eval = (o->eval_every > 0 && step % o->eval_every == 0) || step == o->steps;
        if (do_eval && (st = validation_loss(s, val_loss, err)) != ST_OK) return st;
        /* the loss with every digit of the float, so that runs compare exactly */
        st = run_dir_log_metrics(s->rd, err,
                                 do_eval ? "{\"step\": %ld, \"loss\": %.9g, \"lr\": %.6g, \"grad_norm\": %.6f, "
                                           "\"tokens_per_s\": %.1f, \"step_s\": %.4f, \"elapsed_s\": %.3f, "
                                           "\"val_loss\": %.6f}"
                                         : "{\"step\": %ld, \"loss\": %.9g, \"lr\": %.6g, \"grad_norm\": %.6f, "
                                           "\"tokens_per_s\": %.1f, \"step_s\": %.4f, \"elapsed_s\": %.3f}",
                                 step, ss.loss, ss.lr, ss.grad_norm, tok_s, ss.seconds, elapsed, *val_loss);
        if (st != ST_OK) return st;
        char el[32], et[32];
        format_duration(elapsed, el, sizeof el);
        format_duration(eta, et, sizeof et);
        if (tty) {
            printf("\r\033[Kstep %ld/%ld | loss %.4f | val %.4f | lr %.2e | %.0f tok/s | %s elapsed | ETA %s", step,
                   o->steps, ss.loss, *val_loss, ss.lr, tok_s, el, et);
            if (do_eval && step != o->steps) printf("\n");
            fflush(stdout);
        } else if (step % o->log_every == 0 || step == first_step || do_eval) {
            printf("step %ld/%ld loss %.4f lr %.2e grad_norm %.3f %.0f tok/s elapsed %s eta %s\n", step, o->steps,
                   ss.loss, ss.lr, ss.grad_norm, tok_s, el, et);
            if (do_eval) printf("step %ld: validation loss %.4f\n", step, *val_loss);
            fflush(stdout);
        }
        if (s->fault.armed_after == step) io_engine_set_fault(s->rc.io, &s->fault.fault);
        const int save = o->save_every > 0 && step % o->save_every == 0 && step != o->steps;
        commit = commit_policy_due(&s->commits, step, st_now() - s->last_commit_end, s->last_commit_cost) &&
                 step != o->steps;
        /* the ranks stop, and commit, at the same step (rank 0's time decides the commits) */
        if ((st = ranks_step_flags(s->comm, stop_signal != 0, commit, &s->stopping, &commit, err)) != ST_OK) return st;
        if (save || commit) {
            if (tty) printf("\n");
            st = save ? save_weights(s, err) : run_dir_sync_metrics(s->rd, err);
            if (st == ST_OK && !save) st = commit_state(s, err);
            if (st != ST_OK) return st;
            run_committed(s);
        }
    }
    if (tty) printf("\n");
    return ST_OK;
}

/* The end of a run (its last step, or a stop signal): weights saved and the
 * state committed, then what it did. */
static st_status finish(session *s, float first_val, float val_loss, double train_seconds, double start,
                        st_error *err) {
    const train_opts *o = &s->o;
    const long done = train_run_steps_done(s->run);
    st_status st;
    if (s->stopping) {
        printf("stopping after step %ld on %s; saving the weights and committing\n", done,
               strsignal(stop_signal ? stop_signal : SIGTERM));
        if ((st = validation_loss(s, &val_loss, err)) != ST_OK) return st;
    }
    if ((st = save_weights(s, err)) != ST_OK) return st;
    run_committed(s);
    char plot_msg[256] = "", peak[32], bufs[32];
    run_dir_plot(s->rd, plot_msg, sizeof plot_msg);
    const long trained = done - s->commit.step;
    const double tokens_per_step = (double)o->batch * (double)o->seq;
    char losses[96];   /* a resumed run has no loss at its start; a stopped one may have none at its end */
    if (isnan(val_loss)) snprintf(losses, sizeof losses, "no validation loss yet");
    else if (isnan(first_val)) snprintf(losses, sizeof losses, "validation loss %.4f", val_loss);
    else snprintf(losses, sizeof losses, "validation loss %.4f -> %.4f", first_val, val_loss);
    /* the wall time includes evaluations, saves and commits; tokens/s is the steps' own */
    printf("done: %ld steps in %.1f s, %.1f s of it in the steps (%.0f tokens/s), %s\n", trained, st_now() - start,
           train_seconds, trained > 0 ? tokens_per_step * (double)trained / train_seconds : 0.0, losses);
    const uint64_t allocated = train_run_memory_allocated(s->run);
    printf("memory: peak resident %s (RSS): the run's buffers, %s (%llu bytes allocated), and the rest of the "
           "process (code, libraries, thread pools, a batch, one unit while saving)\n",
           st_format_bytes((double)st_peak_rss_bytes(), peak, sizeof peak),
           st_format_bytes((double)allocated, bufs, sizeof bufs), (unsigned long long)allocated);
    printf("weights: %s/model.safetensors (+ config.json)\nmetrics: %s/metrics.jsonl\n%s\n", o->run_dir, o->run_dir,
           plot_msg);
    if (train_run_executor(s->run))
        print_executor_summary(train_run_executor(s->run), o->trace, s->ranks, comm_stats(s->comm).bytes_sent);
    return ST_OK;
}

/* After a failure: what of the run is intact, and the command that goes on
 * from it. Only what is true: a commit is called intact only when nothing
 * said the store was damaged. */
static void print_recovery(const session *s, st_status st) {
    const char *run = s->o.run_dir;
    if (s->committed && !s->state_damaged && s->ranks > 1) {
        /* each rank's store keeps its last commit and the one before: resuming
         * goes back where a rank had not completed the last (agree_commit) */
        if (st == ST_ECORRUPT || st == ST_EIO)
            fprintf(stderr,
                    "strata: %s; 'strata fsck %s' checks every rank's store, and if they are intact, this continues "
                    "the run from the last commit every rank completed: mpirun -np %d strata train --resume %s\n",
                    st == ST_ECORRUPT ? "data read back from the store failed its checksum" : "a drive failed a transfer",
                    run, s->ranks, run);
        else
            fprintf(stderr, "strata: the last commit every rank completed is intact; continue the run with: mpirun -np "
                    "%d strata train --resume %s\n", s->ranks, run);
        return;
    }
    if (s->committed && !s->state_damaged) {
        if (st == ST_ECORRUPT || st == ST_EIO)   /* the drive or its data may be failing: look before going on */
            fprintf(stderr,
                    "strata: %s; 'strata fsck %s' says whether the run's last commit is intact, and if it is, this "
                    "continues it: strata train --resume %s\n",
                    st == ST_ECORRUPT ? "data read back from the store failed its checksum" : "a drive failed a transfer",
                    run, run);
        else
            fprintf(stderr, "strata: the run's last commit is intact; continue it with: strata train --resume %s\n", run);
        return;
    }
    if (!s->state_damaged && !s->never_committed) return;   /* nothing of the run's to save */
    if (s->state_damaged) fprintf(stderr, "strata: 'strata fsck %s' lists the damage\n", run);
    /* --store's directories hold this run's state: a new run must not reuse them */
    const char *new_store = s->run_store ? " --store NEW_STORE_DIR" : "";
    char mpirun[32] = "";   /* a job of several ranks starts again as one */
    if (s->ranks > 1) snprintf(mpirun, sizeof mpirun, "mpirun -np %d ", s->ranks);
    char weights[4200];
    struct stat sb;
    snprintf(weights, sizeof weights, "%s/model.safetensors", run);
    if (stat(weights, &sb) == 0) {
        char when[64];
        strftime(when, sizeof when, "%Y-%m-%d %H:%M", localtime(&sb.st_mtime));
        fprintf(stderr,
                "strata: intact: %s, the weights of the run's last save (%s). To train on from them (the optimizer "
                "state and the learning-rate schedule start again):\n"
                "  %sstrata train --config %s/run.json --init %s --run-dir NEW_RUN_DIR%s\n",
                weights, when, mpirun, run, weights, new_store);
    }
    fprintf(stderr,
            "strata: to start the run again from step 0 (this deletes %s's metrics and weights):\n"
            "  %sstrata train --config %s/run.json --run-dir %s --overwrite\n",
            run, mpirun, run, run);
}

/* A fresh run failed before its first commit: its store holds nothing
 * worth keeping (and the space it reserved goes back), and the store it set
 * aside with --overwrite comes back. */
static void undo_store(session *s) {
    if (!s->store_ours) return;
    st_error e = {0};
    store_remove(s->o.store ? &s->dirs : &s->default_dirs, &e);
    if (s->has_aside && store_move(&s->aside, &s->dirs, &e) == ST_OK)
        for (int i = 0; i < s->aside.n; i++) rmdir(s->aside.paths[i]);
    else if (s->has_aside)
        fprintf(stderr, "strata: could not put the overwritten run's store back from %s: %s\n", s->aside.list, e.msg);
}

/* Everything after the flags: the run from start to end. Returns the exit code. */
static int run_session(session *s) {
    st_error err = {0};
    /* From the start, so that a stop asked for while the run is set up (or by
     * a script that started us in the background, where SIGINT comes in
     * ignored) stops it at the first step boundary instead of being lost. */
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    s->rc.comm = s->comm;   /* several ranks: the executor shards the state over them */
    st_status st = build_train_config(s, &err);
    if (st == ST_OK && s->o.plan) st = plan_auto(s, &err);
    else if (st == ST_OK && s->o.hw && s->auto_offload && s->rc.executor && (s->rc.mem_host || s->rc.mem_device))
        st = offload_auto_by_time(s, &err);
    if (st == ST_OK) st = open_data(s, &err);
    /* rank 0's run directory first (the other ranks' stores may be in it) */
    if (st == ST_OK && s->rank == 0) st = open_run_dir(s, &err);
    st = agree(s, st, &err);
    if (st == ST_OK && s->rank > 0) st = open_run_dir(s, &err);
    if (s->o.resume) st = agree_commit(s, st, &err);
    if (st == ST_OK) {
        print_header(s);
        st = create_run(s, &err);
    }
    if (st == ST_OK && !(s->tokens = malloc(sizeof(int32_t) * (size_t)s->o.batch * (size_t)(s->o.seq + 1))))
        st = st_fail(&err, ST_ENOMEM, "out of memory for a batch");
    st = agree(s, st, &err);   /* every rank is ready, or none trains */
    float first_val = NAN, val_loss = NAN;
    double train_seconds = 0;
    const double start = st_now();
    if (st == ST_OK) st = train_loop(s, &first_val, &val_loss, &train_seconds, &err);
    if (st == ST_OK) st = finish(s, first_val, val_loss, train_seconds, start, &err);
    int rc;
    if (st == ST_OK) rc = s->stopping ? 128 + (stop_signal ? stop_signal : SIGTERM) : 0;
    else if (s->peer_failed) rc = 1;   /* that rank says why */
    else rc = s->ranks > 1 ? cli_error("rank %d of %d: %s", s->rank, s->ranks, err.msg) : cli_fail(&err);
    if (st != ST_OK && !s->peer_failed && (s->rank == 0 || s->committed)) print_recovery(s, st);   /* (rank 0's files) */
    if (st != ST_OK && !s->failure_shared && s->ranks > 1) {
        /* the other ranks may be waiting for this one in a collective it
         * left: the job ends here (its stores keep their last commits) */
        fflush(stdout);
        fflush(stderr);
        comm_abort(s->comm, rc);
    }
    const int ok = rc == 0 || rc == 128 + SIGINT || rc == 128 + SIGTERM;   /* stopped on request: committed */
    train_run_free(s->run);   /* the store closed before its files move */
    if (s->rc.io) io_engine_destroy(s->rc.io);   /* after the store that used it */
    if (!ok && !s->committed) undo_store(s);
    /* a fresh run that failed before it trained or committed leaves nothing behind; a resumed run keeps all */
    const int discard = !s->o.resume && !s->committed && !s->steps_trained;
    run_dir_finish(s->rd, ok ? RUN_SUCCEEDED : discard ? RUN_DISCARDED : RUN_FAILED);
    token_file_close(s->train_tf);
    token_file_close(s->val_tf);
    hf_checkpoint_close(s->init);
    free(s->tokens);
    return rc;
}

/* What several ranks cannot do yet, or need: a usage error (each rank
 * finds the same), or 0. */
static int check_ranks(const session *s) {
    const train_opts *o = &s->o;
    if (s->ranks < 2) return 0;
    const long M = o->batch / o->micro_batch;
    if (M % s->ranks)
        return cli_usage_error("train", "%d ranks: --batch %ld / --micro-batch %ld = %ld micro-batches, which %d ranks "
                                        "cannot share evenly; give a number of micro-batches that %d divides",
                               s->ranks, o->batch, o->micro_batch, M, s->ranks, s->ranks);
    if (!s->rc.executor)
        return cli_usage_error("train", "several ranks (mpirun) need the schedule executor: --schedule vertical or "
                                        "horizontal, not memory");
    if (o->plan || o->hw)
        return cli_usage_error("train", "--plan and --hw plan for one process; with several ranks (mpirun) give "
                                        "--schedule and --offload");
    return 0;
}

/* Started by mpirun as several ranks, the ranks train one run together
 * (cli/ranks.h); without mpirun this touches no MPI (strata/comm.h). The
 * other ranks print nothing but their own errors: their standard output
 * goes nowhere, and while the flags are checked (every rank finds the same
 * fault) their errors too, so that a usage error is said once, by rank 0. */
static int silence(int rank, int *saved_stderr) {
    *saved_stderr = -1;
    if (rank == 0) return 0;
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull < 0) return -1;
    fflush(stdout);
    fflush(stderr);
    *saved_stderr = dup(STDERR_FILENO);
    dup2(devnull, STDOUT_FILENO);
    dup2(devnull, STDERR_FILENO);
    close(devnull);
    return 0;
}

static void unsilence(int saved_stderr) {
    if (saved_stderr < 0) return;
    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
}

/* Ends every rank's part before the run starts with exit code rc: no rank
 * ends (and has mpirun stop the others) before rank 0 has said why. */
static int end_ranks(comm *c, int rc) {
    st_error err = {0};
    if (comm_size(c) > 1 && comm_barrier(c, &err) != ST_OK) cli_fail(&err);
    comm_close(c);
    return rc;
}

int cmd_train(int argc, char **argv) {
    train_opts o = train_opts_defaults();
    st_error err = {0};
    cli_parsed flags;
    comm *c;
    if (comm_open(&c, &err) != ST_OK) return cli_fail(&err);
    int saved_stderr;
    if (silence(comm_rank(c), &saved_stderr) != 0) {
        comm_close(c);
        return cli_error("rank %d: cannot send its output to /dev/null: %s", comm_rank(c), strerror(errno));
    }
    int rc = cli_parse_flags(&train_spec, argc, argv, &o, &flags);
    if (rc != CLI_PARSED) {
        unsilence(saved_stderr);
        return end_ranks(c, rc);
    }
    cJSON *docs[2] = {flags.config, NULL};   /* --config's and run.json's: o's strings point into them */
#define USAGE_ERROR(...)                                   \
    do {                                                   \
        cJSON_Delete(docs[0]);                             \
        cJSON_Delete(docs[1]);                             \
        rc = cli_usage_error("train", __VA_ARGS__);        \
        unsilence(saved_stderr);                           \
        return end_ranks(c, rc);                           \
    } while (0)
    const char *run_store = NULL;   /* --resume: where the run last committed */
    long extended_from = 0;         /* --resume with a larger --steps: the steps before */
    if (o.resume) {
        if (docs[0]) USAGE_ERROR("--resume takes the settings from the run's run.json; drop --config");
        if (merge_resume(&o, flags.given, &docs[1], &run_store, &extended_from, &err) != ST_OK) {
            cJSON_Delete(docs[1]);
            rc = cli_fail(&err);
            unsilence(saved_stderr);
            return end_ranks(c, rc);
        }
    }
    session s = {.o = o, .run_store = run_store, .extended_from = extended_from, .last_commit_cost = -1,
                 .comm = c, .rank = comm_rank(c), .ranks = comm_size(c)};
    rc = check_flags(&s);
    if (rc == 0) rc = check_ranks(&s);
    unsilence(saved_stderr);
    if (rc == 0) rc = run_session(&s);
    rc = end_ranks(c, rc);
    cJSON_Delete(docs[0]);
    cJSON_Delete(docs[1]);
    return rc;
}
