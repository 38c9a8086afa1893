/* run.c - a training run's engine (strata/run.h): one interface over the
 * in-memory trainer and the schedule executor, and the life of the run's
 * store around them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strata/comm.h"
#include "strata/fs.h"
#include "strata/run.h"

/* What each trainer does for a run. The executor commits to its own store;
 * the in-memory trainer to one the run opens for it. */
typedef struct trainer_ops {
    st_status (*step)(train_run *r, const int32_t *tokens, train_step_stats *stats, st_error *err);
    st_status (*eval)(train_run *r, const int32_t *tokens, int B, int T, float *loss, st_error *err);
    st_status (*flush)(train_run *r, st_error *err);
    st_status (*read_unit)(train_run *r, int unit, float *out, st_error *err);
    st_status (*commit)(train_run *r, const void *meta, size_t n, st_error *err);
    long (*steps_done)(const train_run *r);
    void (*free)(train_run *r);   /* what the trainer holds, not the run itself */
} trainer_ops;

struct train_run {
    const trainer_ops *ops;
    gpt_config model;
    trainer *mem;             /* the in-memory trainer, */
    store *ckpt;              /* the store it commits to, */
    void *stage;              /* and its staging buffer; */
    offload_trainer *off;     /* or the schedule executor */
};

/* ---- the in-memory trainer ------------------------------------------------------------ */

#define MEMORY_COMMIT_SEGMENT ((size_t)1 << 21)   /* elements per state tensor the in-memory trainer commits */

/* Its commit staging: one such segment of f32, padded for the drive. */
static uint64_t memory_stage_bytes(void) { return store_padded_bytes(MEMORY_COMMIT_SEGMENT * 4); }

static st_status memory_step(train_run *r, const int32_t *tokens, train_step_stats *stats, st_error *err) {
    return trainer_step(r->mem, tokens, stats, err);
}
static st_status memory_eval(train_run *r, const int32_t *tokens, int B, int T, float *loss, st_error *err) {
    return trainer_eval(r->mem, tokens, B, T, loss, err);
}
static st_status memory_flush(train_run *r, st_error *err) {
    (void)r, (void)err;
    return ST_OK;   /* every step is whole when it returns */
}
static st_status memory_read_unit(train_run *r, int u, float *out, st_error *err) {
    (void)err;
    memcpy(out, trainer_params(r->mem) + gpt_unit_offset(&r->model, u), gpt_unit_numel(&r->model, u) * sizeof(float));
    return ST_OK;
}
static st_status memory_commit(train_run *r, const void *meta, size_t n, st_error *err) {
    st_status s = trainer_save_state(r->mem, r->ckpt, MEMORY_COMMIT_SEGMENT, r->stage, err);
    if (s == ST_OK) s = store_set_user_meta(r->ckpt, meta, n, err);
    return s == ST_OK ? store_commit(r->ckpt, err) : s;
}
static long memory_steps_done(const train_run *r) { return trainer_steps_done(r->mem); }
static void memory_free(train_run *r) {
    trainer_free(r->mem);
    store_close(r->ckpt);
    st_free_aligned(r->stage);
}

static const trainer_ops memory_ops = {memory_step, memory_eval, memory_flush, memory_read_unit, memory_commit,
                                       memory_steps_done, memory_free};

/* The in-memory trainer, and the store it commits to: reopened in place, or
 * created where the state moves to. */
static st_status memory_create(train_run *r, const train_run_config *c, const float *init, st_error *err) {
    st_status s = init || c->resume || !c->init_read ? trainer_create(&r->mem, &c->train, init, err)
                                        : trainer_create_from(&r->mem, &c->train, c->init_read, c->init_ctx, err);
    if (s != ST_OK) return s;
    const int in_place = c->resume && store_dirs_same(c->store, c->resume);
    store_config sc = store_default_config();
    sc.paths = c->store->paths;
    sc.n_paths = c->store->n;
    sc.mode = in_place ? STORE_OPEN_EXISTING : STORE_CREATE;
    if ((s = store_open(&sc, &r->ckpt, NULL, 0, err)) != ST_OK) return s;
    if (!(r->stage = st_alloc_io((size_t)memory_stage_bytes())))
        return st_fail(err, ST_ENOMEM, "out of memory for the commit buffer");
    memset(r->stage, 0, (size_t)memory_stage_bytes());   /* resident from the start, as the executor's buffers */
    if (!c->resume) return ST_OK;
    store *from = r->ckpt;
    if (!in_place && (s = store_open_read_only(c->resume, 0, &from, err)) != ST_OK) return s;
    ckpt_reader *reader = NULL;
    s = ckpt_reader_open(&reader, from, &c->train.model, err);
    if (s == ST_OK) s = trainer_load_state(r->mem, reader, c->resume_steps, err);
    ckpt_reader_free(reader);
    if (from != r->ckpt) store_close(from);
    return s;
}

/* ---- the schedule executor ------------------------------------------------------------- */

static st_status executor_step(train_run *r, const int32_t *tokens, train_step_stats *stats, st_error *err) {
    return offload_trainer_step(r->off, tokens, stats, err);
}
static st_status executor_eval(train_run *r, const int32_t *tokens, int B, int T, float *loss, st_error *err) {
    return offload_trainer_eval(r->off, tokens, B, T, loss, err);
}
static st_status executor_flush(train_run *r, st_error *err) { return offload_trainer_flush(r->off, err); }
static st_status executor_read_unit(train_run *r, int u, float *out, st_error *err) {
    return offload_trainer_read_unit(r->off, u, out, err);
}
static st_status executor_commit(train_run *r, const void *meta, size_t n, st_error *err) {
    return offload_trainer_commit(r->off, meta, n, err);
}
static long executor_steps_done(const train_run *r) { return offload_trainer_steps_done(r->off); }
static void executor_free(train_run *r) { offload_trainer_free(r->off); }

static const trainer_ops executor_ops = {executor_step, executor_eval, executor_flush, executor_read_unit,
                                         executor_commit, executor_steps_done, executor_free};

offload_config train_run_executor_config(const train_run_config *c) {
    offload_config oc = {.train = c->train, .schedule = c->schedule, .alpha = c->alpha, .place = c->place,
                         .mem_device = c->mem_device, .mem_host = c->mem_host, .trace_path = c->trace_path, .opt_io = c->opt_io,
                         .grad_buffers = c->grad_buffers,
                         .engine = c->io, .resume_steps = c->resume_steps, .init_read = c->init_read,
                         .init_ctx = c->init_ctx, .comm = c->comm, .segment_elems = c->segment_elems};
    if (c->store) oc.store_paths = c->store->paths, oc.n_store_paths = c->store->n;
    if (c->resume) oc.resume_paths = c->resume->paths, oc.n_resume_paths = c->resume->n;
    oc.resume_ranks = c->resume_ranks;
    return oc;
}

/* A layout fits the budgets (layout_least_traffic_placement's test). */
static int fits_budgets(const run_layout *l, void *ctx) {
    const train_run_config *c = ctx;
    return (!c->mem_host || l->memory.host <= c->mem_host) && (!c->mem_device || l->memory.device <= c->mem_device);
}

st_status train_run_auto_placement(const train_run_config *c, placement *out, st_error *err) {
    const offload_config oc = train_run_executor_config(c);
    const layout_params p = offload_layout_params(&oc);
    st_error e = {0};
    st_status s = layout_least_traffic_placement(&p, PLACEMENT_COUNT, fits_budgets, (void *)c, out, &e);
    if (s != ST_ENOENT) {
        if (s != ST_OK && err) *err = e;
        return s;
    }
    /* nothing fits: the smallest, so that creating the run says what it needs */
    uint64_t smallest = UINT64_MAX;
    for (int i = 0; i < PLACEMENT_COUNT; i++) {
        offload_config probe = oc;
        probe.place = placement_at(i);
        layout_memory need;
        offload_memory_need(&probe, &need);
        if (need.host < smallest) smallest = need.host, *out = probe.place;
    }
    return ST_OK;
}

/* ---- the run --------------------------------------------------------------------------- */

st_status train_run_create(train_run **out, const train_run_config *c, const float *init, st_error *err) {
    *out = NULL;
    if (!c->store) return st_fail(err, ST_EINVAL, "a run needs a store to commit to");
    if (!c->executor && c->comm && comm_size(c->comm) > 1)
        return st_fail(err, ST_EUNSUPPORTED, "the in-memory trainer runs on one rank: several ranks need the schedule "
                                             "executor (--schedule vertical or horizontal)");
    train_run *r = calloc(1, sizeof *r);
    if (!r) return st_fail(err, ST_ENOMEM, "out of memory");
    r->model = c->train.model;
    st_status s;
    if (c->executor) {
        r->ops = &executor_ops;
        const offload_config oc = train_run_executor_config(c);
        s = offload_trainer_create(&r->off, &oc, c->resume ? NULL : init, err);
    } else {
        r->ops = &memory_ops;
        s = memory_create(r, c, c->resume ? NULL : init, err);
    }
    if (s == ST_OK) *out = r;
    else train_run_free(r);
    return s;
}

void train_run_free(train_run *r) {
    if (r) r->ops->free(r);
    free(r);
}

st_status train_run_step(train_run *r, const int32_t *tokens, train_step_stats *stats, st_error *err) {
    return r->ops->step(r, tokens, stats, err);
}

st_status train_run_eval(train_run *r, const int32_t *tokens, int B, int T, float *loss, st_error *err) {
    return r->ops->eval(r, tokens, B, T, loss, err);
}

st_status train_run_flush(train_run *r, st_error *err) { return r->ops->flush(r, err); }

st_status train_run_read_unit(void *run, int u, float *out, st_error *err) {
    train_run *r = run;
    if (u < 0 || u >= gpt_num_units(&r->model))
        return st_fail(err, ST_EINVAL, "unit %d out of range [0, %d)", u, gpt_num_units(&r->model));
    return r->ops->read_unit(r, u, out, err);
}

st_status train_run_commit(train_run *r, const ckpt_record *rec, st_error *err) {
    char meta[1024];
    ckpt_record with = *rec;
    with.segment = r->off ? offload_trainer_segment(r->off) : MEMORY_COMMIT_SEGMENT;
    const int n = ckpt_record_format(&with, meta, sizeof meta);
    if (n < 0) return st_fail(err, ST_EINVAL, "commit record too long");
    return r->ops->commit(r, meta, (size_t)n, err);
}

long train_run_steps_done(const train_run *r) { return r->ops->steps_done(r); }

offload_trainer *train_run_executor(train_run *r) { return r->off; }

uint64_t train_run_memory_need(const train_run_config *c) {
    if (!c->executor) return (uint64_t)trainer_memory_bytes(&c->train) + memory_stage_bytes();
    const offload_config oc = train_run_executor_config(c);
    layout_memory need;
    offload_memory_need(&oc, &need);
    return need.device + need.host;
}

uint64_t train_run_memory_allocated(const train_run *r) {
    if (!r->off) return (uint64_t)trainer_memory_bytes(trainer_config(r->mem)) + memory_stage_bytes();   /* all of it, up front */
    uint64_t allocated;
    offload_trainer_memory(r->off, NULL, &allocated);
    return allocated;
}

/* ---- resuming -------------------------------------------------------------------------- */

/* The record of st's last commit. */
static st_status read_record(store *st, ckpt_record *out, st_error *err) {
    size_t n = 0;
    const void *meta = store_user_meta(st, &n);   /* valid until the next store_set_user_meta: parsed at once */
    return ckpt_record_parse(meta, n, out, err);
}

st_status train_run_last_commit(const store_dirs *dirs, ckpt_record *out, int *found, st_error *err) {
    store *st;
    st_error e = {0};
    *found = 0;
    st_status s = store_open_read_only(dirs, 0, &st, &e);
    if (s == ST_ENOENT && access(dirs->paths[0], F_OK) == 0 && !store_dirs_hold_store(dirs))
        return ST_OK;   /* a directory without a store */
    if (s != ST_OK) return st_fail(err, s, "cannot open the run's store in %s: %s", dirs->paths[0], e.msg);
    s = read_record(st, out, &e);
    store_close(st);
    if (s == ST_ENOENT) return ST_OK;   /* a store without a commit record: made, not committed to */
    if (s != ST_OK) return st_fail(err, s, "%s", e.msg);
    *found = 1;
    return ST_OK;
}

st_status train_run_commit_before_last(const store_dirs *dirs, ckpt_record *out, int *found, st_error *err) {
    store *st;
    st_error e = {0};
    *found = 0;
    st_status s = store_open_read_only(dirs, 1, &st, &e);
    if (s == ST_ENOENT) return ST_OK;   /* none kept (or no store) */
    if (s != ST_OK) return st_fail(err, s, "cannot open the commit before the last in %s: %s", dirs->paths[0], e.msg);
    s = read_record(st, out, &e);
    store_close(st);
    if (s == ST_ENOENT) return ST_OK;   /* the store's first manifest: no step committed */
    if (s != ST_OK) return st_fail(err, s, "%s", e.msg);
    *found = 1;
    return ST_OK;
}

st_status train_run_verify_commit(const store_dirs *dirs, store_scrub_result *checked, st_error *err) {
    store *st;
    st_error e = {0};
    st_status s = store_open_read_only(dirs, 0, &st, &e);
    if (s != ST_OK) return st_fail(err, s, "cannot open the run's store in %s: %s", dirs->paths[0], e.msg);
    s = store_scrub_each(st, NULL, NULL, checked, err);
    store_close(st);
    return s;
}

st_status train_run_check_commit(const ckpt_record *c, const gpt_config *model, uint64_t data_tokens, long steps,
                                 st_error *err) {
    const gpt_config *m = &c->model;
    if (!gpt_config_same(m, model))
        return st_fail(err, ST_EINVAL,
                       "the store's commit is of another model (%s, %d layers, %d heads, d_model %d, context %d, vocab "
                       "%d) than run.json's",
                       gpt_arch_name(m->arch), m->n_layer, m->n_head, m->d_model, m->n_ctx, m->vocab_size);
    if (c->data_tokens != data_tokens)
        return st_fail(err, ST_EINVAL,
                       "the training data changed since the commit: it held %llu tokens, now %llu; a resumed run "
                       "reads the same data from the same position",
                       (unsigned long long)c->data_tokens, (unsigned long long)data_tokens);
    if (c->step >= steps)
        return st_fail(err, ST_EINVAL, "the run finished: its last commit is at step %ld of %ld (a larger step count "
                       "extends it)", c->step, steps);
    return ST_OK;
}

st_status train_run_prepare_move(const store_dirs *to, const ckpt_record *ours, int *removed, st_error *err) {
    *removed = 0;
    for (int i = 0; i < to->n; i++) {
        st_status s = st_mkdir_p(to->paths[i], err);
        if (s != ST_OK) return s;
    }
    store *st;
    st_error e = {0};
    st_status s = store_open_read_only(to, 0, &st, &e);
    if (s == ST_ENOENT) return ST_OK;   /* no store there */
    if (s != ST_OK) return st_fail(err, s, "--store %s: %s", to->paths[0], e.msg);
    size_t n = 0;
    store_user_meta(st, &n);
    ckpt_record c;
    const int no_record = n == 0;
    const int same = !no_record && read_record(st, &c, &e) == ST_OK && c.step == ours->step &&
                     c.data_pos == ours->data_pos && c.data_epoch == ours->data_epoch &&
                     c.data_tokens == ours->data_tokens && c.vocab_fingerprint == ours->vocab_fingerprint && gpt_config_same(&c.model, &ours->model);
    store_close(st);
    if (!no_record && !same)
        return st_fail(err, ST_EEXIST,
                       "--store %s already holds a store with a commit of its own: choose an empty directory",
                       to->paths[0]);
    *removed = 1;
    return store_remove(to, err);
}
