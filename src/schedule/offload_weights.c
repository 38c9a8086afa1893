/* offload_weights.c - a unit's compute weights for compute (offload_internal.h):
 * from host memory, or read from the store into one of two buffers while
 * the other is computed with; then on the device. */
#include "schedule/offload_internal.h"

/* Starts reading unit u's compute weights into buffer b, segment by segment. */
static st_status start_reads(weight_loader *wl, int b, int u, st_error *err) {
    const run_layout *l = wl->env->lay;
    double t0 = st_now();
    for (int part = 0; part < 2; part++)
        for (size_t j = 0; j < l->units[u].segs[part]; j++) {
            size_t lo, hi;
            layout_segment_range(l, u, part, j, &lo, &hi);
            st_status s = store_read_async(wl->env->st, layout_segment_key(STORE_WEIGHTS, u, part, j),
                                           wl->buf[b] + lo * l->weight_size,
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

st_status weights_load(weight_loader *wl, int u, const float **out, st_error *err) {
    const run_layout *l = wl->env->lay;
    const size_t off = l->units[u].offset, n = l->units[u].n, wsz = l->weight_size;
    const void *src;
    st_status s;
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
    /* to the device (free on a unified backend, whose device is this memory), widened there */
    const compute_backend *be = wl->env->be;
    if (!be->unified) {
        be->to_device(be, wl->dev, src, n * wsz);
        src = wl->dev;
    }
    if (wsz == 2) {
        be->bf16_to_f32(be, wl->unit32, src, n);
        *out = wl->unit32;
    } else {
        *out = src;
    }
    return ST_OK;
}

st_status weights_read_ahead(weight_loader *wl, int u, st_error *err) {
    const int b = 1 - wl->cur;   /* cur holds the weights compute is using */
    if (wl->n_op[b] != 0) return ST_OK;
    return start_reads(wl, b, u, err);
}

void weights_drain(weight_loader *wl) {
    for (int b = 0; b < 2; b++) env_drain(wl->op[b], &wl->n_op[b]);
}
