/* offload_run.c - runs a task list (offload_internal.h): each task goes to
 * the part that does it; after each, the next loads are read ahead. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "schedule/offload_internal.h"

/* ---- the device's view of host memory ----------------------------------------------
 * Checkpoints and gradients live in host memory (and the store); kernels
 * read and write device memory. On a unified backend the host buffer is the
 * device buffer; on a separate device these copy through the device's own
 * buffers (BUF_ACT_DEVICE, BUF_GRAD_DEVICE). */

/* act[u][m] for a kernel to read: the checkpoint itself, or its copy in. */
static const float *act_in(offload_trainer *t, int u, int m) {
    const compute_backend *be = t->env.be;
    const float *host = acts_at(&t->acts, u, m);
    if (be->unified) return host;
    be->to_device(be, t->act_dev[0], host, t->NC * sizeof(float));
    return t->act_dev[0];
}

/* Where a kernel writes a new checkpoint (host: acts_make's buffer); act_out_done copies it out. */
static float *act_out(offload_trainer *t, float *host) { return t->env.be->unified ? host : t->act_dev[1]; }
static void act_out_done(offload_trainer *t, float *host) {
    const compute_backend *be = t->env.be;
    if (!be->unified) be->to_host(be, host, t->act_dev[1], t->NC * sizeof(float));
}

/* Unit u's gradients for a kernel to add into: the host's, or their copy on
 * the device, which stays there while the unit's gradient tasks follow each
 * other; grads_leave_device copies them back when the next gradient task is
 * another unit's, or before the host saves, loads or steps them. */
static float *grads_dev(offload_trainer *t, int u) {
    const compute_backend *be = t->env.be;
    float *host = grads_of(&t->grads, u);
    if (be->unified) return host;
    if (t->grad_dev_unit != u) {
        be->to_device(be, t->grad_dev, host, t->lay.units[u].n * sizeof(float));
        t->grad_dev_unit = u;
    }
    return t->grad_dev;
}

static void grads_leave_device(offload_trainer *t, int u) {
    const compute_backend *be = t->env.be;
    if (be->unified || t->grad_dev_unit != u) return;
    be->to_host(be, grads_of(&t->grads, u), t->grad_dev, t->lay.units[u].n * sizeof(float));
    t->grad_dev_unit = -1;
}

/* Tokens as the host writes them: the device's own buffers on a unified
 * backend, else host staging that tokens_in copies in. */
static int32_t *tokens_host(offload_trainer *t, int targets) {
    int32_t *dev = targets ? t->targets : t->inputs;
    return t->env.be->unified ? dev : t->tokens_host[targets];
}

void run_tokens_in(offload_trainer *t, const int32_t *rows, int n_rows, int T) {
    int32_t *in = tokens_host(t, 0), *tg = tokens_host(t, 1);
    for (int r = 0; r < n_rows; r++) {
        memcpy(in + (size_t)r * T, rows + (size_t)r * (T + 1), sizeof(int32_t) * (size_t)T);
        memcpy(tg + (size_t)r * T, rows + (size_t)r * (T + 1) + 1, sizeof(int32_t) * (size_t)T);
    }
    const compute_backend *be = t->env.be;
    const size_t bytes = sizeof(int32_t) * (size_t)n_rows * T;
    be->to_device(be, t->inputs, in, bytes);   /* nothing to do on a unified backend: the same memory */
    be->to_device(be, t->targets, tg, bytes);
}

/* ---- compute tasks ------------------------------------------------------------------ */

static st_status embed_forward(offload_trainer *t, int m, st_error *err) {
    float *out;
    st_status s = acts_make(&t->acts, 1, m, &out, err);
    if (s != ST_OK) return s;
    gpt_embed_w w = gpt_embed_view(&t->c, (float *)t->weights);
    gpt_embed_forward(t->env.be, &t->c, &w, t->B, t->T, t->inputs + (size_t)m * t->B * t->T, act_out(t, out));
    act_out_done(t, out);
    return ST_OK;
}

static st_status block_forward(offload_trainer *t, int u, int m, st_error *err) {
    float *out;
    st_status s = acts_make(&t->acts, u + 1, m, &out, err);
    if (s != ST_OK) return s;
    gpt_block_w w = gpt_block_view(&t->c, (float *)t->weights);
    gpt_block_acts a = gpt_block_acts_view(&t->c, t->B, t->T, t->block_acts);
    gpt_block_forward(t->env.be, &t->c, &w, t->B, t->T, act_in(t, u, m), act_out(t, out), &a);
    act_out_done(t, out);
    return ST_OK;
}

static void head(offload_trainer *t, int m) {
    const size_t BT = (size_t)t->B * t->T;
    gpt_embed_w w = gpt_embed_view(&t->c, (float *)t->weights), g = gpt_embed_view(&t->c, grads_dev(t, 0));
    t->mb_loss[m] = gpt_head_forward_backward(t->env.be, &t->c, &w, &g, t->B, t->T, act_in(t, t->L1, m),
                                              t->targets + (size_t)m * BT, 1.0f / (float)t->M,
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

/* The activation a compute task reads, or 0 for none. */
static int consumed_act(const offload_trainer *t, const sched_task *k, int *u) {
    switch (k->op) {
    case TASK_BLOCK_FORWARD: case TASK_BLOCK_BACKWARD: *u = k->unit; return 1;
    case TASK_HEAD: *u = t->L1; return 1;
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

static void grad_norm(offload_trainer *t) {
    double sum = 0;
    for (int v = 0; v < t->L1; v++) sum += t->unit_sumsq[v];
    t->clip_scale_now = clip_scale(sqrt(sum), t->cfg.train.clip);
}

static st_status optimize(offload_trainer *t, const sched_task *k, float lr, long step_t, st_error *err) {
    if (!t->grads.all && t->grads.of[k->unit] < 0)
        return st_fail(err, ST_EINVAL, "step of unit %d, whose gradients are not in memory (a schedule bug)", k->unit);
    opt_job job = {.task = *k, .grad_buf = grads_ref(&t->grads, k->unit)};
    if (k->deferred) job.lr = t->prev_lr, job.scale = t->prev_scale, job.step_t = t->prev_t;
    else job.lr = lr, job.scale = t->clip_scale_now, job.step_t = step_t;
    opt_worker_enqueue(&t->worker, &job);
    return ST_OK;
}

/* After task i: start reading what the next weight load, the next checkpoint
 * load and the next gradient load will need, while compute goes on (one
 * ahead of each kind). Weights are read only once the unit's optimizer steps
 * are done (only weights are written by the optimizer). */
static st_status read_ahead(offload_trainer *t, const sched_list *l, int i, st_error *err) {
    const placement pl = t->lay.p.place;
    st_status s = ST_OK;
    int j;
    if (pl.weights && (j = sched_read_ahead(t->an, l, i, SCHED_LOAD_WEIGHTS)) >= 0 &&
        opt_worker_pending(&t->worker, l->tasks[j].unit) == 0)
        s = weights_read_ahead(&t->wl, l->tasks[j].unit, err);
    if (s == ST_OK && pl.acts && (j = sched_read_ahead(t->an, l, i, SCHED_LOAD_ACTS)) >= 0)
        s = acts_read_ahead(&t->acts, l->tasks[j].unit, l->tasks[j].mb, err);
    if (s == ST_OK && pl.grads && (j = sched_read_ahead(t->an, l, i, SCHED_LOAD_GRADS)) >= 0)
        s = grads_read_ahead(&t->grads, &l->tasks[j], err);
    return s;
}

/* ---- the dispatcher ---------------------------------------------------------------- */

static st_status run_task(offload_trainer *t, const sched_list *l, int i, float lr, long step_t, st_error *err) {
    const sched_task *k = &l->tasks[i];
    /* the host's work on a unit's gradients reads (or replaces) the host's copy */
    if (k->op == TASK_SAVE_GRAD || k->op == TASK_LOAD_GRAD || k->op == TASK_OPTIMIZE) grads_leave_device(t, k->unit);
    switch (k->op) {
    case TASK_LOAD_WEIGHTS: return load_weights(t, k->unit, err);
    case TASK_EMBED_FORWARD: return embed_forward(t, k->mb, err);
    case TASK_BLOCK_FORWARD: return block_forward(t, k->unit, k->mb, err);
    case TASK_HEAD: head(t, k->mb); return ST_OK;
    case TASK_BLOCK_BACKWARD: block_backward(t, k->unit, k->mb); return ST_OK;
    case TASK_EMBED_BACKWARD: embed_backward(t, k->mb); return ST_OK;
    case TASK_SAVE_ACT: return save_act(t, l, i, err);
    case TASK_LOAD_ACT: return acts_load(&t->acts, k->unit, k->mb, err);
    case TASK_GRAD_NORM: grad_norm(t); return ST_OK;
    case TASK_SAVE_GRAD: return grads_save(&t->grads, k, err);
    case TASK_LOAD_GRAD: return grads_load(&t->grads, k, err);
    case TASK_OPTIMIZE: return optimize(t, k, lr, step_t, err);
    default: return st_fail(err, ST_EUNSUPPORTED, "task %s is not supported by this executor", task_op_name(k->op));
    }
}

st_status run_list(offload_trainer *t, const sched_list *l, const sched_analysis *an, float lr, long step_t,
                   st_error *err) {
    t->an = an;
    st_status s = ST_OK;
    for (int i = 0; i < l->n && s == ST_OK; i++) {
        const sched_task *k = &l->tasks[i];
        const int gu = sched_grad_unit(k);
        /* a gradient task's unit gets its buffer, zeroed at its first term */
        if (sched_is_grad_task(k->op) && (s = grads_touch(&t->grads, gu, err)) != ST_OK) break;
        const double t0 = st_now();
        s = run_task(t, l, i, lr, step_t, err);
        /* after its last term, a unit's share of the gradient norm (on the
         * device); the unit's gradients go back to the host when the next
         * gradient task is another unit's */
        if (s == ST_OK && an->last_grad[i])
            t->unit_sumsq[gu] = t->env.be->sum_sq(t->env.be, grads_dev(t, gu), t->lay.units[gu].n);
        if (s == ST_OK && an->grad_leave[i]) grads_leave_device(t, gu);
        if (task_op_resource(k->op) == RES_COMPUTE) {
            const double t1 = st_now();
            t->env.stats.compute_s += t1 - t0;
            if (t->env.tr) {
                char name[64];
                snprintf(name, sizeof name, "%s u%d mb%d", task_op_name(k->op), k->unit, k->mb);
                trace_span(t->env.tr, t->env.lane_compute, name, t0, t1);
            }
        }
        /* an activation read from the SSD is dropped once its reader is done,
         * a gradient buffer once the compute thread is */
        int cu;
        if (s == ST_OK && consumed_act(t, k, &cu)) acts_drop(&t->acts, cu, k->mb);
        if (s == ST_OK && an->grad_release[i]) grads_release(&t->grads, gu);
        if (s == ST_OK) s = read_ahead(t, l, i, err);
    }
    return s;
}

st_status run_eval_forward(offload_trainer *t, const int32_t *tokens, int B, int T, float *loss, st_error *err) {
    st_status s;
    const compute_backend *be = t->env.be;
    const gpt_config *c = &t->c;
    run_tokens_in(t, tokens, B, T);   /* the step's buffers are free now */
    float *x = t->eval_buf, *y = t->eval_buf + t->NC;
    if ((s = load_weights(t, 0, err)) != ST_OK) return s;
    gpt_embed_w ew = gpt_embed_view(c, (float *)t->weights);
    gpt_embed_forward(be, c, &ew, B, T, t->inputs, x);
    for (int u = 1; u < t->L1; u++) {
        if ((s = load_weights(t, u, err)) != ST_OK) return s;
        gpt_block_w w = gpt_block_view(c, (float *)t->weights);
        gpt_block_acts a = gpt_block_acts_view(c, B, T, t->block_acts);
        gpt_block_forward(be, c, &w, B, T, x, y, &a);
        float *tmp = x;
        x = y;
        y = tmp;
    }
    if ((s = load_weights(t, 0, err)) != ST_OK) return s;
    ew = gpt_embed_view(c, (float *)t->weights);
    *loss = gpt_head_forward_backward(be, c, &ew, NULL, B, T, x, t->targets, 0.0f, NULL, NULL, t->scratch);
    return ST_OK;
}
