/* offload_optim.c - one optimizer job (offload_internal.h): AdamW on a
 * share of a unit, from and to host memory, or with the state on the SSD
 * streamed through LAYOUT_OPT_SLOTS slots in the layout's opt_io order:
 * phased (groups of segments read, stepped, written back) or interleaved
 * (read ahead, step, write behind). Runs on an optimizer lane's thread: a
 * unit whose state is all in memory on the host lane, touching no slot, so
 * that the slots are the SSD lane's alone. */
#include <stdio.h>
#include <string.h>

#include "schedule/offload_internal.h"

static const store_kind optim_kinds[3] = {STORE_MASTER, STORE_ADAM_M, STORE_ADAM_V};

/* Waits for a slot's reads (writes = 0) or writes (1); the time spent (the
 * job's I/O that its AdamW did not hide) is added to *io_s. */
static st_status slot_wait(opt_stream *os, opt_slot *sl, int writes, double *io_s, st_error *err) {
    int *n = writes ? &sl->n_wr : &sl->n_rd;
    if (*n == 0) return ST_OK;
    st_status s = ST_OK;
    double t0 = st_now();
    for (int i = 0; i < *n; i++) {
        s = first_error(s, store_op_wait(writes ? &sl->wr[i] : &sl->rd[i], s == ST_OK ? err : NULL));
    }
    double t1 = st_now();
    *n = 0;
    exec_env *e = os->env;
    *io_s += t1 - t0;
    if (e->tr) {
        char name[80];
        snprintf(name, sizeof name, "optimizer %s u%d p%d s%zu", writes ? "write" : "read", sl->u, sl->part, sl->seg);
        for (int p = 0; p < e->n_paths; p++) trace_span(e->tr, e->lane_ssd0 + p, name, writes ? sl->wr_t0 : sl->rd_t0, t1);
    }
    return s;
}

/* Starts reading segment j's master weights and moments into a slot. */
static st_status slot_read(opt_stream *os, opt_slot *sl, int u, int part, size_t j, st_error *err) {
    exec_env *e = os->env;
    size_t lo, hi;
    layout_segment_range(e->lay, u, part, j, &lo, &hi);
    sl->u = u, sl->part = part, sl->seg = j, sl->rd_t0 = st_now();
    for (int i = 0; layout_on_ssd(e->lay, PLACE_OPTIM, u) && i < 3; i++) {
        const uint64_t bytes = store_padded_bytes((hi - lo) * 4);
        st_status s = store_read_async(e->st, layout_segment_key(optim_kinds[i], u, part, j), sl->buf[i], bytes,
                                       &sl->rd[sl->n_rd], err);
        if (s != ST_OK) return s;
        sl->n_rd++;
    }
    return ST_OK;
}

/* Starts writing a stepped segment back: state, then new compute weights. */
static st_status slot_write(opt_stream *os, opt_slot *sl, st_error *err) {
    exec_env *e = os->env;
    const int optim_ssd = layout_on_ssd(e->lay, PLACE_OPTIM, sl->u), weights_ssd = layout_on_ssd(e->lay, PLACE_WEIGHTS, sl->u);
    size_t lo, hi;
    layout_segment_range(e->lay, sl->u, sl->part, sl->seg, &lo, &hi);
    sl->wr_t0 = st_now();
    for (int i = 0; i < 4; i++) {
        store_key k;
        const void *buf;
        uint64_t bytes;
        if (i < 3) {
            if (!optim_ssd) continue;
            k = layout_segment_key(optim_kinds[i], sl->u, sl->part, sl->seg), buf = sl->buf[i], bytes = (hi - lo) * 4;
        } else {
            if (!weights_ssd) continue;
            k = layout_segment_key(STORE_WEIGHTS, sl->u, sl->part, sl->seg), buf = sl->wout;
            bytes = (hi - lo) * e->lay->weight_size;
        }
        bytes = store_padded_bytes(bytes);
        st_status s = store_write_async(e->st, k, buf, bytes, &sl->wr[sl->n_wr], err);
        if (s != ST_OK) return s;
        sl->n_wr++;
    }
    return ST_OK;
}

/* AdamW on elements [lo, hi) of unit u, from and to host memory or a slot. */
static void step_elements(opt_stream *os, const opt_job *job, const float *grads, opt_slot *sl, size_t lo, size_t hi) {
    const run_layout *l = os->env->lay;
    host_state *hs = os->hs;
    const int u = job->task.unit;
    const int optim_ssd = layout_on_ssd(l, PLACE_OPTIM, u), weights_ssd = layout_on_ssd(l, PLACE_WEIGHTS, u);
    const size_t at = layout_host_index(l, u, lo), len = hi - lo;   /* in the rank's state arrays */
    const float *g = grads + (lo - l->units[u].lo);
    float *p = optim_ssd ? sl->buf[0] : hs->master + at;
    float *mm = optim_ssd ? sl->buf[1] : hs->m + at;
    float *vv = optim_ssd ? sl->buf[2] : hs->v + at;
    /* the new bf16 compute weights are written in the optimizer's pass */
    st_bf16 *out16 = NULL;
    if (l->weight_size == 2) out16 = weights_ssd ? (st_bf16 *)sl->wout : hs->w16 + at;
    adamw_step_range(os->env->model, u, lo, hi, os->adam, job->lr, job->scale, job->step_t, p, g, mm, vv, out16);
    if (l->weight_size == 4) {   /* fp32: the compute weights are a copy of the master */
        if (weights_ssd) memcpy(sl->wout, p, len * 4);
        else if (hs->w32 != hs->master) memcpy(hs->w32 + at, p, len * 4);
    }
}

/* Interleaved: segment j+1 is read ahead while j is stepped, and j-1 is
 * still being written behind. */
static st_status stream_interleaved(opt_stream *os, const opt_job *job, const float *g, int part, double *io_s,
                                    st_error *err) {
    const run_layout *l = os->env->lay;
    const int u = job->task.unit;
    const size_t nseg = l->units[u].segs[part];
    st_status s = slot_read(os, &os->slot[0], u, part, 0, err);
    for (size_t j = 0; j < nseg && s == ST_OK; j++) {
        opt_slot *cur = &os->slot[j % LAYOUT_OPT_SLOTS];
        if (j + 1 < nseg) {
            opt_slot *next = &os->slot[(j + 1) % LAYOUT_OPT_SLOTS];
            if ((s = slot_wait(os, next, 1, io_s, err)) != ST_OK || (s = slot_read(os, next, u, part, j + 1, err)) != ST_OK)
                break;
        }
        if ((s = slot_wait(os, cur, 0, io_s, err)) != ST_OK) break;
        size_t lo, hi;
        layout_segment_range(l, u, part, j, &lo, &hi);
        step_elements(os, job, g, cur, lo, hi);
        s = slot_write(os, cur, err);
    }
    return s;
}

/* Phased: a group of LAYOUT_OPT_SLOTS segments is read, each stepped as it
 * arrives, then the group is written back and waited for before the next
 * group's reads: the job never has reads and writes queued together. */
static st_status stream_phased(opt_stream *os, const opt_job *job, const float *g, int part, double *io_s,
                               st_error *err) {
    const run_layout *l = os->env->lay;
    const int u = job->task.unit;
    const size_t nseg = l->units[u].segs[part];
    st_status s = ST_OK;
    for (size_t j0 = 0; j0 < nseg && s == ST_OK; j0 += LAYOUT_OPT_SLOTS) {
        const size_t n = nseg - j0 < LAYOUT_OPT_SLOTS ? nseg - j0 : LAYOUT_OPT_SLOTS;
        for (size_t i = 0; i < n && s == ST_OK; i++) s = slot_read(os, &os->slot[i], u, part, j0 + i, err);
        for (size_t i = 0; i < n && s == ST_OK; i++) {
            if ((s = slot_wait(os, &os->slot[i], 0, io_s, err)) != ST_OK) break;
            size_t lo, hi;
            layout_segment_range(l, u, part, j0 + i, &lo, &hi);
            step_elements(os, job, g, &os->slot[i], lo, hi);
        }
        for (size_t i = 0; i < n && s == ST_OK; i++) s = slot_write(os, &os->slot[i], err);
        for (size_t i = 0; i < n && s == ST_OK; i++) s = slot_wait(os, &os->slot[i], 1, io_s, err);
    }
    return s;
}

st_status opt_stream_run(opt_stream *os, const opt_job *job, const float *g, double *io_s, st_error *err) {
    const run_layout *l = os->env->lay;
    const sched_task *k = &job->task;
    const int u = k->unit;
    const size_t a = layout_bound(l, u, k->lo), b = layout_bound(l, u, k->hi);
    if (a >= b) return ST_OK;
    if (!layout_on_ssd(l, PLACE_OPTIM, u) && !layout_on_ssd(l, PLACE_WEIGHTS, u)) {
        step_elements(os, job, g, NULL, a, b);
        return ST_OK;
    }
    const int part = a < l->units[u].split ? 0 : 1;
    const opt_io_order order = l->p.opt_io;
    const int phased = order == OPT_IO_PHASED || (order == OPT_IO_ALTERNATING && job->step_t % 2 == 0);
    st_status s = phased ? stream_phased(os, job, g, part, io_s, err) : stream_interleaved(os, job, g, part, io_s, err);
    /* the job is done when its writes are: the unit's next weight load reads
     * them (after an error too: no op may outlive its slot's buffers) */
    for (int i = 0; i < LAYOUT_OPT_SLOTS; i++) {
        s = first_error(s, slot_wait(os, &os->slot[i], 0, io_s, s == ST_OK ? err : NULL));
        s = first_error(s, slot_wait(os, &os->slot[i], 1, io_s, s == ST_OK ? err : NULL));
    }
    return s;
}
