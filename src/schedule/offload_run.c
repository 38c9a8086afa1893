/* offload_run.c - runs a task list (offload_internal.h): each task goes to
 * the part that does it; after each, the next loads are read ahead. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "schedule/offload_internal.h"

/* ---- the device's view of host memory ----------------------------------------------
 * Checkpoints, gradients and token ids live in host memory (and the store);
 * kernels read and write device memory. On a unified backend the host buffer
 * is the device buffer. On a separate device the list holds the copies
 * (sched_params.separate_device): a compute task reads its checkpoint from
 * act_dev[0] and writes a new one to act_dev[1], and adds into grad_dev, the
 * unit's gradients the list copied in. */

static const float *act_in(offload_trainer *t, int u, int m) {
    return t->env.be->unified ? acts_at(&t->acts, u, m) : t->act_dev[0];
}

/* Where a kernel writes a new checkpoint (host: acts_make's buffer). */
static float *act_out(offload_trainer *t, float *host) { return t->env.be->unified ? host : t->act_dev[1]; }

static float *grads_dev(offload_trainer *t, int u) {
    return t->env.be->unified ? grads_of(&t->grads, u) : t->grad_dev;
}

/* Tokens as the host writes them: the device's own buffers on a unified
 * backend, else host staging that tokens_to_device copies in. */
static int32_t *tokens_host(offload_trainer *t, int targets) {
    int32_t *dev = targets ? t->targets : t->inputs;
    return t->env.be->unified ? dev : t->tokens_host[targets];
}

void run_tokens_stage(offload_trainer *t, const int32_t *rows, int n_rows, int T) {
    int32_t *in = tokens_host(t, 0), *tg = tokens_host(t, 1);
    for (int r = 0; r < n_rows; r++) {
        memcpy(in + (size_t)r * T, rows + (size_t)r * (T + 1), sizeof(int32_t) * (size_t)T);
        memcpy(tg + (size_t)r * T, rows + (size_t)r * (T + 1) + 1, sizeof(int32_t) * (size_t)T);
    }
}

static void tokens_to_device(offload_trainer *t, int n_rows) {
    const compute_backend *be = t->env.be;
    const size_t bytes = sizeof(int32_t) * (size_t)n_rows * t->T;
    be->to_device(be, t->inputs, t->tokens_host[0], bytes);
    be->to_device(be, t->targets, t->tokens_host[1], bytes);
}

/* The copy tasks (only in the lists of a separate device). */
static st_status run_copy(offload_trainer *t, const sched_task *k, st_error *err) {
    const compute_backend *be = t->env.be;
    if (be->unified) return st_fail(err, ST_EINVAL, "a %s task on a unified backend (a schedule bug)", task_op_name(k->op));
    const size_t act_bytes = t->NC * sizeof(float);
    switch (k->op) {
    case TASK_TOKENS_TO_DEVICE: tokens_to_device(t, t->M * t->B); return ST_OK;
    case TASK_ACT_TO_DEVICE: be->to_device(be, t->act_dev[0], acts_at(&t->acts, k->unit, k->mb), act_bytes); return ST_OK;
    case TASK_ACT_TO_HOST: be->to_host(be, acts_at(&t->acts, k->unit, k->mb), t->act_dev[1], act_bytes); return ST_OK;
    case TASK_GRAD_TO_DEVICE:
        be->to_device(be, t->grad_dev, grads_of(&t->grads, k->unit), t->lay.units[k->unit].n * sizeof(float));
        t->grad_dev_unit = k->unit;
        return ST_OK;
    case TASK_GRAD_TO_HOST:
        if (t->grad_dev_unit != k->unit)
            return st_fail(err, ST_EINVAL, "unit %d's gradients are not on the device (a schedule bug)", k->unit);
        be->to_host(be, grads_of(&t->grads, k->unit), t->grad_dev, t->lay.units[k->unit].n * sizeof(float));
        t->grad_dev_unit = -1;
        return ST_OK;
    default: return st_fail(err, ST_EINVAL, "%s is not a copy", task_op_name(k->op));
    }
}

/* ---- compute tasks ------------------------------------------------------------------ */

static st_status embed_forward(offload_trainer *t, int m, st_error *err) {
    float *out;
    st_status s = acts_make(&t->acts, 1, m, &out, err);
    if (s != ST_OK) return s;
    gpt_embed_w w = gpt_embed_view(&t->c, (float *)t->weights);
    gpt_embed_forward(t->env.be, &t->c, &w, t->B, t->T, t->inputs + (size_t)m * t->B * t->T, act_out(t, out));
    return ST_OK;
}

static st_status block_forward(offload_trainer *t, int u, int m, st_error *err) {
    float *out;
    st_status s = acts_make(&t->acts, u + 1, m, &out, err);
    if (s != ST_OK) return s;
    gpt_block_w w = gpt_block_view(&t->c, (float *)t->weights);
    gpt_block_acts a = gpt_block_acts_view(&t->c, t->B, t->T, t->block_acts);
    gpt_block_forward(t->env.be, &t->c, &w, t->B, t->T, act_in(t, u, m), act_out(t, out), &a);
    return ST_OK;
}

static void head(offload_trainer *t, int m) {
    const size_t BT = (size_t)t->B * t->T;
    gpt_embed_w w = gpt_head_view(&t->c, (float *)t->weights), g = gpt_head_view(&t->c, grads_dev(t, t->head));
    t->mb_loss[m] = gpt_head_forward_backward(t->env.be, &t->c, &w, &g, t->B, t->T, act_in(t, t->n_acts, m),
                                              t->targets + (size_t)m * BT, 1.0f / (float)t->M_global,
                                              t->dact + (size_t)m * t->NC, NULL, t->scratch);
}

static void block_backward(offload_trainer *t, int u, int m) {
    const compute_backend *be = t->env.be;
    gpt_block_w w = gpt_block_view(&t->c, (float *)t->weights), g = gpt_block_view(&t->c, grads_dev(t, u));
    gpt_block_acts a = gpt_block_acts_view(&t->c, t->B, t->T, t->block_acts);
    const float *x = act_in(t, u, m);
    float *dx = t->dact + (size_t)m * t->NC;
    /* recompute the block's activations from its checkpointed input; the
     * recomputed output goes to scratch, which backward reuses */
    gpt_block_forward(be, &t->c, &w, t->B, t->T, x, t->scratch, &a);
    gpt_block_backward(be, &t->c, &w, &g, t->B, t->T, x, &a, dx, dx, t->scratch);
}

static void embed_backward(offload_trainer *t, int m) {
    gpt_embed_w g = gpt_embed_view(&t->c, grads_dev(t, 0));
    gpt_embed_backward(t->env.be, &t->c, &g, t->B, t->T, t->inputs + (size_t)m * t->B * t->T,
                       t->dact + (size_t)m * t->NC);
}

/* ---- other tasks ------------------------------------------------------------------ */

static st_status load_weights(offload_trainer *t, int u, st_error *err) {
    st_status s = opt_worker_wait(&t->worker, u, err);   /* its newest weights */
    return s == ST_OK ? weights_load(&t->wl, u, &t->weights, err) : s;
}

/* Several ranks: TASK_LOAD_WEIGHTS brings this rank's shard, TASK_GATHER_WEIGHTS the unit. */
static st_status stage_weights(offload_trainer *t, int u, st_error *err) {
    st_status s = opt_worker_wait(&t->worker, u, err);
    return s == ST_OK ? weights_stage(&t->wl, u, err) : s;
}

/* The checkpoint in host memory a task reads (its unit in *u), or 0 for
 * none: a compute task's on a unified backend, else the copy's to the device. */
static int consumed_act(const offload_trainer *t, const sched_task *k, int *u) {
    if (k->op == TASK_ACT_TO_DEVICE) return *u = k->unit, 1;
    if (!t->env.be->unified) return 0;
    switch (k->op) {
    case TASK_BLOCK_FORWARD: case TASK_BLOCK_BACKWARD: *u = k->unit; return 1;
    case TASK_HEAD: *u = t->n_acts; return 1;
    default: return 0;
    }
}

/* TASK_SAVE_ACT at task i: written behind; kept in memory only when the next
 * compute task reads it (a snake turn). */
static st_status save_act(offload_trainer *t, const sched_list *l, int i, st_error *err) {
    const sched_task *k = &l->tasks[i];
    st_status s = acts_save(&t->acts, k->unit, k->mb, err);
    const int next = t->an->next_compute[i];
    int cu;
    if (s == ST_OK && !(next < l->n && consumed_act(t, &l->tasks[next], &cu) && cu == k->unit && l->tasks[next].mb == k->mb))
        acts_drop(&t->acts, k->unit, k->mb);
    return s;
}

st_status reduce_sums(offload_trainer *t, st_error *err) {
    st_status s = reduce_finish_all(&t->reducer, err);
    for (int u = 0; s == ST_OK && u < t->L1; u++) t->unit_sumsq[u] = t->reducer.sumsq[u];
    return s;
}

static st_status grad_norm(offload_trainer *t, st_error *err) {
    if (t->lay.ranks > 1) {
        st_status s = reduce_sums(t, err);
        if (s != ST_OK) return s;
    }
    double sum = 0;
    for (int v = 0; v < t->L1; v++) sum += t->unit_sumsq[v];
    if (t->lay.ranks > 1) {   /* the squares of this rank's shards: summed over the ranks */
        const double t0 = st_now();
        st_status s = comm_allreduce_sum_f64(t->env.comm, &sum, 1, err);
        env_comm_done(&t->env, "sum gradient norm", -1, t0);
        if (s != ST_OK) return s;
    }
    t->clip_scale_now = clip_scale(sqrt(sum), t->cfg.train.clip);
    return ST_OK;
}



static st_status optimize(offload_trainer *t, const sched_task *k, float lr, long step_t, st_error *err) {
    if (layout_on_ssd(&t->lay, PLACE_GRADS, k->unit) && t->grads.of[k->unit] < 0)
        return st_fail(err, ST_EINVAL, "step of unit %d, whose gradients are not in memory (a schedule bug)", k->unit);
    opt_job job = {.task = *k, .grad_buf = grads_ref(&t->grads, k->unit)};
    if (k->deferred) job.lr = t->prev_lr, job.scale = t->prev_scale, job.step_t = t->prev_t;
    else job.lr = lr, job.scale = t->clip_scale_now, job.step_t = step_t;
    opt_worker_enqueue(&t->worker, &job);
    return ST_OK;
}

/* Several ranks, after task i: when the next collective of the list is a
 * unit's gather, it starts now if the unit's shard is at hand (collectives
 * start in list order on every rank: that is how the ranks match them);
 * and the transfers in flight are driven on (OpenMPI moves a message only
 * inside its calls). */
static st_status comm_ahead(offload_trainer *t, const sched_list *l, int i, st_error *err) {
    const int j = t->an->next_network[i + 1];
    st_status s = ST_OK;
    /* the gather's load may run ahead too once what it waits for (the
     * unit's steps in this list) has been handed to the worker, and done */
    const sched_task *g = j < l->n ? &l->tasks[j] : NULL;
    if (g && g->op == TASK_GATHER_WEIGHTS && g->n_deps == 1 && sched_inputs_final(l, g->deps[0], i)) {
        const int u = g->unit;
        s = weights_gather_ahead(&t->wl, u, opt_worker_pending(&t->worker, u) == 0, err);
    }
    comm_request *rq = weights_gather_pending(&t->wl);
    int done;
    if (s == ST_OK && rq) s = comm_test(rq, &done, err);
    return s;
}

/* After task i: start reading what the next weight load, the next checkpoint
 * load and the next gradient load will need, while compute goes on (one
 * ahead of each kind). Weights are read only once the unit's optimizer steps
 * are done (only weights are written by the optimizer). */
static st_status read_ahead(offload_trainer *t, const sched_list *l, int i, st_error *err) {
    const placement pl = t->lay.p.place;
    st_status s = ST_OK;
    int j;
    if (pl.weights > 0 && (j = sched_read_ahead(t->an, l, i, SCHED_LOAD_WEIGHTS)) >= 0 &&
        layout_on_ssd(&t->lay, PLACE_WEIGHTS, l->tasks[j].unit) && opt_worker_pending(&t->worker, l->tasks[j].unit) == 0)
        s = weights_read_ahead(&t->wl, l->tasks[j].unit, err);
    if (s == ST_OK && pl.acts > 0 && (j = sched_read_ahead(t->an, l, i, SCHED_LOAD_ACTS)) >= 0)
        s = acts_read_ahead(&t->acts, l->tasks[j].unit, l->tasks[j].mb, err);
    if (s == ST_OK && pl.grads > 0 && (j = sched_read_ahead(t->an, l, i, SCHED_LOAD_GRADS)) >= 0)
        s = grads_read_ahead(&t->grads, &l->tasks[j], err);
    if (s == ST_OK && t->lay.ranks > 1) s = comm_ahead(t, l, i, err);
    return s;
}

/* ---- the dispatcher ---------------------------------------------------------------- */

static st_status run_task(offload_trainer *t, const sched_list *l, int i, float lr, long step_t, st_error *err) {
    const sched_task *k = &l->tasks[i];
    switch (k->op) {
    case TASK_LOAD_WEIGHTS: return t->lay.ranks > 1 ? stage_weights(t, k->unit, err) : load_weights(t, k->unit, err);
    case TASK_GATHER_WEIGHTS: return weights_gather(&t->wl, k->unit, &t->weights, err);
    case TASK_REDUCE_GRADS: return reduce_start(&t->reducer, k->unit, err);
    case TASK_EMBED_FORWARD: return embed_forward(t, k->mb, err);
    case TASK_BLOCK_FORWARD: return block_forward(t, k->unit, k->mb, err);
    case TASK_HEAD: head(t, k->mb); return ST_OK;
    case TASK_BLOCK_BACKWARD: block_backward(t, k->unit, k->mb); return ST_OK;
    case TASK_EMBED_BACKWARD: embed_backward(t, k->mb); return ST_OK;
    case TASK_SAVE_ACT: return save_act(t, l, i, err);
    case TASK_LOAD_ACT: return acts_load(&t->acts, k->unit, k->mb, err);
    case TASK_GRAD_NORM: return grad_norm(t, err);
    case TASK_SAVE_GRAD: return grads_save(&t->grads, k, err);
    case TASK_LOAD_GRAD: return grads_load(&t->grads, k, err);
    case TASK_OPTIMIZE: return optimize(t, k, lr, step_t, err);
    case TASK_TOKENS_TO_DEVICE: case TASK_ACT_TO_DEVICE: case TASK_ACT_TO_HOST:
    case TASK_GRAD_TO_DEVICE: case TASK_GRAD_TO_HOST: return run_copy(t, k, err);
    default: return st_fail(err, ST_EUNSUPPORTED, "task %s is not supported by this executor", task_op_name(k->op));
    }
}

st_status run_list(offload_trainer *t, const sched_list *l, const sched_analysis *an, float lr, long step_t,
                   st_error *err) {
    t->an = an;
    st_status s = ST_OK;
    for (int i = 0; i < l->n && s == ST_OK; i++) {
        const sched_task *k = &l->tasks[i];
        const int gu = k->op == TASK_GRAD_TO_DEVICE ? k->unit : sched_grad_unit(k);
        /* a gradient task's unit gets its buffer, zeroed at its first term
         * (on a separate device, its copy in comes first) */
        if ((sched_is_grad_task(k->op) || k->op == TASK_GRAD_TO_DEVICE) &&
            (s = grads_touch(&t->grads, gu, err)) != ST_OK)
            break;
        if (sched_is_grad_task(k->op) && !t->env.be->unified && t->grad_dev_unit != gu) {
            s = st_fail(err, ST_EINVAL, "unit %d's gradients are not on the device (a schedule bug)", gu);
            break;
        }
        const double t0 = st_now(), waited0 = env_waited(&t->env);
        s = run_task(t, l, i, lr, step_t, err);
        /* after its last term, a unit's share of the gradient norm, on the
         * device (a separate device's list copies the gradients out after);
         * several ranks: of the shard, once summed (REDUCE_GRADS) */
        if (s == ST_OK && an->last_grad[i] && t->lay.ranks < 2)
            t->unit_sumsq[gu] = t->env.be->sum_sq(t->env.be, grads_dev(t, gu), t->lay.units[gu].n);
        const double t1 = st_now();
        const int computes = task_op_resource(k->op) == RES_COMPUTE;
        /* a task that waited inside (for a checkpoint buffer still being
         * written) did not compute meanwhile: that time is the wait's */
        if (computes) t->env.compute_s += (t1 - t0) - (env_waited(&t->env) - waited0);
        /* the compute thread's other tasks too where they take time (a weight
         * load widening bf16, with its waits inside): else gaps between tasks */
        if (t->env.tr && (computes || t1 - t0 > 1e-4)) {
            char name[64];
            snprintf(name, sizeof name, "%s u%d mb%d", task_op_name(k->op), k->unit, k->mb);
            trace_span(t->env.tr, t->env.lane_compute, name, t0, t1);
        }
        /* an activation read from the SSD is dropped once its reader is done,
         * a gradient buffer once the compute thread is */
        int cu;
        if (s == ST_OK && consumed_act(t, k, &cu)) acts_drop(&t->acts, cu, k->mb);
        if (s == ST_OK && an->grad_release[i]) s = grads_release(&t->grads, gu, err);
        if (s == ST_OK) s = read_ahead(t, l, i, err);
    }
    return s;
}

st_status run_eval_forward(offload_trainer *t, const int32_t *tokens, int B, int T, float *loss, st_error *err) {
    st_status s;
    const compute_backend *be = t->env.be;
    const gpt_config *c = &t->c;
    run_tokens_stage(t, tokens, B, T);   /* the step's buffers are free now */
    if (!be->unified) tokens_to_device(t, B);
    float *x = t->eval_buf, *y = t->eval_buf + t->NC;
    if ((s = load_weights(t, 0, err)) != ST_OK) return s;
    gpt_embed_w ew = gpt_embed_view(c, (float *)t->weights);
    gpt_embed_forward(be, c, &ew, B, T, t->inputs, x);
    for (int u = 1; u < t->n_acts; u++) {
        if ((s = load_weights(t, u, err)) != ST_OK) return s;
        gpt_block_w w = gpt_block_view(c, (float *)t->weights);
        gpt_block_acts a = gpt_block_acts_view(c, B, T, t->block_acts);
        gpt_block_forward(be, c, &w, B, T, x, y, &a);
        float *tmp = x;
        x = y;
        y = tmp;
    }
    if ((s = load_weights(t, t->head, err)) != ST_OK) return s;
    ew = gpt_head_view(c, (float *)t->weights);
    *loss = gpt_head_forward_backward(be, c, &ew, NULL, B, T, x, t->targets, 0.0f, NULL, NULL, t->scratch);
    return ST_OK;
}
