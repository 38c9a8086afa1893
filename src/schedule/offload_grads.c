/* offload_grads.c - gradient accumulators (offload_internal.h): the units'
 * that memory keeps in memory; for the units on the SSD, four buffers: the
 * embedding unit's, and three shared by the blocks (the one being
 * accumulated, one read ahead, one a queued optimizer step still reads). A
 * gradient that must outlive its buffer is parked in the store. With
 * several ranks compute adds into the four buffers for every unit, the
 * reducer sums each over the ranks into the buffer's first elements
 * (layout_grad_shard_area), and memory keeps the rank's shard of the sums
 * (or the store does: the accumulator of a unit on the SSD is the shard in
 * its buffer, saved and loaded as one rank's whole unit is). */
#include <string.h>

#include "schedule/offload_internal.h"

/* Compute adds unit u's gradients straight into its accumulator in `all`,
 * which stays in memory for the whole iteration (one rank: then the
 * accumulator is the whole unit). */
static int in_memory(const grad_pool *gp, int u) {
    return !gp->sharded && !layout_on_ssd(gp->env->lay, PLACE_GRADS, u);
}

float *grads_accumulator(const grad_pool *gp, int u) { return gp->all + gp->env->lay->units[u].local; }

int grads_sum_in_memory(const grad_pool *gp, int u) {
    return gp->sharded && !layout_on_ssd(gp->env->lay, PLACE_GRADS, u);
}

float *grads_of(const grad_pool *gp, int u) {
    if (in_memory(gp, u)) return grads_accumulator(gp, u);
    return gp->of[u] >= 0 ? gp->buf[gp->of[u]].data + gp->unit_at : NULL;
}

void grads_new_iteration(grad_pool *gp) { memset(gp->fresh, 0, (size_t)gp->n_units); }

/* The buffers a unit may use: the end units' one for the embedding unit
 * and a head of its own (the head is done with it before the embedding's
 * backward starts, in both schedules), the shared ones for blocks. */
static void buffer_class(const grad_pool *gp, int u, int *lo, int *hi) {
    const int block = gpt_unit_is_block(gp->env->model, u);
    *lo = block ? 1 : 0;
    *hi = block ? 1 + gp->env->lay->grad_buffers : 1;
}

static st_status wait_writes(grad_pool *gp, int i, st_error *err) {
    return env_wait_each(gp->env, &gp->wr[i], 1, "wait for gradient save", err);
}

/* Waits until no save of unit u's gradients is in flight (a read of them,
 * or a new save, may then start). */
static st_status wait_saved(grad_pool *gp, int u, st_error *err) {
    for (int i = 0; i < LAYOUT_GRAD_BUFFERS; i++)
        if (gp->wr[i].n && gp->wr[i].unit == u) return wait_writes(gp, i, err);
    return ST_OK;
}

/* How a buffer is taken: waiting for queued optimizer jobs to give one
 * back; only when another stays free for the compute thread (a read
 * ahead); or only when one is free now. */
typedef enum { TAKE_WAIT, TAKE_AHEAD, TAKE_IF_FREE } take_mode;

/* Takes a buffer for unit u (sets *got unless waiting). */
static st_status acquire(grad_pool *gp, int u, take_mode mode, int *got, st_error *err) {
    const int blocking = mode == TAKE_WAIT;
    int lo, hi, pick = -1;
    buffer_class(gp, u, &lo, &hi);
    *got = 0;
    double t0 = st_now();
    pthread_mutex_lock(&gp->lock);
    for (;;) {
        int n_free = 0, jobs = 0;
        for (int i = lo; i < hi; i++) {
            if (!gp->buf[i].held && gp->buf[i].jobs == 0) {
                if (pick < 0) pick = i;
                n_free++;
            }
            jobs += gp->buf[i].jobs;
        }
        if (mode == TAKE_AHEAD && (n_free == 0 || (hi - lo > 1 && n_free < 2))) pick = -1;
        if (pick >= 0 || !blocking) break;
        if (jobs == 0) {
            pthread_mutex_unlock(&gp->lock);
            return st_fail(err, ST_ENOMEM, "gradient buffers exhausted at unit %d (a schedule bug)", u);
        }
        pthread_cond_wait(&gp->freed, &gp->lock);
    }
    if (pick >= 0) gp->buf[pick].held = 1;
    pthread_mutex_unlock(&gp->lock);
    const double waited = st_now() - t0;
    gp->env->optimizer_wait_s += waited;
    /* on the compute lane, as the simulator's trace shows it: otherwise a gap between tasks */
    if (gp->env->tr && waited > 1e-4)
        trace_span(gp->env->tr, gp->env->lane_compute, "wait for a gradient buffer", t0, t0 + waited);
    if (pick < 0) return ST_OK;
    st_status s = wait_writes(gp, pick, err);   /* its previous contents may still be going out */
    if (s != ST_OK) return s;
    gp->of[u] = pick;
    *got = 1;
    return ST_OK;
}

/* Takes a buffer for unit u, waiting if none is free. Several ranks: the
 * sums in flight are finished first, oldest first, for one of theirs. */
static st_status take(grad_pool *gp, int u, st_error *err) {
    int got, done = 1;
    st_status s = ST_OK;
    while (gp->sharded && done && s == ST_OK) {
        if ((s = acquire(gp, u, TAKE_IF_FREE, &got, err)) != ST_OK || got) return s;
        s = reduce_finish_oldest(gp->reducer, &done, err);
    }
    return s == ST_OK ? acquire(gp, u, TAKE_WAIT, &got, err) : s;
}

/* Several ranks, the first term after a load: the unit's terms start from
 * the loaded accumulator [a, b) in the rank's shard of them and zero
 * elsewhere, so that the next sum over the ranks adds them into it. */
static void terms_from_loaded(grad_pool *gp, int u, size_t a, size_t b) {
    const layout_unit *un = &gp->env->lay->units[u];
    const grad_buf *g = &gp->buf[gp->of[u]];
    memset(g->data + gp->unit_at, 0, un->n * sizeof(float));
    memcpy(g->data + gp->unit_at + a, g->data + (a - un->lo), (b - a) * sizeof(float));
}

/* Several ranks: a buffer for unit u's terms, zeroed, unless it has one
 * (its terms so far, or its accumulator loaded from the SSD). */
static st_status touch_sharded(grad_pool *gp, int u, st_error *err) {
    if (gp->of[u] >= 0) {
        if (gp->loaded_hi[u] > 0) terms_from_loaded(gp, u, gp->loaded_lo[u], gp->loaded_hi[u]);
        gp->loaded_hi[u] = 0;
        return ST_OK;
    }
    st_status s = take(gp, u, err);
    if (s == ST_OK) memset(grads_of(gp, u), 0, gp->env->lay->units[u].n * sizeof(float));
    return s;
}

int grads_hand_over(grad_pool *gp, int u) {
    const int b = gp->of[u];
    gp->of[u] = -1;
    return b;
}

void grads_give_back(grad_pool *gp, int b) {
    if (b < 0) return;
    pthread_mutex_lock(&gp->lock);
    gp->buf[b].held = 0;
    pthread_cond_broadcast(&gp->freed);
    pthread_mutex_unlock(&gp->lock);
}

st_status grads_touch(grad_pool *gp, int u, st_error *err) {
    if (gp->sharded) return touch_sharded(gp, u, err);
    if (gp->fresh[u])
        return grads_of(gp, u) ? ST_OK : st_fail(err, ST_EINVAL, "unit %d's gradients are not in memory (a schedule bug)", u);
    if (!in_memory(gp, u)) {
        if (gp->of[u] >= 0) return st_fail(err, ST_EINVAL, "unit %d's gradient buffer is still taken (a schedule bug)", u);
        st_status s = take(gp, u, err);
        if (s != ST_OK) return s;
    }
    memset(grads_of(gp, u), 0, gp->env->lay->units[u].n * sizeof(float));
    gp->fresh[u] = 1;
    return ST_OK;
}

st_status grads_release(grad_pool *gp, int u, st_error *err) {
    /* several ranks, accumulators in memory: the reducer takes the buffer (grads_hand_over) */
    if (in_memory(gp, u) || grads_sum_in_memory(gp, u) || gp->of[u] < 0) return ST_OK;
    /* on the SSD: no sum may still be moving into it */
    st_status s = gp->sharded ? reduce_finish(gp->reducer, u, 0, err) : ST_OK;
    if (gp->sharded) gp->loaded_hi[u] = 0;
    grads_give_back(gp, grads_hand_over(gp, u));
    return s;
}

int grads_ref(grad_pool *gp, int u) {
    if (in_memory(gp, u) || grads_sum_in_memory(gp, u)) return -1;   /* steps read the accumulator in memory */
    const int b = gp->of[u];
    pthread_mutex_lock(&gp->lock);
    gp->buf[b].jobs++;
    pthread_mutex_unlock(&gp->lock);
    return b;
}

void grads_unref(grad_pool *gp, int b) {
    if (b < 0) return;
    pthread_mutex_lock(&gp->lock);
    gp->buf[b].jobs--;
    pthread_cond_broadcast(&gp->freed);
    pthread_mutex_unlock(&gp->lock);
}

const float *grads_for_job(const grad_pool *gp, const opt_job *job) {
    return job->grad_buf >= 0 ? gp->buf[job->grad_buf].data : grads_accumulator(gp, job->task.unit);
}

/* The parts of unit u inside a task's share [lo, hi). */
static void share_parts(const grad_pool *gp, const sched_task *k, int *p0, int *p1) {
    const run_layout *l = gp->env->lay;
    const size_t a = layout_bound(l, k->unit, k->lo), b = layout_bound(l, k->unit, k->hi);
    *p0 = a < l->units[k->unit].split ? 0 : 1;
    *p1 = b > l->units[k->unit].split ? 1 : 0;
}

static store_key grad_key(int u, int part) { return (store_key){STORE_GRADS, u, part}; }

/* Starts reading the share of unit u's gradients a LOAD_GRAD names into the
 * start of the unit's buffer (the rank's shard of them: the whole unit on
 * one rank). */
static st_status start_read(grad_pool *gp, const sched_task *k, st_error *err) {
    const int b = gp->of[k->unit];
    exec_transfers *rd = &gp->rd[b];
    const size_t first = gp->env->lay->units[k->unit].lo;
    int p0, p1;
    share_parts(gp, k, &p0, &p1);
    st_status s = wait_saved(gp, k->unit, err);
    for (int part = p0; part <= p1 && s == ST_OK; part++) {
        size_t lo, hi;
        layout_part_range(gp->env->lay, k->unit, part, &lo, &hi);
        if (lo == hi) continue;
        s = store_read_async(gp->env->st, grad_key(k->unit, part), gp->buf[b].data + (lo - first),
                             store_padded_bytes((hi - lo) * 4), &rd->op[rd->n], err);
        if (s == ST_OK) rd->n++;
    }
    return s;
}

st_status grads_load(grad_pool *gp, const sched_task *k, st_error *err) {
    st_status s;
    if (gp->of[k->unit] < 0 || gp->rd[gp->of[k->unit]].n == 0) {   /* not read ahead: read it now */
        if (gp->of[k->unit] < 0 && (s = take(gp, k->unit, err)) != ST_OK) return s;
        if ((s = start_read(gp, k, err)) != ST_OK) return s;
    }
    s = env_wait_each(gp->env, &gp->rd[gp->of[k->unit]], 1, "wait for gradients", err);
    if (s == ST_OK && gp->sharded) {   /* the terms are made from it if a term comes next (touch_sharded) */
        gp->loaded_lo[k->unit] = layout_bound(gp->env->lay, k->unit, k->lo);
        gp->loaded_hi[k->unit] = layout_bound(gp->env->lay, k->unit, k->hi);
    }
    return s;
}

st_status grads_read_ahead(grad_pool *gp, const sched_task *k, st_error *err) {
    if (gp->of[k->unit] >= 0) return ST_OK;
    int got;
    st_status s = acquire(gp, k->unit, TAKE_AHEAD, &got, err);
    if (s == ST_OK && got) s = start_read(gp, k, err);
    return s;
}

st_status grads_save(grad_pool *gp, const sched_task *k, st_error *err) {
    const int u = k->unit;
    if (gp->of[u] < 0) return st_fail(err, ST_EINVAL, "save of unit %d's gradients, which are not in memory", u);
    /* several ranks: what is saved is the rank's shard of the sum */
    st_status s = gp->sharded ? reduce_finish(gp->reducer, u, 0, err) : ST_OK;
    if (s == ST_OK) s = wait_saved(gp, u, err);
    const int b = gp->of[u];
    exec_transfers *wr = &gp->wr[b];
    int p0, p1;
    share_parts(gp, k, &p0, &p1);
    double t0 = st_now();
    for (int part = p0; part <= p1 && s == ST_OK; part++) {
        size_t lo, hi;
        layout_part_range(gp->env->lay, u, part, &lo, &hi);
        if (lo == hi) continue;
        s = store_write_async(gp->env->st, grad_key(u, part), gp->buf[b].data + (lo - gp->env->lay->units[u].lo),
                              store_padded_bytes((hi - lo) * 4), &wr->op[wr->n], err);
        if (s == ST_OK) wr->n++, wr->unit = u;
    }
    if (s == ST_OK) env_trace_ssd(gp->env, "start write", grad_key(u, p0), t0, st_now());
    return s;
}
