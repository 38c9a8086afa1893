/* offload_reduce.c - gradients summed over the ranks (offload_internal.h's
 * grad_reducer): a unit's reduce-scatter is started by its
 * TASK_REDUCE_GRADS and finished by the first reader of its shard, so
 * that the sum travels while compute goes on with the next unit. Finishing
 * adds the rank's shard of the sum into the unit's accumulator and gives
 * the whole-unit buffer back to the grad_pool (gradients on the SSD: the
 * shard of the buffer is the accumulator, and the unit keeps the buffer). */
#include <string.h>

#include "schedule/offload_internal.h"

/* The iteration's first sum of unit u replaces the accumulator's contents
 * (the last iteration's deferred share, stepped by now); later ones (one a
 * micro-batch, horizontal) are added, in list order. */
static void accumulate(grad_reducer *r, int u, const float *sum) {
    grad_pool *gp = r->gp;
    const layout_unit *un = &r->env->lay->units[u];
    const size_t n = un->hi - un->lo;
    float *acc = grads_accumulator(gp, u);
    if (!gp->fresh[u]) {
        memcpy(acc, sum, n * sizeof(float));
        gp->fresh[u] = 1;
    } else {
        for (size_t i = 0; i < n; i++) acc[i] += sum[i];
    }
    r->sumsq[u] = r->env->be->sum_sq(r->env->be, acc, n);
}

/* Under the lock: waits for unit u's reduce-scatter, adds it into the
 * accumulator and frees its slot and buffer. */
static st_status finish_locked(grad_reducer *r, int u, int on_worker, st_error *err) {
    if (!r->req[u]) return ST_OK;
    exec_env *e = r->env;
    const double t0 = st_now();
    st_status s = comm_wait(r->req[u], err);
    if (!on_worker) env_comm_done(e, "reduce-scatter gradients", u, t0);
    r->req[u] = NULL;
    r->slot_unit[r->slot_of[u]] = -1;
    const int b = r->buf_of[u];
    r->buf_of[u] = -1;
    const layout_unit *un = &e->lay->units[u];
    float *sum = r->gp->buf[b].data;
    if (!grads_sum_in_memory(r->gp, u)) {   /* on the SSD: the shard of the buffer is the accumulator */
        if (s == ST_OK) r->sumsq[u] = e->be->sum_sq(e->be, sum, un->hi - un->lo);
        return s;
    }
    if (s == ST_OK) accumulate(r, u, sum);
    grads_give_back(r->gp, b);
    return s;
}

/* Under the lock: the slot of the oldest reduce-scatter in flight, or -1. */
static int oldest_slot(const grad_reducer *r) {
    int slot = -1;
    for (int k = 0; k < LAYOUT_REDUCE_SLOTS; k++)
        if (r->slot_unit[k] >= 0 && (slot < 0 || r->slot_seq[k] < r->slot_seq[slot])) slot = k;
    return slot;
}

st_status reduce_start(grad_reducer *r, int u, st_error *err) {
    exec_env *e = r->env;
    pthread_mutex_lock(&r->lock);
    /* a unit's earlier sum (the previous micro-batch's) is added first */
    st_status s = finish_locked(r, u, 0, err);
    int slot = -1;
    for (int k = 0; k < LAYOUT_REDUCE_SLOTS; k++)
        if (r->slot_unit[k] < 0) slot = k;
    if (s == ST_OK && slot < 0) {   /* no room: the oldest is finished first */
        slot = oldest_slot(r);
        s = finish_locked(r, r->slot_unit[slot], 0, err);
    }
    const int keep = !grads_sum_in_memory(r->gp, u);   /* on the SSD: the unit keeps its buffer */
    const int b = keep ? r->gp->of[u] : grads_hand_over(r->gp, u);
    if (s == ST_OK && b < 0) s = st_fail(err, ST_EINVAL, "reduction of unit %d, which has no gradient terms (a schedule bug)", u);
    if (s == ST_OK) {
        const layout_unit *un = &e->lay->units[u];
        float *shard = r->gp->buf[b].data, *terms = shard + r->gp->unit_at;
        const double t0 = st_now();
        s = comm_ireduce_scatter_f32(e->comm, terms, un->n, shard, r->scratch[slot], &r->req[u], err);
        env_comm_done(e, "start reduce-scatter", u, t0);
    }
    if (s == ST_OK) {
        r->slot_of[u] = slot;
        r->slot_unit[slot] = u;
        r->slot_seq[slot] = r->seq++;
        r->buf_of[u] = b;
    } else if (!keep) {
        grads_give_back(r->gp, b);
    }
    pthread_mutex_unlock(&r->lock);
    return s;
}

st_status reduce_finish(grad_reducer *r, int u, int on_worker, st_error *err) {
    pthread_mutex_lock(&r->lock);
    st_status s = finish_locked(r, u, on_worker, err);
    pthread_mutex_unlock(&r->lock);
    return s;
}

st_status reduce_finish_oldest(grad_reducer *r, int *done, st_error *err) {
    pthread_mutex_lock(&r->lock);
    const int slot = oldest_slot(r);
    *done = slot >= 0;
    st_status s = slot >= 0 ? finish_locked(r, r->slot_unit[slot], 0, err) : ST_OK;
    pthread_mutex_unlock(&r->lock);
    return s;
}

st_status reduce_finish_all(grad_reducer *r, st_error *err) {
    st_status s = ST_OK;
    for (int u = 0; u < r->env->lay->n_units; u++) s = first_error(s, reduce_finish(r, u, 0, s == ST_OK ? err : NULL));
    return s;
}
