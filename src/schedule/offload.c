/* offload.c - the schedule executor's public functions (strata/offload.h):
 * its layout and budgets, creating and freeing its parts
 * (offload_internal.h), and stepping, flushing, evaluating, committing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/offload_internal.h"

/* ---- layout and budgets ------------------------------------------------------------- */

layout_params offload_layout_params(const offload_config *cfg) {
    const train_config *tc = &cfg->train;
    const int ranks = cfg->comm ? comm_size(cfg->comm) : 1;
    return (layout_params){.model = tc->model, .precision = tc->precision, .B = tc->B, .T = tc->T,
                           .micro_batches = tc->micro_batches / ranks, .ranks = ranks,
                           .rank = cfg->comm ? comm_rank(cfg->comm) : 0, .schedule = cfg->schedule, .alpha = cfg->alpha,
                           .clipping = tc->clip > 0, .place = cfg->place, .segment_elems = cfg->segment_elems, .opt_io = cfg->opt_io,
                           .grad_buffers = cfg->grad_buffers,
                           .has_store = cfg->n_store_paths > 0, .resuming = cfg->n_resume_paths > 0,
                           .separate_device = !train_config_backend(tc)->unified};
}

st_status offload_layout(const offload_config *cfg, run_layout *out, st_error *err) {
    layout_params p = offload_layout_params(cfg);
    return layout_build(&p, out, err);
}

void offload_memory_need(const offload_config *cfg, layout_memory *out) {
    run_layout l;
    memset(out, 0, sizeof *out);
    if (offload_layout(cfg, &l, NULL) != ST_OK) return;
    *out = l.memory;
    layout_free(&l);
}

st_status offload_traffic_per_step(const offload_config *cfg, layout_traffic *out, st_error *err) {
    run_layout l;
    memset(out, 0, sizeof *out);
    st_status s = offload_layout(cfg, &l, err);
    if (s == ST_OK) s = layout_traffic_per_step(&l, out, err);
    layout_free(&l);
    return s;
}

static st_status check_budgets(const offload_config *cfg, const layout_memory *m, st_error *err) {
    char need[32], have[32], a[32], b[32], c[32], d[32], e[32];
    if (cfg->mem_device && m->device > cfg->mem_device)
        return st_fail(err, ST_ENOMEM,
                       "the device budget %s is too small: one block's working set at micro-batch %d x %d needs %s "
                       "(weights %s, activations %s); lower --micro-batch or --seq, or raise --mem-device",
                       st_format_bytes((double)cfg->mem_device, have, sizeof have), cfg->train.B, cfg->train.T,
                       st_format_bytes((double)m->device, need, sizeof need),
                       st_format_bytes((double)m->unit_weights, a, sizeof a),
                       st_format_bytes((double)m->activations, b, sizeof b));
    if (cfg->mem_host && m->host > cfg->mem_host)
        return st_fail(err, ST_ENOMEM,
                       "the host budget %s is too small: this placement needs %s (optimizer state %s, compute weights "
                       "%s, checkpoints %s, gradients %s, I/O staging %s); place more state on the SSD (--offload) or "
                       "raise --mem-host",
                       st_format_bytes((double)cfg->mem_host, have, sizeof have),
                       st_format_bytes((double)m->host, need, sizeof need),
                       st_format_bytes((double)m->optimizer_state, a, sizeof a),
                       st_format_bytes((double)m->compute_weights, b, sizeof b),
                       st_format_bytes((double)m->checkpoints, c, sizeof c),
                       st_format_bytes((double)m->gradients, d, sizeof d),
                       st_format_bytes((double)m->staging, e, sizeof e));
    return ST_OK;
}

/* What several ranks support so far (offload_config.comm). */
static st_status check_ranks(const offload_config *cfg, st_error *err) {
    const int ranks = cfg->comm ? comm_size(cfg->comm) : 1;
    if (ranks < 2) return ST_OK;
    if (cfg->train.micro_batches % ranks != 0)
        return st_fail(err, ST_EINVAL,
                       "%d micro-batches cannot be divided among %d ranks: give a number of micro-batches that %d "
                       "divides (each rank runs the same number)",
                       cfg->train.micro_batches, ranks, ranks);
    if (!train_config_backend(&cfg->train)->unified)
        return st_fail(err, ST_EUNSUPPORTED, "several ranks with a separate compute device are not supported yet");
    return ST_OK;
}

/* Device buffers come from the backend; I/O buffers (O_DIRECT, 4096-aligned)
 * and the host's from the host, on a unified backend too. Host buffers of
 * 2 MiB and more go on transparent huge pages as I/O buffers do: the
 * weights' widening and AdamW stream hundreds of MiB through them, and on
 * 4 KiB pages those passes ran 2-6x slower in some processes of this
 * machine than in others (docs/BENCHMARKS.md, "The split placement's slow
 * rounds"). */
static int on_device(const layout_buffer *b) { return b->tier == LAYOUT_DEVICE && !b->io; }

void *plan_alloc(offload_trainer *t, layout_buffer_id id) {
    const layout_buffer *b = &t->lay.buf[id];
    if (b->count == 0) return NULL;
    const compute_backend *be = t->env.be;
    void *p = on_device(b) ? be->alloc(be, (size_t)b->bytes)
              : b->io || b->bytes >= (2 << 20) ? st_alloc_io((size_t)b->bytes)
                             : st_alloc_aligned(64, (size_t)b->bytes);
    if (!p) return NULL;
    /* Written once, so that its pages are the process's from the start: a
     * plan the machine cannot back fails here rather than mid-run, and the
     * peak resident memory holds every buffer (a slot sized for the largest
     * segment may otherwise never be touched whole). */
    if (on_device(b)) be->memset(be, p, 0, (size_t)b->bytes);
    else memset(p, 0, (size_t)b->bytes);
    t->allocated += b->bytes;
    return p;
}

/* Frees a buffer plan_alloc made. */
static void plan_free(offload_trainer *t, layout_buffer_id id, void *p) {
    if (!p) return;
    if (on_device(&t->lay.buf[id])) t->env.be->free(t->env.be, p);
    else st_free_aligned(p);
}

void offload_trainer_memory(const offload_trainer *t, layout_memory *planned, uint64_t *allocated) {
    if (planned) *planned = t->lay.memory;
    if (allocated) *allocated = t->allocated;
}

/* ---- creation ------------------------------------------------------------------------ */

/* The shape of a run: its layout, sizes and task lists, each list analysed. */
static st_status shape_build(offload_trainer *t, const offload_config *cfg, st_error *err) {
    st_status s;
    t->cfg = *cfg;
    if ((s = offload_layout(cfg, &t->lay, err)) != ST_OK) return s;
    t->c = cfg->train.model;
    t->L1 = t->lay.n_units;
    t->n_acts = sched_parts(&t->lay.sched, PLACE_ACTS);
    t->head = sched_head_unit(&t->lay.sched);
    t->M = t->lay.p.micro_batches;
    t->M_global = cfg->train.micro_batches;
    t->B = cfg->train.B;
    t->T = cfg->train.T;
    t->NC = t->lay.act_elems;
    const sched_params *sp = &t->lay.sched;
    if ((s = sched_build(sp, 0, &t->first, err)) != ST_OK || (s = sched_build(sp, 1, &t->steady, err)) != ST_OK ||
        (s = sched_build_flush(sp, &t->flush, err)) != ST_OK)
        return s;
    if ((s = sched_analyze(&t->first, t->L1, &t->an_first, err)) != ST_OK ||
        (s = sched_analyze(&t->steady, t->L1, &t->an_steady, err)) != ST_OK)
        return s;
    return sched_analyze(&t->flush, t->L1, &t->an_flush, err);
}

/* Every buffer of the plan, and nothing else of any size, handed to the
 * parts that use them. 0 when one could not be had. */
static int alloc_parts(offload_trainer *t) {
    const placement pl = t->lay.p.place;
    const int mixed = t->lay.weight_size == 2;
    int ok = 1;
#define ALLOC(ptr, id) (ok &= ((ptr) = plan_alloc(t, id)) != NULL || t->lay.buf[id].count == 0)
    host_state *hs = &t->hs;
    ALLOC(hs->master, BUF_MASTER);
    ALLOC(hs->m, BUF_ADAM_M);
    ALLOC(hs->v, BUF_ADAM_V);
    if (mixed) ALLOC(hs->w16, BUF_WEIGHTS_HOST);
    else ALLOC(hs->w32, BUF_WEIGHTS_HOST);
    /* fp32: the compute weights memory keeps are the master, where it keeps that */
    if (!mixed && !hs->w32 && layout_memory_elems(&t->lay, PLACE_WEIGHTS) > 0) hs->w32 = hs->master;
    for (int i = 0; i < LAYOUT_OPT_SLOTS; i++) {
        for (int k = 0; pl.optim > 0 && k < 3; k++) ALLOC(t->opt.slot[i].buf[k], BUF_OPT_STATE_IO);
        ALLOC(t->opt.slot[i].wout, BUF_OPT_WEIGHTS_IO);
    }
    weight_loader *wl = &t->wl;
    for (int b = 0; b < t->lay.buf[BUF_WEIGHTS_IO].count; b++) {   /* read from the SSD, or gathered */
        ALLOC(wl->buf[b], BUF_WEIGHTS_IO);
        ok &= (wl->op[b] = calloc((size_t)t->lay.max_segs, sizeof(store_op))) != NULL;
    }
    ALLOC(wl->unit32, BUF_UNIT_F32);
    ALLOC(wl->dev, BUF_UNIT_DEVICE);
    act_pool *ap = &t->acts;
    ok &= (ap->slot = calloc((size_t)t->n_acts * (size_t)t->M, sizeof(float *))) != NULL;
    for (int i = 0; pl.acts > 0 && i < LAYOUT_ACT_BUFFERS; i++) {
        ALLOC(ap->buf[i], BUF_ACT_IO);
        ap->free_list[ap->n_free++] = i;
    }
    ALLOC(ap->host, BUF_CHECKPOINTS);
    /* the checkpoints memory keeps: those of the last blocks, in order */
    const size_t first_in_memory = (size_t)placement_units(pl, PLACE_ACTS, t->n_acts) * (size_t)t->M;
    for (size_t i = first_in_memory; ok && ap->host && i < (size_t)t->n_acts * (size_t)t->M; i++)
        ap->slot[i] = ap->host + (i - first_in_memory) * t->NC;
    grad_pool *gp = &t->grads;
    ALLOC(gp->all, BUF_GRADS);
    grad_reducer *rd = &t->reducer;
    for (int k = 0; k < LAYOUT_REDUCE_SLOTS; k++) {
        ALLOC(rd->scratch[k], BUF_COMM_SCRATCH);
        rd->slot_unit[k] = -1;
    }
    ok &= (rd->req = calloc((size_t)t->L1, sizeof *rd->req)) != NULL;
    ok &= (rd->slot_of = calloc((size_t)t->L1, sizeof *rd->slot_of)) != NULL;
    ok &= (rd->buf_of = malloc(sizeof(int) * (size_t)t->L1)) != NULL;
    for (int u = 0; ok && u < t->L1; u++) rd->buf_of[u] = -1;
    ok &= (rd->sumsq = calloc((size_t)t->L1, sizeof *rd->sumsq)) != NULL;
    if (pl.grads > 0 || gp->sharded) {
        ok &= (gp->of = malloc(sizeof(int) * (size_t)t->L1)) != NULL;
        for (int u = 0; ok && u < t->L1; u++) gp->of[u] = -1;
        ALLOC(gp->buf[0].data, BUF_GRAD_IO_EMBED);
        for (int i = 1; i <= t->lay.grad_buffers; i++) ALLOC(gp->buf[i].data, BUF_GRAD_IO_BLOCK);
    }
    if (gp->sharded) {
        ok &= (gp->loaded_lo = calloc((size_t)t->L1, sizeof(size_t))) != NULL;
        ok &= (gp->loaded_hi = calloc((size_t)t->L1, sizeof(size_t))) != NULL;
    }
    ok &= (gp->fresh = calloc((size_t)t->L1, 1)) != NULL;
    ALLOC(t->sbuf, BUF_SEGMENT_IO);
    ALLOC(t->dact, BUF_DACT);
    ALLOC(t->block_acts, BUF_BLOCK_ACTS);
    ALLOC(t->scratch, BUF_SCRATCH);
    ALLOC(t->eval_buf, BUF_EVAL);
    ALLOC(t->inputs, BUF_TOKENS);
    ALLOC(t->targets, BUF_TOKENS);
    for (int i = 0; i < 2; i++) {
        ALLOC(t->tokens_host[i], BUF_TOKENS_HOST);
        ALLOC(t->act_dev[i], BUF_ACT_DEVICE);
    }
    ALLOC(t->grad_dev, BUF_GRAD_DEVICE);
    t->grad_dev_unit = -1;
    ok &= (t->mb_loss = malloc(sizeof(float) * (size_t)t->M)) != NULL;
    ok &= (t->unit_sumsq = calloc((size_t)t->L1, sizeof(double))) != NULL;
#undef ALLOC
    return ok;   /* every buffer zeroed by plan_alloc: gradients in memory start from zero */
}

/* The optimizer worker's job: the step (with several ranks, once the
 * unit's gradient is summed over them), then its gradient buffer is given
 * back. */
static st_status run_job(void *ctx, const opt_job *job, double *io_s, st_error *err) {
    offload_trainer *t = ctx;
    st_status s = t->lay.ranks > 1 ? reduce_finish(&t->reducer, job->task.unit, 1, err) : ST_OK;
    if (s == ST_OK) s = opt_stream_run(&t->opt, job, grads_for_job(&t->grads, job), io_s, err);
    grads_unref(&t->grads, job->grad_buf);
    return s;
}

static st_status open_trace(offload_trainer *t, st_error *err) {
    exec_env *e = &t->env;
    st_status s = trace_open(&e->tr, t->cfg.trace_path, err);
    if (s != ST_OK) return s;
    e->lane_compute = trace_lane(e->tr, "compute");
    e->lane_optimizer[LAYOUT_LANE_SSD] = trace_lane(e->tr, "optimizer");
    e->lane_optimizer[LAYOUT_LANE_HOST] = trace_lane(e->tr, "optimizer, state in memory");
    if (t->lay.ranks > 1) e->lane_comm = trace_lane(e->tr, "ranks");
    for (int p = 0; p < t->cfg.n_store_paths; p++) {
        char name[64];
        snprintf(name, sizeof name, "ssd path %d", p);
        int lane = trace_lane(e->tr, name);
        if (p == 0) e->lane_ssd0 = lane;
    }
    return ST_OK;
}

st_status offload_trainer_create(offload_trainer **out, const offload_config *cfg_in, const float *init,
                                 st_error *err) {
    *out = NULL;
    offload_config cfg = *cfg_in;
    st_status s = train_config_check(&cfg.train, err);
    if (s != ST_OK) return s;
    if (placement_any_ssd(cfg.place) && cfg.n_store_paths < 1)
        return st_fail(err, ST_EINVAL, "state placed on the SSD needs at least one store directory");
    if (cfg.segment_elems % 2048 != 0)
        return st_fail(err, ST_EINVAL, "segment size %zu is not a multiple of 2048 elements", cfg.segment_elems);
    if ((s = check_ranks(&cfg, err)) != ST_OK) return s;
    offload_trainer *t = calloc(1, sizeof *t);
    if (!t) return st_fail(err, ST_ENOMEM, "out of memory");
    pthread_mutex_init(&t->grads.lock, NULL);
    pthread_cond_init(&t->grads.freed, NULL);
    pthread_mutex_init(&t->reducer.lock, NULL);
    t->env.be = train_config_backend(&cfg.train);
    if ((s = shape_build(t, &cfg, err)) != ST_OK || (s = check_budgets(&cfg, &t->lay.memory, err)) != ST_OK) {
        offload_trainer_free(t);
        return s;
    }
    t->env = (exec_env){.be = train_config_backend(&cfg.train), .lay = &t->lay, .model = &t->c,
                        .n_paths = cfg.n_store_paths, .comm = cfg.comm};
    t->wl = (weight_loader){.env = &t->env, .hs = &t->hs, .unit = {-1, -1}, .staged = {-1, -1},
                            .gather_unit = {-1, -1}, .in_use = -1};
    t->reducer.env = &t->env;
    t->reducer.gp = &t->grads;
    t->acts = (act_pool){.env = &t->env, .M = t->M};
    t->grads.env = &t->env;
    t->grads.n_units = t->L1;
    t->grads.reducer = &t->reducer;
    t->grads.sharded = t->lay.ranks > 1;
    t->grads.unit_at = layout_grad_shard_area(&t->lay);
    t->opt = (opt_stream){.env = &t->env, .hs = &t->hs, .adam = &t->cfg.train.adam};
    if (!alloc_parts(t)) {
        offload_trainer_free(t);
        return st_fail(err, ST_ENOMEM, "out of memory for the offloaded trainer's buffers");
    }
    if ((s = state_start(t, init, err)) != ST_OK || (cfg.trace_path && (s = open_trace(t, err)) != ST_OK)) {
        offload_trainer_free(t);
        return s;
    }
    t->step = cfg.resume_steps;
    env_traffic(&t->env, t->traffic_base);   /* from here on: training */
    if ((s = opt_worker_start(&t->worker, &t->env, t->L1, run_job, t, err)) != ST_OK) {
        offload_trainer_free(t);
        return s;
    }
    *out = t;
    return ST_OK;
}

void offload_trainer_free(offload_trainer *t) {
    if (!t) return;
    opt_worker_stop(&t->worker);
    /* nothing is freed under I/O, or while the ranks still send into it */
    weights_drain(&t->wl);
    if (t->reducer.req) reduce_finish_all(&t->reducer, NULL);
    env_drain_each(t->acts.rd, LAYOUT_ACT_BUFFERS);
    env_drain_each(t->acts.wr, LAYOUT_ACT_BUFFERS);
    env_drain_each(t->grads.rd, LAYOUT_GRAD_BUFFERS);
    env_drain_each(t->grads.wr, LAYOUT_GRAD_BUFFERS);
    trace_close(t->env.tr, NULL);
    store_close(t->env.st);
    sched_list_free(&t->first);
    sched_list_free(&t->steady);
    sched_list_free(&t->flush);
    sched_analysis_free(&t->an_first);
    sched_analysis_free(&t->an_steady);
    sched_analysis_free(&t->an_flush);
    host_state *hs = &t->hs;
    if (hs->w32 != hs->master) st_free_aligned(hs->w32);
    st_free_aligned(hs->master);
    st_free_aligned(hs->m);
    st_free_aligned(hs->v);
    st_free_aligned(hs->w16);
    for (int i = 0; i < LAYOUT_OPT_SLOTS; i++) {
        for (int k = 0; k < 3; k++) st_free_aligned(t->opt.slot[i].buf[k]);
        st_free_aligned(t->opt.slot[i].wout);
    }
    for (int b = 0; b < 2; b++) {
        st_free_aligned(t->wl.buf[b]);
        free(t->wl.op[b]);
    }
    plan_free(t, BUF_UNIT_F32, t->wl.unit32);
    plan_free(t, BUF_UNIT_DEVICE, t->wl.dev);
    for (int i = 0; i < LAYOUT_ACT_BUFFERS; i++) st_free_aligned(t->acts.buf[i]);
    st_free_aligned(t->acts.host);
    free(t->acts.slot);
    st_free_aligned(t->grads.all);
    for (int i = 0; i < LAYOUT_GRAD_BUFFERS; i++) st_free_aligned(t->grads.buf[i].data);
    free(t->grads.of);
    free(t->grads.fresh);
    free(t->grads.loaded_lo);
    free(t->grads.loaded_hi);
    pthread_mutex_destroy(&t->grads.lock);
    pthread_cond_destroy(&t->grads.freed);
    st_free_aligned(t->sbuf);
    plan_free(t, BUF_DACT, t->dact);
    plan_free(t, BUF_BLOCK_ACTS, t->block_acts);
    plan_free(t, BUF_SCRATCH, t->scratch);
    plan_free(t, BUF_EVAL, t->eval_buf);
    plan_free(t, BUF_TOKENS, t->inputs);
    plan_free(t, BUF_TOKENS, t->targets);
    for (int i = 0; i < 2; i++) {
        plan_free(t, BUF_TOKENS_HOST, t->tokens_host[i]);
        plan_free(t, BUF_ACT_DEVICE, t->act_dev[i]);
    }
    plan_free(t, BUF_GRAD_DEVICE, t->grad_dev);
    for (int k = 0; k < LAYOUT_REDUCE_SLOTS; k++) st_free_aligned(t->reducer.scratch[k]);
    free(t->reducer.req);
    free(t->reducer.slot_of);
    free(t->reducer.buf_of);
    free(t->reducer.sumsq);
    pthread_mutex_destroy(&t->reducer.lock);
    free(t->mb_loss);
    free(t->unit_sumsq);
    layout_free(&t->lay);
    free(t);
}

/* ---- reading the weights back ------------------------------------------------------------ */

/* Several ranks: out[lo, hi) holds this rank's shard of unit u's master
 * weights; the other ranks' are gathered around it. */
static st_status gather_unit(offload_trainer *t, int u, float *out, st_error *err) {
    if (t->lay.ranks < 2) return ST_OK;
    const double t0 = st_now();
    st_status s = comm_allgather_shards_f32(t->env.comm, out, t->lay.units[u].n, err);
    env_comm_done(&t->env, "all-gather master weights", u, t0);
    return s;
}

st_status offload_trainer_read_unit(offload_trainer *t, int u, float *out, st_error *err) {
    if (u < 0 || u >= t->L1) return st_fail(err, ST_EINVAL, "unit %d out of range [0, %d)", u, t->L1);
    st_status s = opt_worker_wait(&t->worker, u, err);
    if (s != ST_OK) return s;
    const layout_unit *un = &t->lay.units[u];
    if (!layout_on_ssd(&t->lay, PLACE_OPTIM, u)) {
        memcpy(out + un->lo, t->hs.master + un->local, (un->hi - un->lo) * sizeof(float));
        return gather_unit(t, u, out, err);
    }
    for (int part = 0; part < 2; part++)
        for (size_t j = 0; j < un->segs[part]; j++) {
            size_t lo, hi;
            layout_segment_range(&t->lay, u, part, j, &lo, &hi);
            const uint64_t bytes = store_padded_bytes((hi - lo) * 4);
            s = env_store_io(&t->env, 0, layout_segment_key(STORE_MASTER, u, part, j), t->sbuf, bytes, err);
            /* not training's: counted aside by its own size, as the worker may
             * be moving other units' state meanwhile */
            t->traffic_aside[0][STORE_MASTER] += bytes;
            if (s != ST_OK) return s;
            memcpy(out + lo, t->sbuf, (hi - lo) * 4);
        }
    return gather_unit(t, u, out, err);
}

st_status offload_trainer_read_params(offload_trainer *t, float *out, st_error *err) {
    for (int u = 0; u < t->L1; u++) {
        st_status s = offload_trainer_read_unit(t, u, out + t->lay.units[u].offset, err);
        if (s != ST_OK) return s;
    }
    return ST_OK;
}

void offload_trainer_io_bytes(const offload_trainer *t, uint64_t *read, uint64_t *written) {
    *read = *written = 0;
    if (!t->env.st) return;
    store_counters c;
    store_get_counters(t->env.st, &c);
    *read = store_counters_read(&c);
    *written = store_counters_written(&c);
}

/* ---- training ---------------------------------------------------------------------------- */

st_status offload_trainer_step(offload_trainer *t, const int32_t *tokens, train_step_stats *stats, st_error *err) {
    /* The compute thread's totals run across everything it does; the
     * stats keep what happened inside steps, so that their parts fall
     * within step_s. */
    const double t0 = st_now(), compute0 = t->env.compute_s, io0 = t->env.io_wait_s,
                 opt0 = t->env.optimizer_wait_s, comm0 = t->env.comm_s;
    /* the drive's counters hold the steps after this trainer's first: a new run's first step writes each
       tensor's slots for the first time */
    const int count_io = t->stats.steps > 0;
    io_path_counters path0[STORE_MAX_PATHS];
    if (count_io) env_path_io(&t->env, path0);
    st_status s = gpt_check_tokens(&t->c, tokens, (size_t)t->M * t->B * (t->T + 1), err);
    if (s != ST_OK) return s;
    run_tokens_stage(t, tokens, t->M * t->B, t->T);
    grads_new_iteration(&t->grads);
    const float lr = lr_schedule_at(&t->cfg.train.lr, t->step);
    t->clip_scale_now = 1.0f;   /* without clipping, steps during backward use scale 1 */
    s = t->deferred_pending ? run_list(t, &t->steady, &t->an_steady, lr, t->step + 1, err)
                            : run_list(t, &t->first, &t->an_first, lr, t->step + 1, err);
    if (s == ST_OK && t->lay.ranks > 1) s = reduce_sums(t, err);   /* every unit's shard summed */
    if (s != ST_OK) return s;
    double sums[2] = {0, 0};   /* the gradient's sum of squares, the micro-batches' losses */
    for (int u = 0; u < t->L1; u++) sums[0] += t->unit_sumsq[u];
    for (int mb = 0; mb < t->M; mb++) sums[1] += t->mb_loss[mb];
    if (t->lay.ranks > 1) {   /* this rank's shards and micro-batches: summed over the ranks */
        const double c0 = st_now();
        s = comm_allreduce_sum_f64(t->env.comm, sums, 2, err);
        env_comm_done(&t->env, "sum loss and norm", -1, c0);
        if (s != ST_OK) return s;
    }
    const double sum = sums[0], loss = sums[1];
    t->prev_lr = lr;
    t->prev_scale = t->lay.sched.clipping ? clip_scale(sqrt(sum), t->cfg.train.clip) : 1.0f;
    t->prev_t = t->step + 1;
    t->deferred_pending = sched_defers(&t->lay.sched);
    t->step++;
    const double t1 = st_now();
    t->stats.steps++;
    t->stats.step_s += t1 - t0;
    t->stats.compute_s += t->env.compute_s - compute0;
    t->stats.compute_io_s += t->env.io_wait_s - io0;
    t->stats.optimizer_wait_s += t->env.optimizer_wait_s - opt0;
    t->stats.comm_s += t->env.comm_s - comm0;
    if (count_io) {
        io_path_counters path1[STORE_MAX_PATHS];
        const int n = env_path_io(&t->env, path1);
        for (int p = 0; p < n; p++) io_path_counters_add_delta(&t->io_steps[p], &path1[p], &path0[p]);
        t->io_steps_s += t1 - t0;
    }
    if (stats) {
        stats->loss = (float)(loss / t->M_global);
        stats->grad_norm = (float)sqrt(sum);
        stats->lr = lr;
        stats->seconds = t1 - t0;
    }
    return ST_OK;
}

st_status offload_trainer_flush(offload_trainer *t, st_error *err) {
    st_status s = t->deferred_pending ? run_list(t, &t->flush, &t->an_flush, 0.0f, 0, err) : ST_OK;
    if (s == ST_OK) s = opt_worker_wait(&t->worker, -1, err);   /* steps still running on the worker too */
    if (s == ST_OK) t->deferred_pending = 0;
    return s;
}

/* Work that is not training (evaluations, commits): its store traffic is
 * kept out of the stats (its time is: it is not a step's). Begun with
 * nothing of training's in flight (no optimizer job, no save being
 * written), so that all the traffic meanwhile is its own. */
typedef struct aside {
    uint64_t before[2][STORE_KIND_COUNT];
} aside;

static void aside_begin(offload_trainer *t, aside *a) { env_traffic(&t->env, a->before); }

static void aside_end(offload_trainer *t, const aside *a) {
    uint64_t after[2][STORE_KIND_COUNT];
    env_traffic(&t->env, after);
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < STORE_KIND_COUNT; k++) t->traffic_aside[d][k] += after[d][k] - a->before[d][k];
}

st_status offload_trainer_eval(offload_trainer *t, const int32_t *tokens, int B, int T, float *loss, st_error *err) {
    if (B < 1 || T < 1 || B > t->B || T > t->T)
        return st_fail(err, ST_EINVAL, "evaluation batch %d x %d exceeds the training micro-batch %d x %d", B, T, t->B, t->T);
    st_status s = gpt_check_tokens(&t->c, tokens, (size_t)B * (T + 1), err);
    if (s == ST_OK) s = offload_trainer_flush(t, err);   /* evaluate the weights of the last step */
    if (s == ST_OK) s = offload_trainer_sync(t, err);    /* its saves counted as training's */
    if (s != ST_OK) return s;
    aside a;   /* the forward pass below is not training */
    aside_begin(t, &a);
    s = run_eval_forward(t, tokens, B, T, loss, err);
    aside_end(t, &a);
    return s;
}

long offload_trainer_steps_done(const offload_trainer *t) { return t->step; }
size_t offload_trainer_segment(const offload_trainer *t) { return t->lay.segment; }

void offload_trainer_stats(const offload_trainer *t, offload_stats *out) {
    *out = t->stats;
    /* the worker's lock, not its times, changes */
    opt_worker_times((opt_worker *)&t->worker, LAYOUT_LANE_SSD, &out->optimizer_s, &out->worker_io_s);
    opt_worker_times((opt_worker *)&t->worker, LAYOUT_LANE_HOST, &out->optimizer_host_s, NULL);   /* no SSD */
    uint64_t now[2][STORE_KIND_COUNT];
    env_traffic(&t->env, now);
    for (int k = 0; k < STORE_KIND_COUNT; k++) {
        out->bytes_read[k] = now[0][k] - t->traffic_base[0][k] - t->traffic_aside[0][k];
        out->bytes_written[k] = now[1][k] - t->traffic_base[1][k] - t->traffic_aside[1][k];
    }
}

int offload_trainer_path_io(const offload_trainer *t, io_path_counters out[STORE_MAX_PATHS], double *seconds) {
    io_path_counters now[STORE_MAX_PATHS];
    const int n = env_path_io(&t->env, now);   /* the number of paths */
    memcpy(out, t->io_steps, sizeof t->io_steps);
    *seconds = t->io_steps_s;
    return n;
}

st_status offload_trainer_sync(offload_trainer *t, st_error *err) {
    st_status s = opt_worker_wait(&t->worker, -1, err);
    /* the saves still being written behind */
    s = first_error(s, env_wait_each(&t->env, t->acts.wr, LAYOUT_ACT_BUFFERS, "wait for checkpoint save",
                                     s == ST_OK ? err : NULL));
    return first_error(s, env_wait_each(&t->env, t->grads.wr, LAYOUT_GRAD_BUFFERS, "wait for gradient save",
                                        s == ST_OK ? err : NULL));
}

st_status offload_trainer_commit(offload_trainer *t, const void *meta, size_t n, st_error *err) {
    if (!t->env.st) return st_fail(err, ST_EINVAL, "nothing to commit to: this run was given no store directories");
    st_status s = offload_trainer_flush(t, err);   /* the weights of the last completed step */
    if (s == ST_OK) s = offload_trainer_sync(t, err);
    if (s != ST_OK) return s;
    aside a;   /* a commit is not training */
    aside_begin(t, &a);
    s = state_write_host(t, err);
    if (s == ST_OK) s = store_set_user_meta(t->env.st, meta, n, err);
    if (s == ST_OK) s = store_commit(t->env.st, err);
    aside_end(t, &a);
    return s;
}

st_status offload_trainer_close_trace(offload_trainer *t, st_error *err) {
    st_status s = offload_trainer_sync(t, err);
    if (s != ST_OK) return s;
    s = trace_close(t->env.tr, err);
    t->env.tr = NULL;
    return s;
}
