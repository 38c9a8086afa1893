/* offload_weights.c - a unit's compute weights for compute (offload_internal.h):
 * from host memory, or read from the store into one of two buffers while
 * the other is computed with; with several ranks, this rank's shard of
 * them staged and gathered with the other ranks' into the whole unit; then
 * on the device. */
#include <string.h>

#include "schedule/offload_internal.h"

/* Starts reading unit u's compute weights (this rank's shard of them) into
 * buffer b, segment by segment, from its start: the reads land 4096-byte
 * aligned, as segments start LAYOUT_SPLIT_ALIGN elements apart from the
 * shard's start, wherever the shard starts in the unit. */
static st_status start_reads(weight_loader *wl, int b, int u, st_error *err) {
    const run_layout *l = wl->env->lay;
    double t0 = st_now();
    for (int part = 0; part < 2; part++)
        for (size_t j = 0; j < l->units[u].segs[part]; j++) {
            size_t lo, hi;
            layout_segment_range(l, u, part, j, &lo, &hi);
            st_status s = store_read_async(wl->env->st, layout_segment_key(STORE_WEIGHTS, u, part, j),
                                           wl->buf[b] + (lo - l->units[u].lo) * l->weight_size,
                                           store_padded_bytes((hi - lo) * l->weight_size), &wl->op[b][wl->n_op[b]], err);
            if (s != ST_OK) return s;
            wl->n_op[b]++;
        }
    wl->unit[b] = u;
    env_trace_ssd(wl->env, "start read", layout_segment_key(STORE_WEIGHTS, u, 0, 0), t0, st_now());
    return ST_OK;
}

static st_status wait_reads(weight_loader *wl, int b, st_error *err) {
    return env_compute_wait_all(wl->env, wl->op[b], &wl->n_op[b], "wait for weights", err);
}

/* Unit u's whole f32 weights for compute from src (the unit, bf16 or f32):
 * copied to a separate device, widened when mixed. */
static const float *to_compute(weight_loader *wl, int u, const void *src) {
    const run_layout *l = wl->env->lay;
    const size_t n = l->units[u].n, wsz = l->weight_size;
    const compute_backend *be = wl->env->be;
    if (!be->unified) {   /* free on a unified backend, whose device is this memory */
        be->to_device(be, wl->dev, src, n * wsz);
        src = wl->dev;
    }
    if (wsz == 2) {
        be->bf16_to_f32(be, wl->unit32, src, n);
        return wl->unit32;
    }
    return src;
}

st_status weights_load(weight_loader *wl, int u, const float **out, st_error *err) {
    const run_layout *l = wl->env->lay;
    st_status s;
    if (l->ranks > 1) {   /* evaluation: both steps at once */
        return (s = weights_stage(wl, u, err)) == ST_OK ? weights_gather(wl, u, out, err) : s;
    }
    const size_t off = l->units[u].offset, wsz = l->weight_size;
    const void *src;
    if (layout_on_ssd(l, PLACE_WEIGHTS, u)) {
        /* read ahead (or being read ahead) into one buffer? else read it now */
        int b = wl->unit[0] == u ? 0 : wl->unit[1] == u ? 1 : -1;
        if (b < 0) {
            for (int k = 0; k < 2; k++)   /* a read ahead of another unit is abandoned */
                if ((s = wait_reads(wl, k, err)) != ST_OK) return s;
            b = 0;
            if ((s = start_reads(wl, b, u, err)) != ST_OK) return s;
        }
        if ((s = wait_reads(wl, b, err)) != ST_OK) return s;
        wl->unit[b] = -1;
        wl->cur = b;
        src = wl->buf[b];
    } else {
        src = wsz == 2 ? (const void *)(wl->hs->w16 + off) : (const void *)(wl->hs->w32 + off);
    }
    *out = to_compute(wl, u, src);
    return ST_OK;
}

/* ---- several ranks -------------------------------------------------------------------- */

static int buffer_free(const weight_loader *wl, int b) {
    return wl->n_op[b] == 0 && wl->unit[b] < 0 && wl->staged[b] < 0 && wl->gather_unit[b] < 0 && b != wl->in_use;
}

static int free_buffer(const weight_loader *wl) { return buffer_free(wl, 0) ? 0 : buffer_free(wl, 1) ? 1 : -1; }

/* The buffer in state[] holding unit u, or -1. */
static int holding(const int state[2], int u) { return state[0] == u ? 0 : state[1] == u ? 1 : -1; }

/* Stages the shard read into buffer b (its reads done): moved from the
 * buffer's start to its place in the unit. */
static void stage_read(weight_loader *wl, int b) {
    const layout_unit *un = &wl->env->lay->units[wl->unit[b]];
    const size_t wsz = wl->env->lay->weight_size;
    memmove(wl->buf[b] + un->lo * wsz, wl->buf[b], (un->hi - un->lo) * wsz);
    wl->staged[b] = wl->unit[b];
    wl->unit[b] = -1;
}

/* Stages the shard memory keeps into buffer b. */
static void stage_copy(weight_loader *wl, int b, int u) {
    const run_layout *l = wl->env->lay;
    const layout_unit *un = &l->units[u];
    const size_t wsz = l->weight_size, at = layout_host_index(l, u, un->lo);
    const void *mine = wsz == 2 ? (const void *)(wl->hs->w16 + at) : (const void *)(wl->hs->w32 + at);
    memcpy(wl->buf[b] + un->lo * wsz, mine, (un->hi - un->lo) * wsz);
    wl->staged[b] = u;
}

st_status weights_stage(weight_loader *wl, int u, st_error *err) {
    const run_layout *l = wl->env->lay;
    wl->in_use = -1;   /* compute is done with the last unit's weights */
    if (holding(wl->gather_unit, u) >= 0 || holding(wl->staged, u) >= 0) return ST_OK;
    st_status s;
    int b;
    if (!layout_on_ssd(l, PLACE_WEIGHTS, u)) {
        if ((b = free_buffer(wl)) < 0) return st_fail(err, ST_EINVAL, "no buffer to gather unit %d into (a bug)", u);
        stage_copy(wl, b, u);
        return ST_OK;
    }
    if ((b = holding(wl->unit, u)) < 0) {   /* not read ahead: read now, abandoning another unit's read */
        for (int k = 0; b < 0 && k < 2; k++)
            if (buffer_free(wl, k) || (wl->unit[k] >= 0 && wl->staged[k] < 0 && wl->gather_unit[k] < 0)) {
                if ((s = wait_reads(wl, k, err)) != ST_OK) return s;
                wl->unit[k] = -1;
                b = k;
            }
        if (b < 0) return st_fail(err, ST_EINVAL, "no buffer to read unit %d into (a bug)", u);
        if ((s = start_reads(wl, b, u, err)) != ST_OK) return s;
    }
    if ((s = wait_reads(wl, b, err)) != ST_OK) return s;
    stage_read(wl, b);
    return ST_OK;
}

/* Starts gathering the unit staged in buffer b. */
static st_status start_gather(weight_loader *wl, int b, st_error *err) {
    exec_env *e = wl->env;
    const int u = wl->staged[b];
    const size_t n = e->lay->units[u].n;
    const double t0 = st_now();
    st_status s = e->lay->weight_size == 2
                      ? comm_iallgather_shards_bf16(e->comm, (st_bf16 *)wl->buf[b], n, &wl->gather[b], err)
                      : comm_iallgather_shards_f32(e->comm, (float *)wl->buf[b], n, &wl->gather[b], err);
    env_comm_done(e, "start gather weights", u, t0);
    if (s != ST_OK) return s;
    wl->staged[b] = -1;
    wl->gather_unit[b] = u;
    return ST_OK;
}

st_status weights_gather(weight_loader *wl, int u, const float **out, st_error *err) {
    st_status s;
    int b = holding(wl->gather_unit, u);
    if (b < 0) {   /* not started ahead: now */
        if ((b = holding(wl->staged, u)) < 0)
            return st_fail(err, ST_EINVAL, "unit %d's weights were not loaded before their gather (a schedule bug)", u);
        if ((s = start_gather(wl, b, err)) != ST_OK) return s;
    }
    const double t0 = st_now();
    s = comm_wait(wl->gather[b], err);
    env_comm_done(wl->env, "gather weights", u, t0);
    wl->gather[b] = NULL;
    wl->gather_unit[b] = -1;
    if (s != ST_OK) return s;
    wl->in_use = wl->cur = b;
    *out = to_compute(wl, u, wl->buf[b]);
    return ST_OK;
}

st_status weights_gather_ahead(weight_loader *wl, int u, int steps_done, st_error *err) {
    if (holding(wl->gather_unit, u) >= 0) return ST_OK;
    int b = holding(wl->staged, u);
    if (b < 0 && layout_on_ssd(wl->env->lay, PLACE_WEIGHTS, u)) {
        const int r = holding(wl->unit, u);   /* read ahead, and every read of it done? */
        for (int i = 0; r >= 0 && i < wl->n_op[r]; i++)
            if (!store_op_done(&wl->op[r][i])) return ST_OK;
        if (r < 0) return ST_OK;
        st_status s = wait_reads(wl, r, err);   /* done: collects their status */
        if (s != ST_OK) return s;
        stage_read(wl, r);
        b = r;
    } else if (b < 0) {
        if (!steps_done || (b = free_buffer(wl)) < 0) return ST_OK;
        stage_copy(wl, b, u);
    }
    return start_gather(wl, b, err);
}

comm_request *weights_gather_pending(const weight_loader *wl) {
    return wl->gather[0] ? wl->gather[0] : wl->gather[1];
}

st_status weights_read_ahead(weight_loader *wl, int u, st_error *err) {
    if (wl->env->lay->ranks > 1) {   /* into a free buffer, unless the unit is on its way already */
        const int b = free_buffer(wl);
        if (b < 0 || holding(wl->unit, u) >= 0 || holding(wl->staged, u) >= 0 || holding(wl->gather_unit, u) >= 0)
            return ST_OK;
        return start_reads(wl, b, u, err);
    }
    const int b = 1 - wl->cur;   /* cur holds the weights compute is using */
    if (wl->n_op[b] != 0) return ST_OK;
    return start_reads(wl, b, u, err);
}

void weights_drain(weight_loader *wl) {
    for (int b = 0; b < 2; b++) {
        env_drain(wl->op[b], &wl->n_op[b]);
        if (wl->gather[b]) comm_wait(wl->gather[b], NULL);
        wl->gather[b] = NULL;
        wl->gather_unit[b] = -1;
    }
}
