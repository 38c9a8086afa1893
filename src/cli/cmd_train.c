/* cmd_train.c - `strata train`: the main job. Reads a dataset, trains a GPT
 * in memory, reports progress, writes metrics, a loss plot and the weights
 * into a run directory. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
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
#include "cli/run_dir.h"
#include "strata/batches.h"
#include "strata/gpt_io.h"
#include "strata/offload.h"
#include "strata/planner.h"
#include "strata/train.h"

typedef struct train_opts {
    const char *model, *init, *data, *run_dir, *precision, *schedule, *offload, *store;
    long n_layer, n_head, d_model, n_ctx, vocab;
    long batch, micro_batch, seq, steps, warmup, threads;
    double lr, min_lr, clip, weight_decay, beta1, beta2, alpha;
    long eval_every, eval_batches, log_every, save_every;
    uint64_t seed;
    const char *mem_device, *mem_host, *trace, *plan, *hw;
    int recompute, overwrite;
} train_opts;

enum opt_type { OPT_STR, OPT_LONG, OPT_DOUBLE, OPT_U64, OPT_FLAG, OPT_NOFLAG };
typedef struct opt_def {
    const char *name;
    enum opt_type type;
    size_t offset;
    const char *help;
} opt_def;

#define O(field) offsetof(train_opts, field)
static const opt_def opt_defs[] = {
    {"model", OPT_STR, O(model), "NAME    model shape by name (gpt2-124m, gpt2-mini, ...)"},
    {"n-layer", OPT_LONG, O(n_layer), "N       explicit shape: layers"},
    {"n-head", OPT_LONG, O(n_head), "N       explicit shape: attention heads"},
    {"d-model", OPT_LONG, O(d_model), "N       explicit shape: width"},
    {"n-ctx", OPT_LONG, O(n_ctx), "N       longest sequence the model supports (default: --seq)"},
    {"vocab", OPT_LONG, O(vocab), "N       vocabulary size (default 50257, GPT-2's)"},
    {"init", OPT_STR, O(init), "FILE    start from these weights (.safetensors) to fine-tune"},
    {"data", OPT_STR, O(data), "PATH    dataset directory (strata prepare) or token file"},
    {"batch", OPT_LONG, O(batch), "N       sequences per optimizer step (global batch)"},
    {"micro-batch", OPT_LONG, O(micro_batch), "N       sequences per forward/backward (default: --batch)"},
    {"seq", OPT_LONG, O(seq), "T       tokens per sequence"},
    {"steps", OPT_LONG, O(steps), "N       optimizer steps"},
    {"lr", OPT_DOUBLE, O(lr), "X       peak learning rate"},
    {"min-lr", OPT_DOUBLE, O(min_lr), "X       final learning rate (default lr/10)"},
    {"warmup", OPT_LONG, O(warmup), "N       warmup steps (default steps/10)"},
    {"clip", OPT_DOUBLE, O(clip), "X       global gradient-norm clipping, 0 = off"},
    {"weight-decay", OPT_DOUBLE, O(weight_decay), "X       AdamW weight decay on matrices"},
    {"beta1", OPT_DOUBLE, O(beta1), "X       AdamW beta1"},
    {"beta2", OPT_DOUBLE, O(beta2), "X       AdamW beta2"},
    {"precision", OPT_STR, O(precision), "P       fp32 or mixed (bf16 compute weights, fp32 master)"},
    {"recompute", OPT_FLAG, O(recompute), "        keep only block inputs, recompute in backward (default)"},
    {"no-recompute", OPT_NOFLAG, O(recompute), "        keep all activations (faster, more memory)"},
    {"schedule", OPT_STR, O(schedule), "S       vertical (default), horizontal (the schedule executor: units\n"
                                       "                          streamed, optimizer per unit), or memory (the plain\n"
                                       "                          in-memory trainer)"},
    {"alpha", OPT_DOUBLE, O(alpha), "X       executor: share of each unit's optimizer step deferred to the next forward"},
    {"offload", OPT_STR, O(offload), "LIST    executor: state kept on the SSD store: weights,optim,acts,grads,\n"
                                     "                          none, or auto (default: the least SSD traffic that fits\n"
                                     "                          the budgets)"},
    {"store", OPT_STR, O(store), "DIRS    store directories, comma separated, one per drive (default RUN_DIR/store)"},
    {"mem-device", OPT_STR, O(mem_device), "SIZE    executor: budget for the compute working set (e.g. 512M; default none)"},
    {"trace", OPT_STR, O(trace), "FILE    executor: write a Chrome trace (Perfetto) of compute, optimizer, SSD paths"},
    {"mem-host", OPT_STR, O(mem_host), "SIZE    executor: budget for state kept in host memory (e.g. 2G; default none)"},
    {"plan", OPT_STR, O(plan), "auto    choose --schedule, --micro-batch, --offload and --alpha for --batch and the\n"
                               "                          budgets by simulating the candidates (strata plan; needs --hw)"},
    {"hw", OPT_STR, O(hw), "FILE    hardware description for --plan (write one with strata probe)"},
    {"threads", OPT_LONG, O(threads), "N       compute threads (default: all cores)"},
    {"seed", OPT_U64, O(seed), "S       initialization seed"},
    {"run-dir", OPT_STR, O(run_dir), "DIR     where metrics, plot and weights go"},
    {"overwrite", OPT_FLAG, O(overwrite), "        replace a run already in --run-dir"},
    {"eval-every", OPT_LONG, O(eval_every), "N       validation loss every N steps (0 = only at the end)"},
    {"eval-batches", OPT_LONG, O(eval_batches), "N       micro-batches of validation data per evaluation"},
    {"log-every", OPT_LONG, O(log_every), "N       a log line every N steps when stdout is not a terminal"},
    {"save-every", OPT_LONG, O(save_every), "N       also save the weights every N steps (0 = at the end)"},
};
#define N_OPTS (sizeof opt_defs / sizeof opt_defs[0])

static void usage(FILE *f) {
    fprintf(f, "usage: strata train --data PATH [--model NAME | --init FILE] [flags]\n"
               "       strata train --config FILE.json [flags]   (flags override the file)\n\n");
    for (size_t i = 0; i < N_OPTS; i++) fprintf(f, "  --%-13s %s\n", opt_defs[i].name, opt_defs[i].help);
    fprintf(f, "  --%-13s %s\n", "config", "FILE    JSON object of the same settings: {\"model\": \"gpt2-mini\", \"steps\": 200}");
    fprintf(f, "\nModels: %s.\n", gpt_config_names());
}

static st_status apply_opt(train_opts *o, const opt_def *d, const char *value, st_error *err) {
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", d->name);
    void *field = (char *)o + d->offset;
    switch (d->type) {
    case OPT_STR: *(const char **)field = value; return ST_OK;
    case OPT_LONG: return cli_parse_int(flag, value, 0, INT_MAX, (long *)field, err);   /* used as int */
    case OPT_DOUBLE: return cli_parse_double(flag, value, 0, 1e9, (double *)field, err);
    case OPT_U64: return cli_parse_u64(flag, value, (uint64_t *)field, err);
    case OPT_FLAG: *(int *)field = 1; return ST_OK;
    case OPT_NOFLAG: *(int *)field = 0; return ST_OK;
    }
    return ST_OK;
}

/* Settings from a JSON config file; the keys are the long flag names. The
 * parsed document is returned so that string values outlive this call. */
static st_status apply_config_file(train_opts *o, const char *path, cJSON **doc, st_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return st_fail_errno(err, errno, "%s: cannot open config file", path);
    char *buf = malloc(1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    int too_big = buf && n == (1 << 20) - 1 && fgetc(f) != EOF;
    fclose(f);
    if (!buf) return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    if (too_big) {
        free(buf);
        return st_fail(err, ST_EINVAL, "%s: config file larger than 1 MiB", path);
    }
    buf[n] = 0;
    *doc = cJSON_Parse(buf);
    free(buf);
    if (!*doc || !cJSON_IsObject(*doc)) return st_fail(err, ST_EINVAL, "%s: not a JSON object", path);
    for (cJSON *it = (*doc)->child; it; it = it->next) {
        const opt_def *d = NULL;
        for (size_t i = 0; i < N_OPTS; i++)
            if (!strcmp(opt_defs[i].name, it->string)) d = &opt_defs[i];
        if (!d) return st_fail(err, ST_EINVAL, "%s: unknown setting \"%s\"", path, it->string);
        char num[64];
        const char *value = NULL;
        if (cJSON_IsString(it)) value = it->valuestring;
        else if (cJSON_IsNumber(it)) {
            if (d->type == OPT_DOUBLE) snprintf(num, sizeof num, "%.17g", it->valuedouble);
            else snprintf(num, sizeof num, "%.0f", it->valuedouble);
            if (d->type != OPT_DOUBLE && it->valuedouble != floor(it->valuedouble))
                return st_fail(err, ST_EINVAL, "%s: \"%s\" must be an integer", path, it->string);
            value = num;
        } else if (cJSON_IsBool(it) && (d->type == OPT_FLAG || d->type == OPT_NOFLAG)) {
            int on = cJSON_IsTrue(it);
            *(int *)((char *)o + d->offset) = d->type == OPT_FLAG ? on : !on;
            continue;
        } else {
            return st_fail(err, ST_EINVAL, "%s: \"%s\" has the wrong type", path, it->string);
        }
        if (d->type == OPT_FLAG || d->type == OPT_NOFLAG)
            return st_fail(err, ST_EINVAL, "%s: \"%s\" must be true or false", path, it->string);
        st_status s = apply_opt(o, d, value, err);
        if (s != ST_OK) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            return st_fail(err, s, "%s: %s", path, msg);
        }
    }
    return ST_OK;
}

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) {
    (void)sig;
    if (stop_requested) _exit(130);   /* a second signal: stop at once */
    stop_requested = 1;
}

static void format_duration(double s, char *buf, size_t n) {
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%02ld:%02ld", t / 60, t % 60);
}

/* The trainer behind a run: the in-memory one, or the schedule executor. */
typedef struct engine {
    trainer *mem;
    offload_trainer *off;
    int has_store;   /* the executor keeps state in an SSD store */
    int vocab;
} engine;

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
}

/* The weights of the last completed step into the run directory; with state
 * on the SSD, the store is committed at that step too, with the model's
 * shape and the step beside it (what `strata export` and `strata fsck`
 * read). */
static st_status save_weights(run_dir *rd, engine *e, const gpt_config *cfg, st_error *err) {
    st_status s = e->off ? offload_trainer_flush(e->off, err) : ST_OK;
    if (s == ST_OK) s = run_dir_save_weights(rd, cfg, engine_read_unit, e, err);
    if (s == ST_OK && e->off && e->has_store) {
        char meta[256];
        const long step = offload_trainer_steps_done(e->off);
        int n = snprintf(meta, sizeof meta,
                         "{\"step\": %ld, \"n_layer\": %d, \"n_head\": %d, \"d_model\": %d, \"n_ctx\": %d, "
                         "\"vocab\": %d}",
                         step, cfg->n_layer, cfg->n_head, cfg->d_model, cfg->n_ctx, cfg->vocab_size);
        const double t0 = st_now();
        s = offload_trainer_commit(e->off, meta, (size_t)n, err);
        if (s == ST_OK) printf("SSD store committed at step %ld in %.2f s\n", step, st_now() - t0);
    }
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
    const cli_model_flags shape = {.name = o->model, .n_layer = o->n_layer, .n_head = o->n_head, .d_model = o->d_model,
                                   .n_ctx = o->n_ctx, .vocab = o->vocab, .seq = o->seq};
    return cli_model_config(&shape, cfg, err);
}

int cmd_train(int argc, char **argv) {
    train_opts o = {.batch = 8, .seq = 256, .steps = 100, .lr = 6e-4, .min_lr = -1, .warmup = -1,
                    .clip = 1.0, .weight_decay = 0.1, .beta1 = 0.9, .beta2 = 0.95, .precision = "fp32",
                    .seed = 1337, .recompute = 1, .run_dir = "runs/latest", .eval_every = 0,
                    .eval_batches = 8, .log_every = 10, .schedule = "vertical", .offload = "auto"};
    st_error err = {0};
    cJSON *config_doc = NULL;
    /* The config file first, so that flags override it. */
    for (int i = 1; i < argc; i++) {
        const char *path = NULL;
        if (!strcmp(argv[i], "--config") && i + 1 < argc) path = argv[i + 1];
        else if (!strncmp(argv[i], "--config=", 9)) path = argv[i] + 9;
        if (path && config_doc) {   /* its strings are in o: one file only */
            cJSON_Delete(config_doc);
            return cli_usage_error("train", "--config may be given once");
        }
        if (path && apply_config_file(&o, path, &config_doc, &err) != ST_OK) {
            cJSON_Delete(config_doc);
            return cli_fail(&err);
        }
    }
    struct option longopts[N_OPTS + 3];
    for (size_t i = 0; i < N_OPTS; i++)
        longopts[i] = (struct option){opt_defs[i].name,
                                      opt_defs[i].type == OPT_FLAG || opt_defs[i].type == OPT_NOFLAG ? no_argument
                                                                                                      : required_argument,
                                      NULL, 1000 + (int)i};
    longopts[N_OPTS] = (struct option){"config", required_argument, NULL, 'c'};
    longopts[N_OPTS + 1] = (struct option){"help", no_argument, NULL, 'h'};
    longopts[N_OPTS + 2] = (struct option){0};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            cJSON_Delete(config_doc);
            return 0;
        }
        if (c == 'c') continue;
        if (c < 1000) {
            cJSON_Delete(config_doc);
            return cli_usage_error("train", "unknown or incomplete flag");
        }
        if (apply_opt(&o, &opt_defs[c - 1000], optarg, &err) != ST_OK) {
            cJSON_Delete(config_doc);
            return cli_usage_error("train", "%s", err.msg);
        }
    }
    int rc = 1;
    if (optind < argc) {
        cJSON_Delete(config_doc);
        return cli_usage_error("train", "unexpected argument '%s'", argv[optind]);
    }
    if (!o.data) {
        cJSON_Delete(config_doc);
        return cli_usage_error("train", "--data is required (a dataset from 'strata prepare' or a token file)");
    }
    if (!o.micro_batch) o.micro_batch = o.batch;
    if (o.batch < 1 || o.micro_batch < 1 || o.batch % o.micro_batch) {
        cJSON_Delete(config_doc);
        return cli_usage_error("train", "--batch %ld must be a positive multiple of --micro-batch %ld", o.batch,
                               o.micro_batch);
    }
    if (o.steps < 1 || o.seq < 1) {
        cJSON_Delete(config_doc);
        return cli_usage_error("train", "--steps and --seq must be at least 1");
    }
    if (o.log_every < 1 || o.eval_batches < 1) {
        cJSON_Delete(config_doc);
        return cli_usage_error("train", "--log-every and --eval-batches must be at least 1");
    }
    gpt_precision precision;
    if (gpt_precision_parse(o.precision, &precision, &err) != ST_OK) {
        cJSON_Delete(config_doc);
        return cli_usage_error("train", "--%s", err.msg);
    }
    /* The schedule and what goes to the SSD. */
    int executor = 0;
    sched_kind kind = SCHED_VERTICAL;
    if (strcmp(o.schedule, "memory") != 0) {
        if (cli_parse_schedule(o.schedule, &kind, &err) != ST_OK) {
            cJSON_Delete(config_doc);
            return cli_usage_error("train", "--schedule must be vertical, horizontal or memory, not '%s'", o.schedule);
        }
        executor = 1;
    }
    cli_placement pl;   /* what lives on the SSD */
    if (cli_parse_offload(o.offload, 1, &pl, &err) != ST_OK) {
        cJSON_Delete(config_doc);
        return cli_usage_error("train", "%s", err.msg);
    }
    int auto_offload = pl.is_auto;
    int any_ssd = pl.weights || pl.optim || pl.acts || pl.grads;
    char auto_list[64] = "";
    if ((any_ssd || o.alpha > 0) && !executor) {
        cJSON_Delete(config_doc);
        return cli_usage_error("train", "--offload and --alpha need --schedule vertical or horizontal");
    }
    if (executor && !o.recompute) {
        cJSON_Delete(config_doc);
        return cli_usage_error("train", "the schedule executor always recomputes activations; drop --no-recompute or use --schedule memory");
    }
    if (o.alpha < 0 || o.alpha > 1) {
        cJSON_Delete(config_doc);
        return cli_usage_error("train", "--alpha %g must be in [0, 1]", o.alpha);
    }
    uint64_t mem_device = 0, mem_host = 0;
    if ((o.mem_device && cli_parse_size("--mem-device", o.mem_device, &mem_device, &err) != ST_OK) ||
        (o.mem_host && cli_parse_size("--mem-host", o.mem_host, &mem_host, &err) != ST_OK)) {
        cJSON_Delete(config_doc);
        return cli_usage_error("train", "%s", err.msg);
    }
    if ((mem_device || mem_host || o.trace) && !executor) {
        cJSON_Delete(config_doc);
        return cli_usage_error("train", "--mem-device, --mem-host and --trace need --schedule vertical or horizontal");
    }
    if (o.threads > 0) omp_set_num_threads((int)o.threads);

    engine eng = {0};
    token_file *train_tf = NULL, *val_tf = NULL;
    float *init = NULL;
    int32_t *tokens = NULL;
    run_dir *rd = NULL;
    train_config tc = train_config_defaults();
    if (build_model_config(&o, &tc.model, &init, &err) != ST_OK) goto fail;
    tc.precision = precision;
    tc.B = (int)o.micro_batch;
    tc.T = (int)o.seq;
    tc.grad_accum = (int)(o.batch / o.micro_batch);
    tc.recompute = o.recompute;
    tc.lr = (lr_schedule){.max_lr = (float)o.lr, .min_lr = (float)(o.min_lr >= 0 ? o.min_lr : o.lr / 10),
                          .warmup = o.warmup >= 0 ? o.warmup : o.steps / 10, .total = o.steps};
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
        tc.grad_accum = best->config.M;
        o.alpha = best->config.alpha;
        pl = (cli_placement){.weights = best->config.weights_on_ssd, .optim = best->config.optim_on_ssd,
                             .acts = best->config.acts_on_ssd, .grads = best->config.grads_on_ssd};
        o.offload = cli_placement_name(&pl, plan_list, sizeof plan_list);
        any_ssd = pl.weights || pl.optim || pl.acts || pl.grads;
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

    /* The run directory: refuse to mix two runs. */
    cJSON *desc = cJSON_CreateObject();
    cJSON_AddNumberToObject(desc, "n_layer", tc.model.n_layer);
    cJSON_AddNumberToObject(desc, "n_head", tc.model.n_head);
    cJSON_AddNumberToObject(desc, "d_model", tc.model.d_model);
    cJSON_AddNumberToObject(desc, "n_ctx", tc.model.n_ctx);
    cJSON_AddNumberToObject(desc, "vocab", tc.model.vocab_size);
    cJSON_AddStringToObject(desc, "init", o.init ? o.init : "");
    cJSON_AddStringToObject(desc, "data", o.data);
    cJSON_AddNumberToObject(desc, "batch", (double)o.batch);
    cJSON_AddNumberToObject(desc, "micro_batch", (double)o.micro_batch);
    cJSON_AddNumberToObject(desc, "seq", (double)o.seq);
    cJSON_AddNumberToObject(desc, "steps", (double)o.steps);
    cJSON_AddNumberToObject(desc, "lr", tc.lr.max_lr);
    cJSON_AddNumberToObject(desc, "min_lr", tc.lr.min_lr);
    cJSON_AddNumberToObject(desc, "warmup", (double)tc.lr.warmup);
    cJSON_AddNumberToObject(desc, "clip", tc.clip);
    cJSON_AddNumberToObject(desc, "weight_decay", tc.adam.weight_decay);
    cJSON_AddStringToObject(desc, "precision", gpt_precision_name(precision));
    cJSON_AddBoolToObject(desc, "recompute", o.recompute);
    cJSON_AddStringToObject(desc, "schedule", o.schedule);
    cJSON_AddNumberToObject(desc, "alpha", o.alpha);
    cJSON_AddStringToObject(desc, "offload", o.offload);
    cJSON_AddNumberToObject(desc, "seed", (double)o.seed);
    char *desc_text = cJSON_Print(desc);
    cJSON_Delete(desc);
    st_status rs = desc_text ? run_dir_create(&rd, o.run_dir, desc_text, o.overwrite, &err)
                             : st_fail(&err, ST_ENOMEM, "out of memory");
    free(desc_text);
    if (rs != ST_OK) goto fail;

    char mem[32];
    printf("model: %d layers, %d heads, d_model %d, context %d, vocab %d: %.2fM parameters (%s)\n", tc.model.n_layer,
           tc.model.n_head, tc.model.d_model, tc.model.n_ctx, tc.model.vocab_size,
           (double)gpt_num_real_params(&tc.model) / 1e6, o.init ? o.init : "fresh init");
    printf("data: %s (%llu tokens), validation %s (%llu tokens)\n", train_path,
           (unsigned long long)token_file_count(train_tf), val_path, (unsigned long long)token_file_count(val_tf));
    printf("batch: %ld x %ld tokens per step (%d micro-batches of %d), %ld steps, %s, %d threads, needs %s\n",
           o.batch, o.seq, tc.grad_accum, tc.B, o.steps, o.precision, omp_get_max_threads(),
           st_format_bytes((double)trainer_memory_bytes(&tc), mem, sizeof mem));
    eng.vocab = tc.model.vocab_size;
    if (executor) {
        /* store directories: --store, or RUN_DIR/store (cleared with --overwrite) */
        char default_store[4200], store_list[4200];
        const char *paths[16];
        int n_paths = 0;
        if (any_ssd || (auto_offload && (mem_host || mem_device))) {
            if (o.store) snprintf(store_list, sizeof store_list, "%s", o.store);
            else {
                snprintf(default_store, sizeof default_store, "%s/store", o.run_dir);
                if (run_dir_clear_store(default_store, &err) != ST_OK) goto fail;
                snprintf(store_list, sizeof store_list, "%s", default_store);
            }
            for (char *save = NULL, *tok = strtok_r(store_list, ",", &save); tok && n_paths < 16;
                 tok = strtok_r(NULL, ",", &save))
                paths[n_paths++] = tok;
        }
        if (auto_offload && (mem_host || mem_device)) {
            /* Of the 16 placements, the one that fits the budgets with the
             * least SSD traffic per step (then: the fewest kinds moved) */
            int found = -1, smallest = 0;
            uint64_t smallest_host = UINT64_MAX, best_traffic = UINT64_MAX;
            for (int cand = 0; cand < 16; cand++) {
                offload_config probe = {.train = tc, .schedule = kind, .alpha = o.alpha,
                                        .weights_on_ssd = cand & 1, .optim_on_ssd = (cand >> 1) & 1,
                                        .acts_on_ssd = (cand >> 2) & 1, .grads_on_ssd = (cand >> 3) & 1};
                offload_memory need;
                offload_traffic traffic;
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
            pl = (cli_placement){.weights = found & 1, .optim = (found >> 1) & 1, .acts = (found >> 2) & 1,
                                 .grads = (found >> 3) & 1};
            any_ssd = found != 0;
            o.offload = cli_placement_name(&pl, auto_list, sizeof auto_list);
        }
        offload_config oc = {.train = tc, .schedule = kind, .alpha = o.alpha, .weights_on_ssd = pl.weights,
                             .optim_on_ssd = pl.optim, .acts_on_ssd = pl.acts, .grads_on_ssd = pl.grads,
                             .store_paths = paths,
                             .n_store_paths = n_paths, .mem_device = mem_device, .mem_host = mem_host,
                             .trace_path = o.trace};
        offload_memory need;
        offload_memory_need(&oc, &need);
        char dv[32], hv[32];
        printf("memory: device working set %s, host %s\n", st_format_bytes((double)need.device, dv, sizeof dv),
               st_format_bytes((double)need.host, hv, sizeof hv));
        printf("schedule: %s, alpha %.2f, on the SSD: %s%s%s\n", o.schedule, o.alpha, any_ssd ? o.offload : "nothing",
               any_ssd ? " in " : "", any_ssd ? (o.store ? o.store : default_store) : "");
        offload_traffic traffic;
        if (any_ssd && offload_traffic_per_step(&oc, &traffic, &err) == ST_OK) {
            char tr[32], tw[32];
            printf("SSD traffic per step of this schedule and placement: %s read, %s written (%llu, %llu bytes)\n",
                   st_format_bytes((double)traffic.total_read, tr, sizeof tr),
                   st_format_bytes((double)traffic.total_written, tw, sizeof tw),
                   (unsigned long long)traffic.total_read, (unsigned long long)traffic.total_written);
        }
        if (offload_trainer_create(&eng.off, &oc, init, &err) != ST_OK) goto fail;
        eng.has_store = any_ssd;
    } else if (trainer_create(&eng.mem, &tc, init, &err) != ST_OK) {
        goto fail;
    }
    st_free_aligned(init);
    init = NULL;
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
    if (validation_loss(&eng, val_tf, tc.B, tc.T, o.eval_batches, tokens, &first_val, &err) != ST_OK) goto fail;
    val_loss = first_val;
    printf("step 0: validation loss %.4f\n", first_val);
    if (run_dir_log_metrics(rd, &err, "{\"step\": 0, \"val_loss\": %.6f}", first_val) != ST_OK) goto fail;
    long step;
    double train_seconds = 0;
    for (step = 1; step <= o.steps && !stop_requested; step++) {
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
        const double eta = train_seconds / (double)step * (double)(o.steps - step);
        int do_eval = (o.eval_every > 0 && step % o.eval_every == 0) || step == o.steps;
        if (do_eval && validation_loss(&eng, val_tf, tc.B, tc.T, o.eval_batches, tokens, &val_loss, &err) != ST_OK)
            goto fail;
        if (run_dir_log_metrics(rd, &err,
                                do_eval ? "{\"step\": %ld, \"loss\": %.6f, \"lr\": %.6g, \"grad_norm\": %.6f, "
                                          "\"tokens_per_s\": %.1f, \"step_s\": %.4f, \"elapsed_s\": %.3f, "
                                          "\"val_loss\": %.6f}"
                                        : "{\"step\": %ld, \"loss\": %.6f, \"lr\": %.6g, \"grad_norm\": %.6f, "
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
        } else if (step % o.log_every == 0 || step == 1 || do_eval) {
            printf("step %ld/%ld loss %.4f lr %.2e grad_norm %.3f %.0f tok/s elapsed %s eta %s\n", step, o.steps,
                   st.loss, st.lr, st.grad_norm, tok_s, el, et);
            if (do_eval) printf("step %ld: validation loss %.4f\n", step, val_loss);
            fflush(stdout);
        }
        if (o.save_every > 0 && step % o.save_every == 0 && step != o.steps &&
            save_weights(rd, &eng, &tc.model, &err) != ST_OK)
            goto fail;
    }
    if (tty) printf("\n");
    long done = engine_steps_done(&eng);
    if (stop_requested) {
        printf("stopping after step %ld on request; saving the weights\n", done);
        if (validation_loss(&eng, val_tf, tc.B, tc.T, o.eval_batches, tokens, &val_loss, &err) != ST_OK) goto fail;
    }
    if (save_weights(rd, &eng, &tc.model, &err) != ST_OK) goto fail;
    char plot_msg[256] = "";
    run_dir_plot(rd, plot_msg, sizeof plot_msg);
    char peak[32];
    printf("done: %ld steps in %.1f s (%.0f tokens/s), validation loss %.4f -> %.4f, peak memory %s\n", done,
           st_now() - start, tokens_per_step * (double)done / train_seconds, first_val, val_loss,
           st_format_bytes((double)st_peak_rss_bytes(), peak, sizeof peak));
    printf("weights: %s/model.safetensors (+ config.json)\nmetrics: %s/metrics.jsonl\n%s\n", o.run_dir, o.run_dir,
           plot_msg);
    if (eng.off) print_executor_summary(eng.off, o.trace);
    rc = stop_requested ? 130 : 0;
    goto out;
fail:
    rc = cli_fail(&err);
out:
    run_dir_finish(rd, rc == 0 || rc == 130);   /* 130: stopped on request, weights saved */
    engine_free(&eng);
    token_file_close(train_tf);
    token_file_close(val_tf);
    st_free_aligned(init);
    free(tokens);
    cJSON_Delete(config_doc);
    return rc;
}
