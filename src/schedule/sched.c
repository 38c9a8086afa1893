/* sched.c - generates one training iteration as a task list (strata/schedule.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/schedule.h"

const char *task_op_name(task_op op) {
    static const char *names[TASK_OP_COUNT] = {
        "load_weights", "embed_forward", "block_forward", "head", "block_backward", "embed_backward",
        "save_act", "load_act", "save_grad", "load_grad", "grad_norm", "optimize",
        "tokens_to_device", "act_to_device", "act_to_host", "grad_to_device", "grad_to_host",
        "gather_weights", "reduce_grads"};
    return op < TASK_OP_COUNT ? names[op] : "?";
}

int sched_unit_streams(const sched_params *p, int u) {
    return p->ranks > 1 || placement_on_ssd(p->place, PLACE_OPTIM, u, p->n_units) ||
           placement_on_ssd(p->place, PLACE_WEIGHTS, u, p->n_units);
}

/* Vertical steps a unit during backward, before the global norm exists:
 * with clipping every step moves to the next forward. Horizontal steps
 * after backward, once the norm is known. */
static int steps_wait_for_the_norm(const sched_params *p) { return p->clipping && p->kind == SCHED_VERTICAL; }

double sched_streaming_share(const sched_params *p) { return steps_wait_for_the_norm(p) ? 1.0 : p->alpha; }

double sched_deferred_share(const sched_params *p, int u) {
    /* Deferring a step moves its SSD traffic into the next forward, where
     * the drive is idle; on the CPU backend a step with nothing on the SSD
     * has no traffic to move and shares the cores with compute, and
     * deferring it would only park its gradients there (defer_in_memory: a
     * device beside the host). Clipping (vertical) defers every step. */
    const int defers = steps_wait_for_the_norm(p) || p->defer_in_memory || sched_unit_streams(p, u);
    return defers ? sched_streaming_share(p) : 0.0;
}

int sched_defers(const sched_params *p) {
    for (int u = 0; u < p->n_units; u++)
        if (sched_deferred_share(p, u) > 0.0) return 1;
    return 0;
}

int sched_head_unit(const sched_params *p) { return p->separate_head ? p->n_units - 1 : 0; }

int sched_parts(const sched_params *p, place_kind k) {
    return k == PLACE_ACTS ? p->n_units - (p->separate_head != 0) : p->n_units;
}

void sched_parts_all(const sched_params *p, int parts[PLACE_KINDS]) {
    for (int k = 0; k < PLACE_KINDS; k++) parts[k] = sched_parts(p, (place_kind)k);
}

/* Generator state: which task last produced each piece of data. */
typedef struct gen {
    const sched_params *p;
    sched_list *l;
    st_status status;
    int L1;                 /* n_units */
    int n_blocks;           /* blocks are units 1..n_blocks; act[n_blocks + 1] is the head's input */
    int head;               /* the head's unit: 0, or n_units - 1 when it has its own */
    int n_acts;             /* checkpoint indices 1..n_acts (n_blocks + 1): the acts placement's parts */
    int M;
    int *act_prod;          /* [L+2][M]: task that put act[u][m] in memory */
    int *act_saved;         /* [L+2][M]: SAVE_ACT task, -1 if not on the SSD */
    int *dact_prod;         /* [M] */
    int *grad_last;         /* [L+1]: last task that touched the unit's gradients */
    int *grad_saved;        /* [L+1]: SAVE_GRAD task, -1 if the gradients are in memory */
    int *weights_writer;    /* [L+1]: last optimizer task of the unit in this list */
    int *deferred_pending;  /* [L+1]: 1 while the unit's deferred work has not been emitted */
    int *reduced;           /* [L+1]: the unit's REDUCE_GRADS is emitted (several ranks) */
    int last_compute;       /* the compute task emitted last */
    int last_network;       /* the collective emitted last, -1: none */
    int pass;               /* how many passes over the micro-batches so far (snake) */
    int park_unit;          /* several ranks: a park waiting for the next compute, -1: none ... */
    double park_lo, park_hi;   /* ... of this share */
} gen;

/* grad_saved[u]: the SAVE_GRAD task when the unit's gradients are on the SSD,
 * -1 when they are in memory, or this when a previous list parked them. */
#define GRADS_PARKED_EARLIER (-2)

static int *act_at(gen *g, int *arr, int u, int m) { return &arr[(size_t)u * g->M + m]; }

static int emit(gen *g, task_op op, int unit, int mb, const int *deps, int n_deps) {
    if (g->status != ST_OK) return -1;
    sched_list *l = g->l;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 256;
        sched_task *t = realloc(l->tasks, sizeof *t * (size_t)cap);
        if (!t) {
            g->status = ST_ENOMEM;
            return -1;
        }
        l->tasks = t;
        l->cap = cap;
    }
    sched_task *t = &l->tasks[l->n];
    *t = (sched_task){.op = op, .unit = unit, .mb = mb};
    for (int i = 0; i < n_deps; i++)
        if (deps[i] >= 0 && t->n_deps < SCHED_MAX_DEPS) {
            int dup = 0;
            for (int k = 0; k < t->n_deps; k++) dup |= t->deps[k] == deps[i];
            if (!dup) t->deps[t->n_deps++] = deps[i];
        }
    if (task_op_resource(op) == RES_COMPUTE) g->last_compute = l->n;
    if (task_op_resource(op) == RES_NETWORK) g->last_network = l->n;
    return l->n++;
}

/* The order of micro-batches for the next pass: ascending, then descending,
 * alternating (vertical's snake); always ascending is not used here because
 * horizontal runs one micro-batch per pass. */
static int mb_at(gen *g, int i) { return g->pass % 2 == 0 ? i : g->M - 1 - i; }

/* act[u][m] in memory for a consumer: loads it when it lives on the SSD and
 * is not the output of the compute task just before (the snake's turn). */
static int need_act(gen *g, int u, int m) {
    int prod = *act_at(g, g->act_prod, u, m);
    if (!placement_on_ssd(g->p->place, PLACE_ACTS, u, g->n_acts) || prod == g->last_compute) return prod;
    int saved = *act_at(g, g->act_saved, u, m);
    int t = emit(g, TASK_LOAD_ACT, u, m, &saved, 1);
    *act_at(g, g->act_prod, u, m) = t;
    return t;
}

static void made_act(gen *g, int u, int m, int producer) {
    *act_at(g, g->act_prod, u, m) = producer;
    *act_at(g, g->act_saved, u, m) = -1;
    if (placement_on_ssd(g->p->place, PLACE_ACTS, u, g->n_acts))
        *act_at(g, g->act_saved, u, m) = emit(g, TASK_SAVE_ACT, u, m, &producer, 1);
}

/* Sets a SAVE_GRAD or LOAD_GRAD task's share of the unit, [lo, hi). */
static int with_share(gen *g, int t, double lo, double hi) {
    if (t >= 0) {
        g->l->tasks[t].lo = lo;
        g->l->tasks[t].hi = hi;
    }
    return t;
}

/* Gradients of unit u, share [lo, hi), in memory before accumulating into
 * them or stepping them: loads them when a SAVE_GRAD parked them. Loading
 * all of them ends the parking; loading a part (horizontal's immediate step)
 * leaves the rest (the deferred part) on the SSD. */
static void flush_park(gen *g);

static int need_grads(gen *g, int u, double lo, double hi) {
    if (g->park_unit == u) flush_park(g);
    if (g->grad_saved[u] == -1) return g->grad_last[u];
    int t = with_share(g, emit(g, TASK_LOAD_GRAD, u, -1, &g->grad_saved[u], 1), lo, hi);
    if (lo <= 0.0 && hi >= 1.0) g->grad_saved[u] = -1;
    g->grad_last[u] = t;
    return t;
}

/* Parks the share [lo, hi) of unit u's gradients on the SSD until needed. */
static void park_grads(gen *g, int u, double lo, double hi) {
    if (!placement_on_ssd(g->p->place, PLACE_GRADS, u, g->L1)) return;
    g->grad_saved[u] = with_share(g, emit(g, TASK_SAVE_GRAD, u, -1, &g->grad_last[u], 1), lo, hi);
}

/* Several ranks: a save of gradients just reduced waits for their sum, so
 * it is emitted after the next unit's compute (flush_park), while the sum
 * travels; the pending one goes first, and so does a use of the unit's
 * gradients (need_grads) and the list's end. */
static void park_after_sum(gen *g, int u, double lo, double hi) {
    if (g->p->ranks < 2) {
        park_grads(g, u, lo, hi);
        return;
    }
    flush_park(g);
    if (!placement_on_ssd(g->p->place, PLACE_GRADS, u, g->L1)) return;
    g->park_unit = u, g->park_lo = lo, g->park_hi = hi;
}

static void flush_park(gen *g) {
    const int u = g->park_unit;
    g->park_unit = -1;
    if (u >= 0) park_grads(g, u, g->park_lo, g->park_hi);
}

static int emit_optimize(gen *g, int u, double lo, double hi, int deferred, const int *deps, int n) {
    int t = emit(g, TASK_OPTIMIZE, u, -1, deps, n);
    if (t >= 0) {
        g->l->tasks[t].lo = lo;
        g->l->tasks[t].hi = hi;
        g->l->tasks[t].deferred = deferred;
        g->weights_writer[u] = t;
    }
    return t;
}

/* The previous iteration's deferred share of unit u, just ahead of its use. */
static void emit_deferred(gen *g, int u) {
    if (u >= g->L1 || !g->deferred_pending[u]) return;
    g->deferred_pending[u] = 0;
    double share = sched_deferred_share(g->p, u);
    int deps[1] = {need_grads(g, u, 1.0 - share, 1.0)};
    emit_optimize(g, u, 1.0 - share, 1.0, 1, deps, 1);
    g->grad_saved[u] = -1;   /* consumed: this iteration accumulates afresh */
}

/* The unit's weights for compute: loaded, and with several ranks the load
 * is this rank's shard, gathered with the others' after it. */
static int load_weights(gen *g, int u) {
    emit_deferred(g, u);
    int dep = g->weights_writer[u];
    const int t = emit(g, TASK_LOAD_WEIGHTS, u, -1, &dep, 1);
    return g->p->ranks > 1 ? emit(g, TASK_GATHER_WEIGHTS, u, -1, &t, 1) : t;
}

/* Several ranks: unit u's gradient is complete on every rank; summed over
 * them into each rank's shard before anything reads it. */
static void reduce_grads(gen *g, int u) {
    if (g->p->ranks < 2 || g->reduced[u]) return;
    g->reduced[u] = 1;
    g->grad_last[u] = emit(g, TASK_REDUCE_GRADS, u, -1, &g->grad_last[u], 1);
}

/* A unit's gradients are complete: step the share that is not deferred and
 * keep the rest for the next iteration (parked on the SSD when gradients
 * live there; horizontal's are there already). norm: the GRAD_NORM task the
 * step must wait for (clipping), or -1. */
static void grads_complete(gen *g, int u, int norm) {
    reduce_grads(g, u);
    double share = sched_deferred_share(g->p, u);
    if (share < 1.0) {
        int deps[2] = {need_grads(g, u, 0.0, 1.0 - share), norm};
        emit_optimize(g, u, 0.0, 1.0 - share, 0, deps, 2);
    }
    if (share > 0.0 && g->grad_saved[u] == -1) park_after_sum(g, u, 1.0 - share, 1.0);
}

/* With clipping: the global norm, once every gradient is complete. Compute
 * tasks (and collectives) run in list order, so the last one finishing
 * means all have; each unit's sum of squares is taken as its gradients
 * complete (with several ranks, of the rank's shard once reduced: the
 * norm sums them over the ranks). */
static int grad_norm(gen *g) {
    if (!g->p->clipping) return -1;
    int deps[2] = {g->last_compute, g->last_network};
    return emit(g, TASK_GRAD_NORM, -1, -1, deps, 2);
}

/* The head over micro-batch m: the loss and the start of backward; the
 * head unit's gradients +=. grads: the dependency on those gradients. */
static int emit_head(gen *g, int m, int lw, int grads) {
    int deps[3] = {lw, need_act(g, g->n_blocks + 1, m), grads};
    int t = emit(g, TASK_HEAD, g->head, m, deps, 3);
    g->dact_prod[m] = g->grad_last[g->head] = t;
    return t;
}

static void build_vertical(gen *g) {
    const int NB = g->n_blocks, M = g->M;
    /* forward: the embedding unit, then every block, all micro-batches each */
    emit_deferred(g, 1);   /* two units ahead of the first compute */
    int lw = load_weights(g, 0);
    for (int i = 0; i < M; i++) {
        int m = mb_at(g, i);
        made_act(g, 1, m, emit(g, TASK_EMBED_FORWARD, 0, m, &lw, 1));
    }
    g->pass++;
    for (int u = 1; u <= NB; u++) {
        /* one unit ahead: the next block's, or after the last block a head unit's */
        emit_deferred(g, u + 1);
        lw = load_weights(g, u);
        for (int i = 0; i < M; i++) {
            int m = mb_at(g, i);
            int deps[2] = {lw, need_act(g, u, m)};
            made_act(g, u + 1, m, emit(g, TASK_BLOCK_FORWARD, u, m, deps, 2));
        }
        g->pass++;
    }
    /* head: loss and the start of backward, per micro-batch */
    lw = load_weights(g, g->head);
    for (int i = 0; i < M; i++) emit_head(g, mb_at(g, i), lw, g->grad_last[g->head]);
    g->pass++;
    /* a head of its own is complete now; tied, its terms wait for the embedding's */
    int complete = g->head != 0 ? g->head : -1;
    /* Several ranks: a unit's completion (its REDUCE_GRADS) comes after the
     * next unit's load, so that the next unit's gather is the next
     * collective while this unit's backward runs and can start ahead
     * (collectives start in list order), and the reduce-scatter travels
     * during the next unit's backward. */
    const int reduce_late = g->p->ranks > 1;
    if (!reduce_late && complete >= 0) grads_complete(g, complete, -1), complete = -1;
    /* backward, block by block from the top */
    for (int u = NB; u >= 1; u--) {
        lw = load_weights(g, u);
        if (complete >= 0) grads_complete(g, complete, -1), complete = -1;
        for (int i = 0; i < M; i++) {
            int m = mb_at(g, i);
            int deps[4] = {lw, need_act(g, u, m), g->dact_prod[m], g->grad_last[u]};
            int t = emit(g, TASK_BLOCK_BACKWARD, u, m, deps, 4);
            g->dact_prod[m] = g->grad_last[u] = t;
        }
        g->pass++;
        flush_park(g);   /* the previous unit's, whose sum travelled during this backward */
        /* with clipping: all deferred (sched_deferred_share) */
        if (reduce_late) complete = u;
        else grads_complete(g, u, -1);
    }
    if (complete >= 0) grads_complete(g, complete, -1);
    for (int i = 0; i < M; i++) {
        int m = mb_at(g, i);
        int deps[2] = {g->dact_prod[m], g->grad_last[0]};
        g->grad_last[0] = emit(g, TASK_EMBED_BACKWARD, 0, m, deps, 2);
    }
    g->pass++;
    flush_park(g);
    grads_complete(g, 0, -1);
    flush_park(g);
    grad_norm(g);
}

/* Several ranks, horizontal: as ZeRO-Infinity does it, each micro-batch's
 * gradient of a unit is reduce-scattered as soon as it is complete, and
 * each rank adds its shard of the sum into its accumulator; memory holds
 * the rank's shard of every unit's gradient and a few whole units being
 * computed or summed. The reduction waits for the next unit's load (as in
 * vertical's backward) so that the next gather is the next collective
 * while this unit's backward runs. */
typedef struct pending_reduce {
    int unit, mb;   /* unit -1: none */
} pending_reduce;

static void reduce_micro_batch(gen *g, pending_reduce *pr) {
    if (pr->unit < 0) return;
    const int u = pr->unit, t = emit(g, TASK_REDUCE_GRADS, u, pr->mb, &g->grad_last[u], 1);
    /* in memory, the next micro-batch's terms go to a fresh buffer, not
     * after this; after the last, the unit's steps and the norm wait for
     * it. On the SSD the accumulator is parked once the sum is in it (the
     * next micro-batch loads it into its shard of the buffer, so that the
     * next sum adds into it) */
    if (pr->mb == g->M - 1) g->grad_last[u] = t, g->reduced[u] = 1;
    if (placement_on_ssd(g->p->place, PLACE_GRADS, u, g->L1)) g->grad_last[u] = t, park_after_sum(g, u, 0.0, 1.0);
    pr->unit = -1;
}

static void later_reduce(gen *g, pending_reduce *pr, int u, int m) {
    if (g->p->ranks < 2) return;
    flush_park(g);   /* a unit's sum parked after the next unit's backward (park_after_sum) */
    reduce_micro_batch(g, pr);
    *pr = (pending_reduce){u, m};
}

static void build_horizontal(gen *g) {
    const int NB = g->n_blocks, M = g->M;
    const int park = g->p->ranks < 2;   /* several ranks: gradients are parked after their sum (reduce_micro_batch) */
    pending_reduce pr = {-1, -1};
    for (int m = 0; m < M; m++) {
        int lw = load_weights(g, 0);
        reduce_micro_batch(g, &pr);   /* the previous micro-batch's embedding unit */
        made_act(g, 1, m, emit(g, TASK_EMBED_FORWARD, 0, m, &lw, 1));
        flush_park(g);   /* its buffer is the end units' one, which a head of its own needs next */
        for (int u = 1; u <= NB; u++) {
            lw = load_weights(g, u);
            int deps[2] = {lw, need_act(g, u, m)};
            made_act(g, u + 1, m, emit(g, TASK_BLOCK_FORWARD, u, m, deps, 2));
        }
        lw = load_weights(g, g->head);
        emit_head(g, m, lw, need_grads(g, g->head, 0.0, 1.0));
        if (g->head != 0 && park) park_grads(g, g->head, 0.0, 1.0);
        if (g->head != 0) later_reduce(g, &pr, g->head, m);
        for (int u = NB; u >= 1; u--) {
            lw = load_weights(g, u);
            reduce_micro_batch(g, &pr);
            int bdeps[4] = {lw, need_act(g, u, m), g->dact_prod[m], need_grads(g, u, 0.0, 1.0)};
            int t = emit(g, TASK_BLOCK_BACKWARD, u, m, bdeps, 4);
            g->dact_prod[m] = g->grad_last[u] = t;
            /* accumulators wait on the SSD for the next micro-batch, and
             * after the last one for the optimizer: memory holds one block's */
            if (park) park_grads(g, u, 0.0, 1.0);
            later_reduce(g, &pr, u, m);
        }
        reduce_micro_batch(g, &pr);   /* the embedding's backward loads no weights: the first block's now */
        int edeps[2] = {g->dact_prod[m], need_grads(g, 0, 0.0, 1.0)};
        g->grad_last[0] = emit(g, TASK_EMBED_BACKWARD, 0, m, edeps, 2);
        if (park) park_grads(g, 0, 0.0, 1.0);
        later_reduce(g, &pr, 0, m);
    }
    reduce_micro_batch(g, &pr);
    /* the optimizer over every unit, after the last micro-batch (several
     * ranks: every gradient reduced first, for the norm) */
    int norm = grad_norm(g);
    for (int u = 0; u < g->L1; u++) grads_complete(g, u, norm);
    flush_park(g);
}

/* ---- copies between host memory and a separate device ------------------------------------
 * With sched_params.separate_device the generated list is rewritten so that
 * what compute reads from host memory is copied in by a task just before it,
 * and what it leaves there is copied out by a task just after: the token ids
 * before their first use; act[u][m] into the device before each compute task
 * that reads it, and a new checkpoint out after the task that makes it (its
 * SAVE_ACT then depends on the copy); a unit's gradients in before the first
 * of a run of its gradient tasks and out after the last (when the next
 * gradient task is another unit's: the analysis' grad_leave), so that saves,
 * loads and steps of gradients find them in host memory. Compute weights
 * reach the device in their LOAD_WEIGHTS. */

/* The checkpoint a compute task reads (*in) and the one it makes (*out), as units; -1 for none. */
static void task_acts(const sched_task *t, int n_acts, int *in, int *out) {
    *in = *out = -1;
    switch (t->op) {
    case TASK_EMBED_FORWARD: *out = 1; break;
    case TASK_BLOCK_FORWARD: *in = t->unit, *out = t->unit + 1; break;
    case TASK_HEAD: *in = n_acts; break;
    case TASK_BLOCK_BACKWARD: *in = t->unit; break;
    default: break;
    }
}

static int reads_tokens(task_op op) {
    return op == TASK_EMBED_FORWARD || op == TASK_HEAD || op == TASK_EMBED_BACKWARD;
}

static int is_grad_host_task(task_op op) {
    return op == TASK_SAVE_GRAD || op == TASK_LOAD_GRAD || op == TASK_OPTIMIZE;
}

/* Appends dep (when >= 0) to deps[*n]; 0 when the task would have more than SCHED_MAX_DEPS. */
static int add_dep(int *deps, int *n, int dep) {
    if (dep < 0) return 1;
    if (*n == SCHED_MAX_DEPS) return 0;
    deps[(*n)++] = dep;
    return 1;
}

static st_status add_device_copies(const sched_params *p, sched_list *l, st_error *err) {
    const int n = l->n, L1 = p->n_units;
    sched_list out = {0};
    gen g = {.p = p, .l = &out, .status = ST_OK, .L1 = L1, .M = p->micro_batches, .last_compute = -1, .park_unit = -1};
    int *at = malloc(sizeof(int) * (size_t)(n + 1));          /* the new index of task i */
    int *in_host = malloc(sizeof(int) * (size_t)(n + 1));     /* the new task after which task i's result is in host memory */
    int *next_grad_unit = malloc(sizeof(int) * (size_t)(n + 1));   /* the unit of the next gradient task after i, -1: none */
    int *grads_out = malloc(sizeof(int) * (size_t)L1);        /* each unit's last GRAD_TO_HOST, -1: none */
    int ok = 1;   /* 0: a task would need more than SCHED_MAX_DEPS dependencies */
    if (!at || !in_host || !next_grad_unit || !grads_out) {
        g.status = ST_ENOMEM;
    } else {
        next_grad_unit[n > 0 ? n - 1 : 0] = -1;
        for (int i = n - 1; i > 0; i--)
            next_grad_unit[i - 1] = sched_is_grad_task(l->tasks[i].op) ? sched_grad_unit(&l->tasks[i]) : next_grad_unit[i];
        for (int u = 0; u < L1; u++) grads_out[u] = -1;
    }
    int tokens = -1, on_device = -1;   /* the TOKENS_TO_DEVICE task; the unit whose gradients are on the device */
    for (int i = 0; ok && i < n && g.status == ST_OK; i++) {
        const sched_task *k = &l->tasks[i];
        const int compute = task_op_resource(k->op) == RES_COMPUTE;
        int host_deps[SCHED_MAX_DEPS], n_host = 0, own[SCHED_MAX_DEPS], n_own = 0;
        for (int d = 0; d < k->n_deps; d++) {
            ok &= add_dep(host_deps, &n_host, in_host[k->deps[d]]);
            ok &= add_dep(own, &n_own, compute ? at[k->deps[d]] : in_host[k->deps[d]]);
        }
        int act_in, act_out;
        task_acts(k, sched_parts(p, PLACE_ACTS), &act_in, &act_out);
        const int gu = sched_is_grad_task(k->op) ? sched_grad_unit(k) : -1;
        if (is_grad_host_task(k->op)) {
            if (k->unit == on_device) {   /* not made by the generator's lists; kept correct if one does */
                grads_out[k->unit] = emit(&g, TASK_GRAD_TO_HOST, k->unit, -1, &g.last_compute, 1);
                on_device = -1;
            }
            ok &= add_dep(own, &n_own, grads_out[k->unit]);
        }
        if (act_in >= 0) ok &= add_dep(own, &n_own, emit(&g, TASK_ACT_TO_DEVICE, act_in, k->mb, host_deps, n_host));
        if (gu >= 0 && gu != on_device) {
            ok &= add_dep(host_deps, &n_host, grads_out[gu]);
            ok &= add_dep(own, &n_own, emit(&g, TASK_GRAD_TO_DEVICE, gu, -1, host_deps, n_host));
            on_device = gu;
        }
        if (reads_tokens(k->op)) {
            if (tokens < 0) tokens = emit(&g, TASK_TOKENS_TO_DEVICE, -1, -1, NULL, 0);
            ok &= add_dep(own, &n_own, tokens);
        }
        const int t = emit(&g, k->op, k->unit, k->mb, own, n_own);
        if (t >= 0) {
            out.tasks[t].lo = k->lo;
            out.tasks[t].hi = k->hi;
            out.tasks[t].deferred = k->deferred;
        }
        at[i] = in_host[i] = t;
        if (act_out >= 0) in_host[i] = emit(&g, TASK_ACT_TO_HOST, act_out, k->mb, &t, 1);
        if (gu >= 0 && next_grad_unit[i] != gu) {
            grads_out[gu] = emit(&g, TASK_GRAD_TO_HOST, gu, -1, &t, 1);
            on_device = -1;
        }
    }
    free(at);
    free(in_host);
    free(next_grad_unit);
    free(grads_out);
    if (!ok || g.status != ST_OK) {
        sched_list_free(&out);
        sched_list_free(l);   /* the caller gets no list on failure, as from the generator */
        return ok ? st_fail(err, g.status, "out of memory adding device copies to a schedule")
                  : st_fail(err, ST_EINVAL, "a task with device copies needs more than %d dependencies", SCHED_MAX_DEPS);
    }
    sched_list_free(l);
    *l = out;
    return ST_OK;
}

static st_status check_params(const sched_params *p, st_error *err) {
    if (p->kind != SCHED_VERTICAL && p->kind != SCHED_HORIZONTAL)
        return st_fail(err, ST_EINVAL, "unknown schedule %d", (int)p->kind);
    if (p->n_units < 2 + (p->separate_head != 0))
        return st_fail(err, ST_EINVAL, "a model needs at least one block (n_units %d%s)", p->n_units,
                       p->separate_head ? " with a head unit" : "");
    if (p->micro_batches < 1) return st_fail(err, ST_EINVAL, "micro-batches %d must be at least 1", p->micro_batches);
    if (!(p->alpha >= 0.0 && p->alpha <= 1.0)) return st_fail(err, ST_EINVAL, "alpha %g must be in [0, 1]", p->alpha);
    if (p->ranks > 1 && p->separate_device)
        return st_fail(err, ST_EUNSUPPORTED, "several ranks with a separate device are not supported yet");
    return ST_OK;
}

static st_status generate(const sched_params *p, int deferred_in, int flush_only, sched_list *out, st_error *err) {
    memset(out, 0, sizeof *out);
    st_status s = check_params(p, err);
    if (s != ST_OK) return s;
    gen g = {.p = p, .l = out, .status = ST_OK, .L1 = p->n_units, .M = p->micro_batches, .last_compute = -1,
             .last_network = -1, .park_unit = -1, .n_acts = sched_parts(p, PLACE_ACTS), .head = sched_head_unit(p)};
    g.n_blocks = g.n_acts - 1;
    const size_t acts = (size_t)(p->n_units + 1) * (size_t)p->micro_batches;
    g.act_prod = malloc(sizeof(int) * acts);
    g.act_saved = malloc(sizeof(int) * acts);
    g.dact_prod = malloc(sizeof(int) * (size_t)p->micro_batches);
    int *unit_arrays = malloc(sizeof(int) * (size_t)p->n_units * 5);
    if (!g.act_prod || !g.act_saved || !g.dact_prod || !unit_arrays) {
        g.status = ST_ENOMEM;
    } else {
        for (size_t i = 0; i < acts; i++) g.act_prod[i] = g.act_saved[i] = -1;
        for (int m = 0; m < p->micro_batches; m++) g.dact_prod[m] = -1;
        g.grad_last = unit_arrays;
        g.grad_saved = unit_arrays + p->n_units;
        g.weights_writer = unit_arrays + 2 * p->n_units;
        g.deferred_pending = unit_arrays + 3 * p->n_units;
        g.reduced = unit_arrays + 4 * p->n_units;
        for (int u = 0; u < p->n_units; u++) {
            const int pending = deferred_in && sched_deferred_share(p, u) > 0.0;
            g.grad_last[u] = g.weights_writer[u] = -1;
            g.reduced[u] = 0;
            g.deferred_pending[u] = pending;
            /* the previous list parked these gradients on the SSD: loading
             * them depends on no task of this list */
            g.grad_saved[u] = pending && placement_on_ssd(p->place, PLACE_GRADS, u, p->n_units) ? GRADS_PARKED_EARLIER : -1;
        }
        if (flush_only) {
            for (int u = 0; u < p->n_units; u++) emit_deferred(&g, u);
        } else if (p->kind == SCHED_VERTICAL) {
            build_vertical(&g);
        } else {
            build_horizontal(&g);
        }
    }
    free(g.act_prod);
    free(g.act_saved);
    free(g.dact_prod);
    free(unit_arrays);
    if (g.status != ST_OK) {
        sched_list_free(out);
        return st_fail(err, g.status, "out of memory building a schedule");
    }
    return p->separate_device ? add_device_copies(p, out, err) : ST_OK;
}

st_status sched_build(const sched_params *p, int deferred_in, sched_list *out, st_error *err) {
    return generate(p, deferred_in, 0, out, err);
}

st_status sched_build_flush(const sched_params *p, sched_list *out, st_error *err) {
    return generate(p, 1, 1, out, err);
}

void sched_list_free(sched_list *l) {
    free(l->tasks);
    memset(l, 0, sizeof *l);
}

task_resource task_op_resource(task_op op) {
    switch (op) {
    case TASK_LOAD_WEIGHTS: case TASK_LOAD_ACT: case TASK_LOAD_GRAD: return RES_SSD_READ;
    case TASK_SAVE_ACT: case TASK_SAVE_GRAD: return RES_SSD_WRITE;
    case TASK_OPTIMIZE: case TASK_GRAD_NORM: return RES_OPTIMIZER;
    case TASK_GATHER_WEIGHTS: case TASK_REDUCE_GRADS: return RES_NETWORK;
    default: return RES_COMPUTE;
    }
}

void sched_count(const sched_list *l, sched_counts *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < l->n; i++) {
        switch (l->tasks[i].op) {
        case TASK_LOAD_WEIGHTS: c->weight_loads++; break;
        case TASK_SAVE_ACT: c->act_saves++; break;
        case TASK_LOAD_ACT: c->act_loads++; break;
        case TASK_SAVE_GRAD: c->grad_saves++; break;
        case TASK_LOAD_GRAD: c->grad_loads++; break;
        case TASK_OPTIMIZE: c->optimize_tasks++; break;
        case TASK_EMBED_FORWARD: case TASK_BLOCK_FORWARD: c->forward_tasks++; break;
        case TASK_HEAD: case TASK_BLOCK_BACKWARD: case TASK_EMBED_BACKWARD: c->backward_tasks++; break;
        case TASK_GATHER_WEIGHTS: c->gathers++; break;
        case TASK_REDUCE_GRADS: c->reduces++; break;
        default: break;
        }
    }
}

/* ---- placements ------------------------------------------------------------------------ */

double placement_share(placement p, place_kind k) {
    return k == PLACE_WEIGHTS ? p.weights : k == PLACE_OPTIM ? p.optim : k == PLACE_ACTS ? p.acts : p.grads;
}

void placement_set_share(placement *p, place_kind k, double share) {
    *(k == PLACE_WEIGHTS ? &p->weights : k == PLACE_OPTIM ? &p->optim : k == PLACE_ACTS ? &p->acts : &p->grads) = share;
}

int placement_units(placement p, place_kind k, int n) {
    const double x = placement_share(p, k) * n;
    if (x <= 0) return 0;
    if (x >= n) return n;
    const int units = (int)ceil(x - 0.01);
    return units < 1 ? 1 : units;
}

int placement_on_ssd(placement p, place_kind k, int i, int n) {
    const int units = placement_units(p, k, n);
    return k == PLACE_ACTS ? i <= units : i >= n - units;
}

int placement_memory_units(placement p, place_kind k, int n) { return n - placement_units(p, k, n); }

placement placement_at(int index) {
    return (placement){.weights = index & 1, .optim = index >> 1 & 1, .acts = index >> 2 & 1, .grads = index >> 3 & 1};
}

int placement_any_ssd(placement p) { return p.weights > 0 || p.optim > 0 || p.acts > 0 || p.grads > 0; }

int placement_streams_optimizer(placement p) { return p.optim > 0 || p.weights > 0; }

int placement_within(placement a, placement b) {
    return a.weights <= b.weights && a.optim <= b.optim && a.acts <= b.acts && a.grads <= b.grads;
}

const char *placement_name(placement p, char *buf, size_t n) {
    static const char *names[PLACE_KINDS] = {"weights", "optim", "acts", "grads"};
    size_t len = 0;
    buf[0] = 0;
    for (int k = 0; k < PLACE_KINDS && len < n; k++) {
        const double share = placement_share(p, (place_kind)k);
        if (share >= 1) len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? "," : "", names[k]);
        else if (share > 0) len += (size_t)snprintf(buf + len, n - len, "%s%s=%.6g", len ? "," : "", names[k], share);
    }
    if (!buf[0]) snprintf(buf, n, "none");
    return buf;
}

/* Kind k keeps as many more parts in memory as fit: the fewest on the SSD
 * that fit, in [0, its count now], which fits. */
static placement fill_kind(placement p, place_kind k, int n, placement_fit_fn fits, void *ctx) {
    int lo = 0, hi = placement_units(p, k, n);
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        placement q = p;
        placement_set_share(&q, k, (double)mid / n);
        if (fits(q, ctx)) hi = mid;
        else lo = mid + 1;
    }
    placement_set_share(&p, k, (double)hi / n);
    return p;
}

/* The fills of p in every order of the kinds in left[0..n_left): each kind
 * in turn first, then the orders of the rest; with `first`, also each kind
 * one part short of its most, the rest then filling the room it leaves
 * (the first kind to fill takes all the room, which leaves the splits
 * between two kinds untried: at gpt2-350m with 4.5 GiB the fastest keeps
 * 92% of the optimizer's state and 8% of the weights in memory, which no
 * order of whole fills reaches). */
typedef struct fills {
    const int *parts;   /* [PLACE_KINDS] */
    placement_fit_fn fits;
    void *ctx;
    placement *out;
    int count;
} fills;

static void fill_orders(fills *f, placement p, const place_kind *left, int n_left, int first) {
    if (n_left == 0) {
        for (int i = 0; i < f->count; i++)
            if (!memcmp(&f->out[i], &p, sizeof p)) return;
        f->out[f->count++] = p;
        return;
    }
    for (int i = 0; i < n_left; i++) {
        place_kind rest[PLACE_KINDS];
        int r = 0;
        for (int j = 0; j < n_left; j++)
            if (j != i) rest[r++] = left[j];
        const int n = f->parts[left[i]];
        placement q = fill_kind(p, left[i], n, f->fits, f->ctx);
        fill_orders(f, q, rest, r, 0);
        const int on_ssd = placement_units(q, left[i], n);
        if (!first || r == 0 || on_ssd >= placement_units(p, left[i], n)) continue;
        placement all = q;   /* when the rest fit whole beside it, a part less of it gains nothing */
        for (int j = 0; j < r; j++) placement_set_share(&all, rest[j], 0);
        if (f->fits(all, f->ctx)) continue;
        placement_set_share(&q, left[i], (double)(on_ssd + 1) / n);
        fill_orders(f, q, rest, r, 0);
    }
}

int placement_fills(placement p, const int parts[PLACE_KINDS], placement_fit_fn fits, void *ctx,
                    placement out[PLACEMENT_FILLS]) {
    place_kind kinds[PLACE_KINDS];
    int n_kinds = 0;
    for (int k = 0; k < PLACE_KINDS; k++)
        if (placement_share(p, (place_kind)k) > 0) kinds[n_kinds++] = (place_kind)k;
    fills f = {.parts = parts, .fits = fits, .ctx = ctx, .out = out, .count = 0};
    fill_orders(&f, p, kinds, n_kinds, 1);
    return f.count;
}
