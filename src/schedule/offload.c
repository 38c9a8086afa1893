/* offload.c - runs iteration task lists (strata/offload.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strata/offload.h"

struct offload_trainer {
    offload_config cfg;
    sched_params sp;
    sched_list first, steady, flush;   /* without and with deferred work coming in; flush only */
    gpt_config c;
    int L1, M, B, T;
    size_t n, NC;                      /* parameters; floats of one activation [B,T,C] */
    float *master, *m, *v, *grads;     /* unit layout, fp32 */
    st_bf16 *w16;                      /* compute weights in mixed precision */
    float *unit32;                     /* the loaded unit's weights widened to f32 (mixed) */
    float *weights;                    /* the loaded unit's f32 weights (into master or unit32) */
    int loaded_unit;
    float *acts;                       /* act[u][m] for u = 1..L+1: [(L+1) * M][B,T,C] */
    float *dact;                       /* [M][B,T,C] */
    float *block_acts, *scratch;       /* one block's activations; backward/head scratch */
    int32_t *inputs, *targets;         /* [M][B*T] */
    float *mb_loss;                    /* [M] */
    double *unit_sumsq;                /* [L+1]: sum of squares of each unit's complete gradients */
    char *grads_fresh;                 /* [L+1]: zeroed in this iteration yet */
    int *last_grad_task;               /* [L+1] per list: index of the unit's last gradient task */
    float clip_scale_now;              /* this iteration's clip scale once its norm is known */
    /* The step whose optimizer work is still (partly) deferred. */
    int deferred_pending;
    float prev_lr, prev_scale;
    long prev_t;
    long step;
};

static float *act_ptr(offload_trainer *t, int u, int m) {
    return t->acts + ((size_t)(u - 1) * t->M + m) * t->NC;
}

st_status offload_trainer_create(offload_trainer **out, const offload_config *cfg_in, const float *init,
                                 st_error *err) {
    *out = NULL;
    offload_config cfg = *cfg_in;
    st_status s = train_config_check(&cfg.train, err);
    if (s != ST_OK) return s;
    if (cfg.weights_on_ssd || cfg.optim_on_ssd || cfg.acts_on_ssd || cfg.grads_on_ssd)
        return st_fail(err, ST_EUNSUPPORTED, "placing training state on the SSD is not implemented yet; "
                                             "every kind of state must stay in host memory");
    offload_trainer *t = calloc(1, sizeof *t);
    if (!t) return st_fail(err, ST_ENOMEM, "out of memory");
    t->cfg = cfg;
    t->c = cfg.train.model;
    t->L1 = t->c.n_layer + 1;
    t->M = cfg.train.grad_accum;
    t->B = cfg.train.B;
    t->T = cfg.train.T;
    t->n = gpt_num_params(&t->c);
    t->NC = (size_t)t->B * t->T * t->c.d_model;
    t->loaded_unit = -1;
    t->sp = (sched_params){.kind = cfg.schedule, .n_units = t->L1, .micro_batches = t->M, .alpha = cfg.alpha,
                           .clipping = cfg.train.clip > 0};
    if ((s = sched_build(&t->sp, 0, &t->first, err)) != ST_OK || (s = sched_build(&t->sp, 1, &t->steady, err)) != ST_OK ||
        (s = sched_build_flush(&t->sp, &t->flush, err)) != ST_OK) {
        offload_trainer_free(t);
        return s;
    }
    const size_t bytes = t->n * sizeof(float);
    size_t max_unit = gpt_unit_numel(&t->c, 0) > gpt_unit_numel(&t->c, 1) ? gpt_unit_numel(&t->c, 0)
                                                                           : gpt_unit_numel(&t->c, 1);
    size_t scratch = gpt_block_scratch_numel(&t->c, t->B, t->T), head = gpt_head_scratch_numel(&t->c, t->B, t->T);
    if (head > scratch) scratch = head;
    t->master = st_alloc_aligned(64, bytes);
    t->m = st_alloc_aligned(64, bytes);
    t->v = st_alloc_aligned(64, bytes);
    t->grads = st_alloc_aligned(64, bytes);
    if (cfg.train.precision == GPT_MIXED_BF16) {
        t->w16 = st_alloc_aligned(64, t->n * sizeof(st_bf16));
        t->unit32 = st_alloc_aligned(64, max_unit * sizeof(float));
    }
    t->acts = st_alloc_aligned(64, (size_t)t->L1 * (size_t)t->M * t->NC * sizeof(float));
    t->dact = st_alloc_aligned(64, (size_t)t->M * t->NC * sizeof(float));
    t->block_acts = st_alloc_aligned(64, gpt_block_acts_numel(&t->c, t->B, t->T) * sizeof(float));
    t->scratch = st_alloc_aligned(64, scratch * sizeof(float));
    t->inputs = malloc(sizeof(int32_t) * (size_t)t->M * t->B * t->T);
    t->targets = malloc(sizeof(int32_t) * (size_t)t->M * t->B * t->T);
    t->mb_loss = malloc(sizeof(float) * (size_t)t->M);
    t->unit_sumsq = calloc((size_t)t->L1, sizeof(double));
    t->grads_fresh = calloc((size_t)t->L1, 1);
    t->last_grad_task = malloc(sizeof(int) * (size_t)t->L1);
    if (!t->master || !t->m || !t->v || !t->grads || !t->acts || !t->dact || !t->block_acts || !t->scratch ||
        !t->inputs || !t->targets || !t->mb_loss || !t->unit_sumsq || !t->grads_fresh || !t->last_grad_task ||
        (cfg.train.precision == GPT_MIXED_BF16 && (!t->w16 || !t->unit32))) {
        offload_trainer_free(t);
        return st_fail(err, ST_ENOMEM, "out of memory for the offloaded trainer's host state");
    }
    if (init) memcpy(t->master, init, bytes);
    else gpt_init_params(&t->c, t->master, cfg.train.seed);
    memset(t->m, 0, bytes);
    memset(t->v, 0, bytes);
    memset(t->grads, 0, bytes);
    if (t->w16) gpt_f32_to_bf16(t->master, t->w16, t->n);
    *out = t;
    return ST_OK;
}

void offload_trainer_free(offload_trainer *t) {
    if (!t) return;
    sched_list_free(&t->first);
    sched_list_free(&t->steady);
    sched_list_free(&t->flush);
    st_free_aligned(t->master);
    st_free_aligned(t->m);
    st_free_aligned(t->v);
    st_free_aligned(t->grads);
    st_free_aligned(t->w16);
    st_free_aligned(t->unit32);
    st_free_aligned(t->acts);
    st_free_aligned(t->dact);
    st_free_aligned(t->block_acts);
    st_free_aligned(t->scratch);
    free(t->inputs);
    free(t->targets);
    free(t->mb_loss);
    free(t->unit_sumsq);
    free(t->grads_fresh);
    free(t->last_grad_task);
    free(t);
}

st_status offload_trainer_read_params(offload_trainer *t, float *out, st_error *err) {
    (void)err;
    memcpy(out, t->master, t->n * sizeof(float));
    return ST_OK;
}

void offload_trainer_io_bytes(const offload_trainer *t, uint64_t *read, uint64_t *written) {
    (void)t;
    *read = *written = 0;
}

static float *unit_grads(offload_trainer *t, int u) { return t->grads + gpt_unit_offset(&t->c, u); }

/* Gradients of unit u are about to receive this iteration's first term. */
static void touch_grads(offload_trainer *t, int u) {
    if (t->grads_fresh[u]) return;
    memset(unit_grads(t, u), 0, gpt_unit_numel(&t->c, u) * sizeof(float));
    t->grads_fresh[u] = 1;
}

/* After a gradient task: when it was the unit's last, take its sum of squares. */
static void after_grad_task(offload_trainer *t, int u, int task) {
    if (task == t->last_grad_task[u])
        t->unit_sumsq[u] = grad_sum_sq(unit_grads(t, u), gpt_unit_numel(&t->c, u));
}

static void load_weights(offload_trainer *t, int u) {
    size_t off = gpt_unit_offset(&t->c, u);
    if (t->w16) {
        gpt_bf16_to_f32(t->w16 + off, t->unit32, gpt_unit_numel(&t->c, u));
        t->weights = t->unit32;
    } else {
        t->weights = t->master + off;
    }
    t->loaded_unit = u;
}

static void optimize(offload_trainer *t, const sched_task *k, float lr, float scale, long step_t) {
    const int u = k->unit;
    const size_t n = gpt_unit_numel(&t->c, u), off = gpt_unit_offset(&t->c, u);
    /* Shares map to elements by one rule, so a unit's parts tile it exactly. */
    size_t lo = (size_t)floor(k->lo * (double)n), hi = k->hi >= 1.0 ? n : (size_t)floor(k->hi * (double)n);
    adamw_step_unit(&t->c, u, lo, hi, &t->cfg.train.adam, lr, scale, step_t, t->master + off, t->grads + off,
                    t->m + off, t->v + off, t->w16 ? t->w16 + off : NULL);
    if (t->loaded_unit == u) t->loaded_unit = -1;   /* the loaded copy is stale now */
}

static st_status run_list(offload_trainer *t, const sched_list *l, float lr, long step_t, st_error *err) {
    const gpt_config *c = &t->c;
    const int BT = t->B * t->T;
    const float grad_scale = 1.0f / (float)t->M;
    for (int u = 0; u < t->L1; u++) t->last_grad_task[u] = -1;
    for (int i = 0; i < l->n; i++) {
        task_op op = l->tasks[i].op;
        if (op == TASK_HEAD || op == TASK_BLOCK_BACKWARD || op == TASK_EMBED_BACKWARD) t->last_grad_task[l->tasks[i].unit] = i;
    }
    for (int i = 0; i < l->n; i++) {
        const sched_task *k = &l->tasks[i];
        const int u = k->unit, m = k->mb;
        switch (k->op) {
        case TASK_LOAD_WEIGHTS:
            load_weights(t, u);
            break;
        case TASK_EMBED_FORWARD: {
            gpt_embed_w w = gpt_embed_view(c, t->weights);
            gpt_embed_forward(c, &w, t->B, t->T, t->inputs + (size_t)m * BT, act_ptr(t, 1, m));
            break;
        }
        case TASK_BLOCK_FORWARD: {
            gpt_block_w w = gpt_block_view(c, t->weights);
            gpt_block_acts a = gpt_block_acts_view(c, t->B, t->T, t->block_acts);
            gpt_block_forward(c, &w, t->B, t->T, act_ptr(t, u, m), act_ptr(t, u + 1, m), &a);
            break;
        }
        case TASK_HEAD: {
            touch_grads(t, 0);
            gpt_embed_w w = gpt_embed_view(c, t->weights), g = gpt_embed_view(c, unit_grads(t, 0));
            t->mb_loss[m] = gpt_head_forward_backward(c, &w, &g, t->B, t->T, act_ptr(t, t->L1, m),
                                                      t->targets + (size_t)m * BT, grad_scale,
                                                      t->dact + (size_t)m * t->NC, NULL, t->scratch);
            after_grad_task(t, 0, i);
            break;
        }
        case TASK_BLOCK_BACKWARD: {
            touch_grads(t, u);
            gpt_block_w w = gpt_block_view(c, t->weights), g = gpt_block_view(c, unit_grads(t, u));
            gpt_block_acts a = gpt_block_acts_view(c, t->B, t->T, t->block_acts);
            const float *x = act_ptr(t, u, m);
            float *dx = t->dact + (size_t)m * t->NC, *out = t->scratch;
            /* recompute the block's activations from its checkpointed input;
             * its output goes to scratch, which backward then reuses */
            gpt_block_forward(c, &w, t->B, t->T, x, out, &a);
            gpt_block_backward(c, &w, &g, t->B, t->T, x, &a, dx, dx, t->scratch);
            after_grad_task(t, u, i);
            break;
        }
        case TASK_EMBED_BACKWARD: {
            touch_grads(t, 0);
            gpt_embed_w g = gpt_embed_view(c, unit_grads(t, 0));
            gpt_embed_backward(c, &g, t->B, t->T, t->inputs + (size_t)m * BT, t->dact + (size_t)m * t->NC);
            after_grad_task(t, 0, i);
            break;
        }
        case TASK_GRAD_NORM: {
            double sum = 0;
            for (int v = 0; v < t->L1; v++) sum += t->unit_sumsq[v];
            t->clip_scale_now = clip_scale(sqrt(sum), t->cfg.train.clip);
            break;
        }
        case TASK_OPTIMIZE:
            if (k->deferred) optimize(t, k, t->prev_lr, t->prev_scale, t->prev_t);
            else optimize(t, k, lr, t->clip_scale_now, step_t);
            break;
        default:
            return st_fail(err, ST_EUNSUPPORTED, "task %s needs the SSD tier, which this executor does not have yet",
                           task_op_name(k->op));
        }
    }
    return ST_OK;
}

st_status offload_trainer_step(offload_trainer *t, const int32_t *tokens, train_step_stats *stats, st_error *err) {
    const int BT = t->B * t->T;
    double t0 = st_now();
    for (int mb = 0; mb < t->M; mb++)
        for (int b = 0; b < t->B; b++) {
            const int32_t *row = tokens + ((size_t)mb * t->B + b) * (size_t)(t->T + 1);
            memcpy(t->inputs + (size_t)mb * BT + (size_t)b * t->T, row, sizeof(int32_t) * (size_t)t->T);
            memcpy(t->targets + (size_t)mb * BT + (size_t)b * t->T, row + 1, sizeof(int32_t) * (size_t)t->T);
        }
    memset(t->grads_fresh, 0, (size_t)t->L1);
    const float lr = lr_schedule_at(&t->cfg.train.lr, t->step);
    /* Without clipping, steps taken during backward use scale 1. */
    t->clip_scale_now = 1.0f;
    st_status s = run_list(t, t->deferred_pending ? &t->steady : &t->first, lr, t->step + 1, err);
    if (s != ST_OK) return s;
    double sum = 0, loss = 0;
    for (int u = 0; u < t->L1; u++) sum += t->unit_sumsq[u];
    for (int mb = 0; mb < t->M; mb++) loss += t->mb_loss[mb];
    t->prev_lr = lr;
    t->prev_scale = t->sp.clipping ? clip_scale(sqrt(sum), t->cfg.train.clip) : 1.0f;
    t->prev_t = t->step + 1;
    t->deferred_pending = sched_deferred_share(&t->sp) > 0.0;
    t->step++;
    if (stats) {
        stats->loss = (float)(loss / t->M);
        stats->grad_norm = (float)sqrt(sum);
        stats->lr = lr;
        stats->seconds = st_now() - t0;
    }
    return ST_OK;
}

st_status offload_trainer_flush(offload_trainer *t, st_error *err) {
    if (!t->deferred_pending) return ST_OK;
    st_status s = run_list(t, &t->flush, 0.0f, 0, err);
    if (s == ST_OK) t->deferred_pending = 0;
    return s;
}
