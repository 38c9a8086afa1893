/* offload_reduce.c - gradients summed over the ranks (offload_internal.h's
 * grad_reducer): a unit's reduce-scatter is started by its
 * TASK_REDUCE_GRADS and finished by the first reader of its shard, so
 * that the sum travels while compute goes on with the next unit. */
#include "schedule/offload_internal.h"

/* Under the lock: waits for unit u's reduce-scatter, frees its slot and
 * takes the shard's sum of squares. */
static st_status finish_locked(grad_reducer *r, int u, int on_worker, st_error *err) {
    if (!r->req[u]) return ST_OK;
    exec_env *e = r->env;
    const double t0 = st_now();
    st_status s = comm_wait(r->req[u], err);
    if (!on_worker) env_comm_done(e, "reduce-scatter gradients", u, t0);
    r->req[u] = NULL;
    r->slot_unit[r->slot_of[u]] = -1;
    if (s != ST_OK) return s;
    const layout_unit *un = &e->lay->units[u];
    r->sumsq[u] = e->be->sum_sq(e->be, r->grads[u] + un->lo, un->hi - un->lo);
    return ST_OK;
}

st_status reduce_start(grad_reducer *r, int u, float *g, st_error *err) {
    exec_env *e = r->env;
    pthread_mutex_lock(&r->lock);
    st_status s = finish_locked(r, u, 0, err);   /* (none in flight for u: the list reduces a unit once) */
    int slot = -1;
    for (int k = 0; k < LAYOUT_REDUCE_SLOTS; k++)
        if (r->slot_unit[k] < 0) slot = k;
    if (s == ST_OK && slot < 0) {   /* no room: the oldest is finished first */
        slot = 0;
        for (int k = 1; k < LAYOUT_REDUCE_SLOTS; k++)
            if (r->slot_seq[k] < r->slot_seq[slot]) slot = k;
        s = finish_locked(r, r->slot_unit[slot], 0, err);
    }
    if (s == ST_OK) {
        const layout_unit *un = &e->lay->units[u];
        const double t0 = st_now();
        s = comm_ireduce_scatter_f32(e->comm, g, un->n, g + un->lo, r->scratch[slot], &r->req[u], err);
        env_comm_done(e, "start reduce-scatter", u, t0);
    }
    if (s == ST_OK) {
        r->slot_of[u] = slot;
        r->slot_unit[slot] = u;
        r->slot_seq[slot] = r->seq++;
        r->grads[u] = g;
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

st_status reduce_finish_all(grad_reducer *r, st_error *err) {
    st_status s = ST_OK;
    for (int u = 0; u < r->env->lay->n_units; u++) s = first_error(s, reduce_finish(r, u, 0, s == ST_OK ? err : NULL));
    return s;
}
