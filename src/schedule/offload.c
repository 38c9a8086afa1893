/* offload.c - runs iteration task lists (strata/offload.h) against state in
 * host memory or in the SSD store. */
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/checkpoint.h"
#include "strata/fs.h"
#include "strata/layout.h"
#include "strata/offload.h"
#include "strata/store.h"
#include "strata/trace.h"

/* Buffer counts and the segment grain come from the layout (strata/layout.h). */
#define ACT_POOL LAYOUT_ACT_BUFFERS
#define GRAD_POOL LAYOUT_GRAD_BUFFERS
#define OPT_SLOTS LAYOUT_OPT_SLOTS

typedef struct opt_slot {
    float *buf[3];             /* master, m, v of one segment (when on the SSD) */
    unsigned char *wout;       /* its new compute weights (when on the SSD) */
    store_op rd[3], wr[4];
    int n_rd, n_wr;
    double rd_t0, wr_t0;       /* when they were started, for the trace */
    int u, part;
    size_t seg;
} opt_slot;

typedef struct grad_buf {
    float *data;               /* element e of the unit at data[e] */
    int held;                  /* the compute thread still uses it (under lock) */
    int jobs;                  /* queued optimizer jobs that read it (under lock) */
    store_op rd[2], wr[2];     /* a read ahead into it, saves from it */
    int n_rd, n_wr;
    int wr_unit;               /* unit whose save is in flight from it */
} grad_buf;

struct offload_trainer {
    offload_config cfg;
    run_layout lay;                    /* parts, segments, the buffer plan */
    sched_params sp;
    sched_list first, steady, flush;   /* without and with deferred work coming in; flush only */
    sched_analysis an_first, an_steady, an_flush;
    gpt_config c;
    int L1, M, B, T;
    size_t n, NC;                      /* parameters; floats of one activation [B,T,C] */
    size_t wsz;                        /* bytes per compute weight: 2 (bf16) or 4 */
    store *st;                         /* the SSD tier, NULL when everything is in memory */
    /* host state (NULL when that kind lives on the SSD) */
    float *master, *m, *v;             /* optimizer state, unit layout */
    st_bf16 *w16;                      /* compute weights, mixed precision */
    float *w32;                        /* compute weights, fp32 (== master when that is in memory) */
    float *grads;                      /* all gradients, when they stay in memory */
    grad_buf gpool[GRAD_POOL];         /* else these, when they live on the SSD */
    int *grad_of;                      /* [L+1]: the gpool buffer holding the unit's gradients, or -1 */
    /* buffers for the SSD tier */
    unsigned char *wbuf[2];            /* a unit's compute weights read back; the other one prefetches */
    int wbuf_unit[2];                  /* unit whose read is in flight into wbuf[b], or -1 */
    store_op *wop[2];                  /* those reads, one per segment */
    int wop_n[2];
    int wcur;                          /* the buffer compute reads now */
    opt_slot oslot[OPT_SLOTS];         /* the optimizer's streaming buffers */
    float *sbuf;                       /* one segment of f32: initialization and read_params */
    float *act_pool[ACT_POOL];
    int act_free[ACT_POOL], n_act_free;
    store_op act_op[ACT_POOL];         /* a prefetch read into act_pool[i] */
    int act_op_pending[ACT_POOL];
    store_op act_wr[ACT_POOL];         /* a save from act_pool[i], written behind */
    int act_wr_pending[ACT_POOL], act_wr_u[ACT_POOL], act_wr_m[ACT_POOL];
    /* compute */
    float *unit32;                     /* the loaded unit's weights widened to f32 (mixed) */
    float *weights;                    /* the loaded unit's f32 weights */
    float *acts_host;                  /* act[u][m] for u = 1..L+1 when in memory */
    float **act_slot;                  /* [(L+1) * M]: where act[u][m] is now, NULL if only on the SSD */
    float *dact;                       /* [M][B,T,C] */
    float *block_acts, *scratch;
    int32_t *inputs, *targets;         /* [M][B*T] */
    float *mb_loss;                    /* [M] */
    double *unit_sumsq;                /* [L+1] */
    char *grads_fresh;                 /* [L+1]: zeroed in this iteration yet */
    const sched_analysis *an;          /* of the list being run */
    uint64_t allocated;                /* bytes of the plan's buffers allocated so far (creation included) */
    float *eval_buf;                   /* [2][B,T,C] for forward-only evaluation */
    float clip_scale_now;
    /* The optimizer worker: a thread that runs TASK_OPTIMIZE jobs in list
     * order while compute goes on; a unit's weights are loaded only after
     * its pending jobs are done. */
    pthread_t worker;
    int worker_started, worker_stop;
    pthread_mutex_t lock;
    pthread_cond_t job_ready, job_done;
    struct opt_job *jobs;
    int job_cap, job_head, job_count;
    int *unit_pending;                 /* [L+1] jobs queued or running per unit */
    st_status worker_status;
    st_error worker_error;
    /* seeing it: a trace and time accounting (compute thread / worker) */
    trace *tr;
    int lane_compute, lane_optimizer, lane_ssd0;
    offload_stats stats;               /* fields written by one thread each; worker_bytes by the worker */
    uint64_t worker_bytes;
    uint64_t traffic_base[2][STORE_KIND_COUNT];   /* store traffic of the set-up (read, written) */
    uint64_t traffic_aside[2][STORE_KIND_COUNT];   /* and of evaluations and commits: none is training's */
    int deferred_pending;
    float prev_lr, prev_scale;
    long prev_t;
    long step;
};

typedef struct opt_job {
    sched_task task;
    float lr, scale;
    long step_t;
    int grad_buf;              /* gpool index the job reads, or -1 (all gradients in memory) */
} opt_job;

static st_status optimize(offload_trainer *t, const opt_job *job, st_error *err);

/* ---- the optimizer worker --------------------------------------------------------- */

static void *worker_main(void *arg) {
    offload_trainer *t = arg;
    omp_set_num_threads(1);   /* compute keeps the cores' thread team; the optimizer streams */
    pthread_mutex_lock(&t->lock);
    for (;;) {
        while (t->job_count == 0 && !t->worker_stop) pthread_cond_wait(&t->job_ready, &t->lock);
        if (t->job_count == 0) break;
        opt_job job = t->jobs[t->job_head];
        pthread_mutex_unlock(&t->lock);
        st_error err = {0};
        double t0 = st_now();
        st_status s = optimize(t, &job, &err);
        double t1 = st_now();
        if (t->tr) {
            char name[64];
            snprintf(name, sizeof name, "adamw u%d [%.2f, %.2f)%s", job.task.unit, job.task.lo, job.task.hi,
                     job.task.deferred ? " deferred" : "");
            trace_span(t->tr, t->lane_optimizer, name, t0, t1);
        }
        pthread_mutex_lock(&t->lock);
        t->stats.optimizer_s += t1 - t0;
        t->job_head = (t->job_head + 1) % t->job_cap;
        t->job_count--;
        t->unit_pending[job.task.unit]--;
        if (job.grad_buf >= 0) t->gpool[job.grad_buf].jobs--;
        if (s != ST_OK && t->worker_status == ST_OK) {
            t->worker_status = s;
            t->worker_error = err;
        }
        pthread_cond_broadcast(&t->job_done);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

static void enqueue_optimize(offload_trainer *t, const sched_task *k, float lr, float scale, long step_t) {
    const int gb = t->grad_of ? t->grad_of[k->unit] : -1;
    pthread_mutex_lock(&t->lock);
    while (t->job_count == t->job_cap) pthread_cond_wait(&t->job_done, &t->lock);
    t->jobs[(t->job_head + t->job_count) % t->job_cap] = (opt_job){*k, lr, scale, step_t, gb};
    t->job_count++;
    t->unit_pending[k->unit]++;
    if (gb >= 0) t->gpool[gb].jobs++;
    pthread_cond_signal(&t->job_ready);
    pthread_mutex_unlock(&t->lock);
}

/* Waits for the optimizer jobs of unit u (u < 0: all of them); returns the
 * first error a job met. */
static st_status wait_optimizer(offload_trainer *t, int u, st_error *err) {
    double t0 = st_now();
    pthread_mutex_lock(&t->lock);
    while (u >= 0 ? t->unit_pending[u] > 0 : t->job_count > 0) pthread_cond_wait(&t->job_done, &t->lock);
    st_status s = t->worker_status;
    if (s != ST_OK && err) *err = t->worker_error;
    pthread_mutex_unlock(&t->lock);
    double waited = st_now() - t0;
    t->stats.optimizer_wait_s += waited;
    if (t->tr && waited > 1e-4) trace_span(t->tr, t->lane_compute, "wait for optimizer", t0, t0 + waited);
    return s;
}

/* ---- layout of units into parts (strata/layout.h) ---------------------------------- */

static size_t unit_n(const offload_trainer *t, int u) { return t->lay.units[u].n; }
static size_t bound(const offload_trainer *t, int u, double x) { return layout_bound(&t->lay, u, x); }
static void part_range(const offload_trainer *t, int u, int part, size_t *lo, size_t *hi) {
    layout_part_range(&t->lay, u, part, lo, hi);
}
static size_t seg_count(const offload_trainer *t, int u, int part) { return t->lay.units[u].segs[part]; }
static void seg_range(const offload_trainer *t, int u, int part, size_t j, size_t *lo, size_t *hi) {
    layout_segment_range(&t->lay, u, part, j, lo, hi);
}
#define seg_key layout_segment_key
static store_key key(store_kind k, int u, int index) { return (store_key){k, u, index}; }
static const store_kind optim_kinds[3] = {STORE_MASTER, STORE_ADAM_M, STORE_ADAM_V};

/* Traces an SSD transfer on every path's lane (a tensor is striped over all). */
static void trace_ssd(offload_trainer *t, const char *what, store_key k, double t0, double t1) {
    if (!t->tr) return;
    char name[96], kb[48];
    snprintf(name, sizeof name, "%s %s", what, store_key_name(k, kb, sizeof kb));
    for (int p = 0; p < t->cfg.n_store_paths; p++) trace_span(t->tr, t->lane_ssd0 + p, name, t0, t1);
}

/* A blocking store read or write, timed (for the summary) and traced.
 * on_worker: called from the optimizer thread rather than the compute one. */
static st_status store_io(offload_trainer *t, int write, store_key k, void *buf, uint64_t bytes, int on_worker,
                          st_error *err) {
    double t0 = st_now();
    st_status s = write ? store_write(t->st, k, buf, bytes, err) : store_read(t->st, k, buf, bytes, err);
    double t1 = st_now();
    if (on_worker) t->stats.worker_io_s += t1 - t0, t->worker_bytes += bytes;
    else t->stats.compute_io_s += t1 - t0, t->stats.bytes_blocking += bytes;
    trace_ssd(t, write ? "write" : "read", k, t0, t1);
    return s;
}

/* Waits for an asynchronous transfer the compute thread started; the time
 * it still had to wait counts as blocking I/O. */
static st_status compute_wait(offload_trainer *t, store_op *op, const char *what, st_error *err) {
    double t0 = st_now();
    st_status s = store_op_wait(op, err);
    double t1 = st_now();
    t->stats.compute_io_s += t1 - t0;
    if (t->tr && t1 - t0 > 1e-4) trace_span(t->tr, t->lane_compute, what, t0, t1);
    return s;
}

/* ---- activations ----------------------------------------------------------------- */

static float **slot(offload_trainer *t, int u, int m) { return &t->act_slot[(size_t)(u - 1) * t->M + m]; }

static st_status wait_act_write(offload_trainer *t, int i, st_error *err) {
    if (!t->act_wr_pending[i]) return ST_OK;
    t->act_wr_pending[i] = 0;
    return compute_wait(t, &t->act_wr[i], "wait for checkpoint save", err);
}

/* A read of act[u][m] may start once its save is on the SSD. */
static st_status wait_act_saved(offload_trainer *t, int u, int m, st_error *err) {
    for (int i = 0; i < ACT_POOL; i++)
        if (t->act_wr_pending[i] && t->act_wr_u[i] == u && t->act_wr_m[i] == m) return wait_act_write(t, i, err);
    return ST_OK;
}

static int act_index(const offload_trainer *t, const float *buf) {
    for (int i = 0; i < ACT_POOL; i++)
        if (t->act_pool[i] == buf) return i;
    return -1;
}

/* A buffer for a new version of act[u][m]. */
static st_status act_make(offload_trainer *t, int u, int m, float **out, st_error *err) {
    float **s = slot(t, u, m);
    if (!t->cfg.place.acts || *s) {
        *out = *s;
        return ST_OK;
    }
    if (t->n_act_free == 0)
        return st_fail(err, ST_ENOMEM, "activation buffers exhausted at act[%d][%d] (a schedule bug)", u, m);
    int i = t->act_free[--t->n_act_free];
    st_status st = wait_act_write(t, i, err);   /* its previous contents may still be going out */
    if (st != ST_OK) return st;
    *s = *out = t->act_pool[i];
    return ST_OK;
}

/* act[u][m] is on the SSD (or going there) and not needed in memory until
 * loaded again. */
static void act_drop(offload_trainer *t, int u, int m) {
    float **s = slot(t, u, m);
    if (!t->cfg.place.acts || !*s) return;
    int i = act_index(t, *s);
    if (i >= 0) t->act_free[t->n_act_free++] = i;
    *s = NULL;
}

/* Starts writing act[u][m] behind compute. */
static st_status act_save(offload_trainer *t, int u, int m, st_error *err) {
    int i = act_index(t, *slot(t, u, m));
    if (i < 0) return st_fail(err, ST_EINVAL, "act[%d][%d] is not in a checkpoint buffer (a schedule bug)", u, m);
    st_status s = wait_act_saved(t, u, m, err);   /* an older save of it, from another buffer */
    if (s == ST_OK) s = wait_act_write(t, i, err);
    if (s != ST_OK) return s;
    double t0 = st_now();
    const uint64_t bytes = store_padded_bytes(t->NC * 4);
    s = store_write_async(t->st, key(STORE_ACTIVATIONS, u, m), t->act_pool[i], bytes, &t->act_wr[i], err);
    if (s != ST_OK) return s;
    t->act_wr_pending[i] = 1, t->act_wr_u[i] = u, t->act_wr_m[i] = m;
    t->stats.bytes_overlapped += bytes;
    trace_ssd(t, "start write", key(STORE_ACTIVATIONS, u, m), t0, st_now());
    return ST_OK;
}

/* ---- gradients --------------------------------------------------------------------- */

static float *unit_grads(offload_trainer *t, int u) {
    if (t->grads) return t->grads + gpt_unit_offset(&t->c, u);
    return t->grad_of[u] >= 0 ? t->gpool[t->grad_of[u]].data : NULL;
}

/* The gpool buffers a unit may use: its own for the embedding unit, the
 * shared ones for blocks. */
static void grad_class(int u, int *lo, int *hi) {
    *lo = u == 0 ? 0 : 1;
    *hi = u == 0 ? 1 : GRAD_POOL;
}

static st_status wait_grad_writes(offload_trainer *t, int i, st_error *err) {
    st_status s = ST_OK;
    for (int k = 0; k < t->gpool[i].n_wr; k++) {
        st_status r = compute_wait(t, &t->gpool[i].wr[k], "wait for gradient save", s == ST_OK ? err : NULL);
        if (s == ST_OK) s = r;
    }
    t->gpool[i].n_wr = 0;
    return s;
}

/* Waits until no save of unit u's gradients is in flight (a read of them,
 * or a new save, may then start). */
static st_status wait_grads_saved(offload_trainer *t, int u, st_error *err) {
    for (int i = 0; i < GRAD_POOL; i++)
        if (t->gpool[i].n_wr && t->gpool[i].wr_unit == u) return wait_grad_writes(t, i, err);
    return ST_OK;
}

/* Takes a gradient buffer for unit u. blocking: waits for queued optimizer
 * steps to give one back; else (a read ahead) takes one only when another
 * stays free for the compute thread, and sets *got. */
static st_status grad_acquire(offload_trainer *t, int u, int blocking, int *got, st_error *err) {
    int lo, hi, pick = -1;
    grad_class(u, &lo, &hi);
    *got = 0;
    double t0 = st_now();
    pthread_mutex_lock(&t->lock);
    for (;;) {
        int n_free = 0, jobs = 0;
        for (int i = lo; i < hi; i++) {
            if (!t->gpool[i].held && t->gpool[i].jobs == 0) {
                if (pick < 0) pick = i;
                n_free++;
            }
            jobs += t->gpool[i].jobs;
        }
        if (!blocking && (n_free == 0 || (hi - lo > 1 && n_free < 2))) pick = -1;
        if (pick >= 0 || !blocking) break;
        if (jobs == 0) {
            pthread_mutex_unlock(&t->lock);
            return st_fail(err, ST_ENOMEM, "gradient buffers exhausted at unit %d (a schedule bug)", u);
        }
        pthread_cond_wait(&t->job_done, &t->lock);
    }
    if (pick >= 0) t->gpool[pick].held = 1;
    pthread_mutex_unlock(&t->lock);
    t->stats.optimizer_wait_s += st_now() - t0;
    if (pick < 0) return ST_OK;
    st_status s = wait_grad_writes(t, pick, err);   /* its previous contents may still be going out */
    if (s != ST_OK) return s;
    t->grad_of[u] = pick;
    *got = 1;
    return ST_OK;
}

/* The compute thread is done with unit u's buffer; queued optimizer steps
 * may still read it, and it is free once they are done. */
static void grad_release(offload_trainer *t, int u) {
    if (!t->grad_of || t->grad_of[u] < 0) return;
    pthread_mutex_lock(&t->lock);
    t->gpool[t->grad_of[u]].held = 0;
    pthread_cond_broadcast(&t->job_done);
    pthread_mutex_unlock(&t->lock);
    t->grad_of[u] = -1;
}

/* The parts of unit u inside the share [lo, hi). */
static void grad_parts(const offload_trainer *t, const sched_task *k, int *p0, int *p1) {
    const size_t a = bound(t, k->unit, k->lo), b = bound(t, k->unit, k->hi);
    *p0 = a < t->lay.units[k->unit].split ? 0 : 1;
    *p1 = b > t->lay.units[k->unit].split ? 1 : 0;
}

/* Starts reading the share of unit u's gradients a LOAD_GRAD names into the
 * unit's buffer. */
static st_status grad_start_read(offload_trainer *t, const sched_task *k, st_error *err) {
    grad_buf *g = &t->gpool[t->grad_of[k->unit]];
    int p0, p1;
    grad_parts(t, k, &p0, &p1);
    st_status s = wait_grads_saved(t, k->unit, err);
    for (int part = p0; part <= p1 && s == ST_OK; part++) {
        size_t lo, hi;
        part_range(t, k->unit, part, &lo, &hi);
        if (lo == hi) continue;
        s = store_read_async(t->st, key(STORE_GRADS, k->unit, part), g->data + lo, store_padded_bytes((hi - lo) * 4),
                             &g->rd[g->n_rd], err);
        if (s == ST_OK) g->n_rd++;
    }
    return s;
}

static st_status grad_wait_read(offload_trainer *t, int u, st_error *err) {
    grad_buf *g = &t->gpool[t->grad_of[u]];
    st_status s = ST_OK;
    for (int k = 0; k < g->n_rd; k++) {
        st_status r = compute_wait(t, &g->rd[k], "wait for gradients", s == ST_OK ? err : NULL);
        if (s == ST_OK) s = r;
    }
    g->n_rd = 0;
    return s;
}

static uint64_t grad_share_bytes(const offload_trainer *t, const sched_task *k) {
    return layout_grad_share_bytes(&t->lay, k->unit, k->lo, k->hi);
}

/* TASK_LOAD_GRAD: read ahead already, or read now. */
static st_status load_grads(offload_trainer *t, const sched_task *k, st_error *err) {
    st_status s;
    int got;
    if (t->grad_of[k->unit] >= 0 && t->gpool[t->grad_of[k->unit]].n_rd > 0) {
        t->stats.bytes_overlapped += grad_share_bytes(t, k);
    } else {
        if (t->grad_of[k->unit] < 0 && (s = grad_acquire(t, k->unit, 1, &got, err)) != ST_OK) return s;
        if ((s = grad_start_read(t, k, err)) != ST_OK) return s;
        t->stats.bytes_blocking += grad_share_bytes(t, k);
    }
    return grad_wait_read(t, k->unit, err);
}

/* TASK_SAVE_GRAD: writes the share behind compute. */
static st_status save_grads(offload_trainer *t, const sched_task *k, st_error *err) {
    const int u = k->unit;
    if (t->grad_of[u] < 0) return st_fail(err, ST_EINVAL, "save of unit %d's gradients, which are not in memory", u);
    st_status s = wait_grads_saved(t, u, err);
    grad_buf *g = &t->gpool[t->grad_of[u]];
    int p0, p1;
    grad_parts(t, k, &p0, &p1);
    double t0 = st_now();
    for (int part = p0; part <= p1 && s == ST_OK; part++) {
        size_t lo, hi;
        part_range(t, u, part, &lo, &hi);
        if (lo == hi) continue;
        s = store_write_async(t->st, key(STORE_GRADS, u, part), g->data + lo, store_padded_bytes((hi - lo) * 4),
                              &g->wr[g->n_wr], err);
        if (s == ST_OK) g->n_wr++, g->wr_unit = u;
    }
    if (s == ST_OK) {
        t->stats.bytes_overlapped += grad_share_bytes(t, k);
        trace_ssd(t, "start write", key(STORE_GRADS, u, p0), t0, st_now());
    }
    return s;
}

/* ---- creation ---------------------------------------------------------------------- */

/* The state kept in host memory: master weights (k = 0) or a moment (1, 2). */
static float *host_state(const offload_trainer *t, int k) { return k == 0 ? t->master : k == 1 ? t->m : t->v; }

/* Where creation takes the state from: a fresh initialization (the unit's
 * fp32 weights, moments at zero) or a commit (strata/checkpoint.h), which
 * may be this store's own (in_place: its tensors already are the state). */
typedef struct state_source {
    const float *unit;
    ckpt_reader *ckpt;
    int in_place;
} state_source;

/* Elements [lo, hi) of unit u's master weights (k = 0) or moments (1, 2). */
static st_status source_read(const state_source *src, int k, int u, size_t lo, size_t hi, float *out, st_error *err) {
    if (src->ckpt) return ckpt_read_range(src->ckpt, optim_kinds[k], u, lo, hi, out, err);
    if (k == 0) memcpy(out, src->unit + lo, (hi - lo) * sizeof(float));
    else memset(out, 0, (hi - lo) * sizeof(float));
    return ST_OK;
}

/* A persistent tensor of this size: created, or found (a reopened store). */
static st_status ensure_tensor(offload_trainer *t, store_key k, uint64_t bytes, st_error *err) {
    if (!store_has_tensor(t->st, k)) return store_create_tensor(t->st, k, bytes, STORE_TIER_SSD, 0, err);
    store_tensor_info info;
    st_status s = store_tensor_info_of(t->st, k, &info, err);
    if (s == ST_OK && info.bytes != bytes) {
        char name[64];
        s = st_fail(err, ST_EINVAL,
                    "the store's %s holds %llu bytes where this run keeps %llu: the store holds its state in another "
                    "layout (another schedule, alpha, clipping or precision)",
                    store_key_name(k, name, sizeof name), (unsigned long long)info.bytes, (unsigned long long)bytes);
    }
    return s;
}

/* Unit u's starting state, segment by segment: host copies filled, store
 * tensors created (or checked, in place) and written; compute weights are
 * rebuilt from the master weights wherever they live. */
static st_status init_unit(offload_trainer *t, int u, const state_source *src, st_error *err) {
    const size_t off = gpt_unit_offset(&t->c, u);
    st_status s = ST_OK;
    for (int part = 0; part < 2 && s == ST_OK; part++) {
        size_t plo, phi;
        part_range(t, u, part, &plo, &phi);
        if (plo < phi && t->cfg.place.grads)
            s = store_create_tensor(t->st, key(STORE_GRADS, u, part), (phi - plo) * 4, STORE_TIER_SSD, STORE_VOLATILE,
                                    err);
        for (size_t j = 0; j < seg_count(t, u, part) && s == ST_OK; j++) {
            size_t lo, hi;
            seg_range(t, u, part, j, &lo, &hi);
            const size_t len = hi - lo;
            float *state[3];
            for (int k = 0; k < 3; k++)
                state[k] = t->master ? host_state(t, k) + off + lo : t->oslot[0].buf[k];
            /* in place on the SSD only the master weights are read: for the compute weights */
            const int n_read = t->master || !src->in_place ? 3 : 1;
            for (int k = 0; k < n_read && s == ST_OK; k++) s = source_read(src, k, u, lo, hi, state[k], err);
            for (int k = 0; !t->master && k < 3 && s == ST_OK; k++) {
                store_key sk = seg_key(optim_kinds[k], u, part, j);
                s = ensure_tensor(t, sk, len * 4, err);
                if (s == ST_OK && !src->in_place) s = store_io(t, 1, sk, state[k], store_padded_bytes(len * 4), 0, err);
            }
            if (s != ST_OK) break;
            if (t->w16) gpt_f32_to_bf16(state[0], t->w16 + off + lo, len);
            if (t->w32 && t->w32 != t->master) memcpy(t->w32 + off + lo, state[0], len * sizeof(float));
            if (t->cfg.place.weights) {
                store_key sk = seg_key(STORE_WEIGHTS, u, part, j);
                unsigned char *w = t->oslot[0].wout;
                if (t->wsz == 2) gpt_f32_to_bf16(state[0], (st_bf16 *)w, len);
                else memcpy(w, state[0], len * 4);
                if ((s = ensure_tensor(t, sk, len * t->wsz, err)) == ST_OK)
                    s = store_io(t, 1, sk, w, store_padded_bytes(len * t->wsz), 0, err);
            }
        }
    }
    return s;
}

/* Visits every state tensor of this run's layout: kind optim_kinds[k] of
 * elements [lo, hi) of unit u, in layout order. */
typedef st_status (*state_tensor_fn)(offload_trainer *t, store_key key, int u, int k, size_t lo, size_t hi,
                                     st_error *err);
static st_status each_state_tensor(offload_trainer *t, state_tensor_fn fn, st_error *err) {
    for (int u = 0; u < t->L1; u++)
        for (int part = 0; part < 2; part++)
            for (size_t j = 0; j < seg_count(t, u, part); j++) {
                size_t lo, hi;
                seg_range(t, u, part, j, &lo, &hi);
                for (int k = 0; k < 3; k++) {
                    st_status s = fn(t, seg_key(optim_kinds[k], u, part, j), u, k, lo, hi, err);
                    if (s != ST_OK) return s;
                }
            }
    return ST_OK;
}

/* Resuming in place: the store's state tensors must be exactly this run's
 * layout (the reader accepts any; the commits to come write this one). */
static st_status check_in_place(offload_trainer *t, store_key key, int u, int k, size_t lo, size_t hi,
                                st_error *err) {
    (void)u, (void)k;
    store_tensor_info info;
    if (store_has_tensor(t->st, key) && store_tensor_info_of(t->st, key, &info, NULL) == ST_OK &&
        info.bytes == (hi - lo) * 4)
        return ST_OK;
    char name[64];
    return st_fail(err, ST_EINVAL,
                   "the store in %s holds the run's state in another layout (at %s): it was written with another "
                   "schedule, alpha or clipping; resume with the run's settings, or give a new --store to copy the "
                   "state there",
                   t->cfg.store_paths[0], store_key_name(key, name, sizeof name));
}

/* Compute weights the store keeps from an earlier placement that this one
 * holds in memory: removed at the next commit. */
static st_status drop_stale_weights(offload_trainer *t, st_error *err) {
    for (int i = store_tensor_count(t->st) - 1; i >= 0; i--) {
        store_tensor_info info;
        st_status s = store_tensor_info_at(t->st, i, &info, err);
        if (s == ST_OK && info.key.kind == STORE_WEIGHTS) s = store_delete_tensor(t->st, info.key, err);
        if (s != ST_OK) return s;
    }
    return ST_OK;
}

static st_status init_store_activations(offload_trainer *t, st_error *err) {
    st_status s;
    if (t->cfg.place.acts)
        for (int u = 1; u <= t->L1; u++)
            for (int m = 0; m < t->M; m++)
                if ((s = store_create_tensor(t->st, key(STORE_ACTIVATIONS, u, m), t->NC * 4, STORE_TIER_SSD,
                                             STORE_VOLATILE, err)))
                    return s;
    return store_commit(t->st, err);
}

/* Store traffic per kind so far (read, written). */
static void traffic(const offload_trainer *t, uint64_t out[2][STORE_KIND_COUNT]) {
    memset(out, 0, sizeof(uint64_t) * 2 * STORE_KIND_COUNT);
    if (!t->st) return;
    store_counters c;
    store_get_counters(t->st, &c);
    for (int k = 0; k < STORE_KIND_COUNT; k++)
        for (int p = 0; p < STORE_MAX_PATHS; p++) {
            out[0][k] += c.bytes_read[k][p];
            out[1][k] += c.bytes_written[k][p];
        }
}

/* Work that is not training (evaluations, commits): its time and store
 * traffic are kept out of the stats. */
typedef struct aside {
    offload_stats stats;
    uint64_t before[2][STORE_KIND_COUNT];
} aside;

static void aside_begin(offload_trainer *t, aside *a) {
    a->stats = t->stats;
    traffic(t, a->before);
}

static void aside_end(offload_trainer *t, const aside *a) {
    uint64_t after[2][STORE_KIND_COUNT];
    traffic(t, after);
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < STORE_KIND_COUNT; k++) t->traffic_aside[d][k] += after[d][k] - a->before[d][k];
    t->stats = a->stats;
}

/* The layout of an executor configuration. */
layout_params offload_layout_params(const offload_config *cfg) {
    const train_config *tc = &cfg->train;
    return (layout_params){.model = tc->model, .precision = tc->precision, .B = tc->B, .T = tc->T,
                           .micro_batches = tc->micro_batches, .schedule = cfg->schedule, .alpha = cfg->alpha,
                           .clipping = tc->clip > 0, .place = cfg->place, .segment_elems = cfg->segment_elems,
                           .has_store = cfg->n_store_paths > 0, .resuming = cfg->n_resume_paths > 0};
}

st_status offload_layout(const offload_config *cfg, run_layout *out, st_error *err) {
    layout_params p = offload_layout_params(cfg);
    return layout_build(&p, out, err);
}

void offload_memory_need(const offload_config *cfg, layout_memory *out) {
    run_layout l;
    memset(out, 0, sizeof *out);
    if (offload_layout(cfg, &l, NULL) != ST_OK) return;
    *out = l.memory;
    layout_free(&l);
}

static st_status check_budgets(const offload_config *cfg, const layout_memory *m, st_error *err) {
    char need[32], have[32], a[32], b[32], c[32], d[32], e[32];
    if (cfg->mem_device && m->device > cfg->mem_device)
        return st_fail(err, ST_ENOMEM,
                       "the device budget %s is too small: one block's working set at micro-batch %d x %d needs %s "
                       "(weights %s, activations %s); lower --micro-batch or --seq, or raise --mem-device",
                       st_format_bytes((double)cfg->mem_device, have, sizeof have), cfg->train.B, cfg->train.T,
                       st_format_bytes((double)m->device, need, sizeof need),
                       st_format_bytes((double)m->unit_weights, a, sizeof a),
                       st_format_bytes((double)m->activations, b, sizeof b));
    if (cfg->mem_host && m->host > cfg->mem_host)
        return st_fail(err, ST_ENOMEM,
                       "the host budget %s is too small: this placement needs %s (optimizer state %s, compute weights "
                       "%s, checkpoints %s, gradients %s, I/O staging %s); place more state on the SSD (--offload) or "
                       "raise --mem-host",
                       st_format_bytes((double)cfg->mem_host, have, sizeof have),
                       st_format_bytes((double)m->host, need, sizeof need),
                       st_format_bytes((double)m->optimizer_state, a, sizeof a),
                       st_format_bytes((double)m->compute_weights, b, sizeof b),
                       st_format_bytes((double)m->checkpoints, c, sizeof c),
                       st_format_bytes((double)m->gradients, d, sizeof d),
                       st_format_bytes((double)m->staging, e, sizeof e));
    return ST_OK;
}

/* The shape of a run: its layout, sizes and task lists, each list analysed. */
static st_status shape_build(offload_trainer *t, const offload_config *cfg, st_error *err) {
    st_status s;
    t->cfg = *cfg;
    if ((s = offload_layout(cfg, &t->lay, err)) != ST_OK) return s;
    t->c = cfg->train.model;
    t->L1 = t->lay.n_units;
    t->M = cfg->train.micro_batches;
    t->B = cfg->train.B;
    t->T = cfg->train.T;
    t->n = t->lay.n_params;
    t->NC = t->lay.act_elems;
    t->wsz = t->lay.weight_size;
    t->sp = t->lay.sched;
    if ((s = sched_build(&t->sp, 0, &t->first, err)) != ST_OK || (s = sched_build(&t->sp, 1, &t->steady, err)) != ST_OK ||
        (s = sched_build_flush(&t->sp, &t->flush, err)) != ST_OK)
        return s;
    if ((s = sched_analyze(&t->first, t->L1, &t->an_first, err)) != ST_OK ||
        (s = sched_analyze(&t->steady, t->L1, &t->an_steady, err)) != ST_OK)
        return s;
    return sched_analyze(&t->flush, t->L1, &t->an_flush, err);
}

st_status offload_traffic_per_step(const offload_config *cfg, layout_traffic *out, st_error *err) {
    run_layout l;
    memset(out, 0, sizeof *out);
    st_status s = offload_layout(cfg, &l, err);
    if (s == ST_OK) s = layout_traffic_per_step(&l, out, err);
    layout_free(&l);
    return s;
}

/* One buffer of the layout's plan: what the budgets were checked against
 * is what is allocated. */
static void *plan_alloc(offload_trainer *t, layout_buffer_id id) {
    const layout_buffer *b = &t->lay.buf[id];
    if (b->count == 0) return NULL;
    void *p = st_alloc_aligned(b->io ? 4096 : 64, (size_t)b->bytes);
    if (p) t->allocated += b->bytes;
    return p;
}

void offload_trainer_memory(const offload_trainer *t, layout_memory *planned, uint64_t *allocated) {
    if (planned) *planned = t->lay.memory;
    if (allocated) *allocated = t->allocated;
}

st_status offload_trainer_create(offload_trainer **out, const offload_config *cfg_in, const float *init,
                                 st_error *err) {
    *out = NULL;
    offload_config cfg = *cfg_in;
    st_status s = train_config_check(&cfg.train, err);
    if (s != ST_OK) return s;
    /* TODO(executor seam): the executor's buffers are all host memory, so it
     * computes on the CPU backend; it refuses another rather than ignore it. */
    if (cfg.train.backend && cfg.train.backend != compute_backend_cpu())
        return st_fail(err, ST_EINVAL, "the executor runs on the cpu backend only, not on %s", cfg.train.backend->name);
    const int any_ssd = cfg.place.weights || cfg.place.optim || cfg.place.acts || cfg.place.grads;
    if (any_ssd && cfg.n_store_paths < 1)
        return st_fail(err, ST_EINVAL, "state placed on the SSD needs at least one store directory");
    if (cfg.segment_elems % 2048 != 0)
        return st_fail(err, ST_EINVAL, "segment size %zu is not a multiple of 2048 elements", cfg.segment_elems);
    offload_trainer *t = calloc(1, sizeof *t);
    if (!t) return st_fail(err, ST_ENOMEM, "out of memory");
    if ((s = shape_build(t, &cfg, err)) != ST_OK || (s = check_budgets(&cfg, &t->lay.memory, err)) != ST_OK) {
        offload_trainer_free(t);
        return s;
    }
    /* every buffer of the plan, and nothing else of any size */
    const size_t bytes = t->n * sizeof(float);
    int ok = 1;
#define ALLOC(ptr, id) (ok &= ((ptr) = plan_alloc(t, id)) != NULL || t->lay.buf[id].count == 0)
    ALLOC(t->master, BUF_MASTER);
    ALLOC(t->m, BUF_ADAM_M);
    ALLOC(t->v, BUF_ADAM_V);
    for (int i = 0; i < OPT_SLOTS; i++) {
        for (int k = 0; cfg.place.optim && k < 3; k++) ALLOC(t->oslot[i].buf[k], BUF_OPT_STATE_IO);
        ALLOC(t->oslot[i].wout, BUF_OPT_WEIGHTS_IO);
    }
    if (t->wsz == 2) ALLOC(t->w16, BUF_WEIGHTS_HOST);
    else ALLOC(t->w32, BUF_WEIGHTS_HOST);
    if (!cfg.place.weights && t->wsz == 4 && !cfg.place.optim) t->w32 = t->master;
    for (int b = 0; cfg.place.weights && b < 2; b++) {
        ALLOC(t->wbuf[b], BUF_WEIGHTS_IO);
        ok &= (t->wop[b] = calloc((size_t)t->lay.max_segs, sizeof(store_op))) != NULL;
        t->wbuf_unit[b] = -1;
    }
    ALLOC(t->sbuf, BUF_SEGMENT_IO);
    ALLOC(t->unit32, BUF_UNIT_F32);
    t->act_slot = calloc((size_t)t->L1 * (size_t)t->M, sizeof(float *));
    ok &= t->act_slot != NULL;
    for (int i = 0; cfg.place.acts && i < ACT_POOL; i++) {
        ALLOC(t->act_pool[i], BUF_ACT_IO);
        t->act_free[t->n_act_free++] = i;
    }
    ALLOC(t->acts_host, BUF_CHECKPOINTS);
    for (size_t i = 0; ok && t->acts_host && i < (size_t)t->L1 * (size_t)t->M; i++)
        t->act_slot[i] = t->acts_host + i * t->NC;
    if (cfg.place.grads) {
        ok &= (t->grad_of = malloc(sizeof(int) * (size_t)t->L1)) != NULL;
        for (int u = 0; ok && u < t->L1; u++) t->grad_of[u] = -1;
        ALLOC(t->gpool[0].data, BUF_GRAD_IO_EMBED);
        for (int i = 1; i < GRAD_POOL; i++) ALLOC(t->gpool[i].data, BUF_GRAD_IO_BLOCK);
    }
    ALLOC(t->grads, BUF_GRADS);
    ALLOC(t->dact, BUF_DACT);
    ALLOC(t->block_acts, BUF_BLOCK_ACTS);
    ALLOC(t->scratch, BUF_SCRATCH);
    ALLOC(t->eval_buf, BUF_EVAL);
    ALLOC(t->inputs, BUF_TOKENS);
    ALLOC(t->targets, BUF_TOKENS);
    ok &= (t->mb_loss = malloc(sizeof(float) * (size_t)t->M)) != NULL;
    ok &= (t->unit_sumsq = calloc((size_t)t->L1, sizeof(double))) != NULL;
    ok &= (t->grads_fresh = calloc((size_t)t->L1, 1)) != NULL;
    t->job_cap = 4 * t->L1 + 8;
    ok &= (t->jobs = malloc(sizeof(opt_job) * (size_t)t->job_cap)) != NULL;
    ok &= (t->unit_pending = calloc((size_t)t->L1, sizeof(int))) != NULL;
#undef ALLOC
    if (!ok) {
        offload_trainer_free(t);
        return st_fail(err, ST_ENOMEM, "out of memory for the offloaded trainer's buffers");
    }
    /* Starting state, unit by unit (a commit, the caller's weights, or a
     * fresh initialization), so that no full copy of the model is needed. */
    const int resume = cfg.n_resume_paths > 0;
    float *unit_tmp = init || resume ? NULL : plan_alloc(t, BUF_INIT_UNIT);
    if (!init && !resume && !unit_tmp) {
        offload_trainer_free(t);
        return st_fail(err, ST_ENOMEM, "out of memory for initialization");
    }
    if (t->grads) memset(t->grads, 0, bytes);
    state_source src = {0};
    store *from = NULL;   /* the store resumed from, when it is not this one */
    if (cfg.n_store_paths > 0) {
        store_config sc = store_default_config();
        sc.paths = t->cfg.store_paths;
        sc.n_paths = t->cfg.n_store_paths;
        src.in_place = resume && st_same_paths(cfg.store_paths, cfg.n_store_paths, cfg.resume_paths, cfg.n_resume_paths);
        sc.mode = src.in_place ? STORE_OPEN_EXISTING : STORE_CREATE;
        sc.engine = cfg.engine;
        s = store_open(&sc, &t->st, NULL, 0, err);
        if (s == ST_OK && resume && !src.in_place) {
            store_config rc = store_default_config();
            rc.paths = cfg.resume_paths;
            rc.n_paths = cfg.n_resume_paths;
            rc.read_only = 1;
            s = store_open(&rc, &from, NULL, 0, err);
        }
    } else if (resume) {
        s = st_fail(err, ST_EINVAL, "resuming needs the store directories to keep the state in");
    }
    if (s == ST_OK && resume) s = ckpt_reader_open(&src.ckpt, from ? from : t->st, &t->c, err);
    if (s == ST_OK && src.in_place) s = each_state_tensor(t, check_in_place, err);
    if (s == ST_OK && src.in_place && !cfg.place.weights) s = drop_stale_weights(t, err);
    for (int u = 0; s == ST_OK && u < t->L1; u++) {
        if (!resume) {
            src.unit = init ? init + gpt_unit_offset(&t->c, u) : unit_tmp;
            if (!init) gpt_init_unit(&t->c, u, unit_tmp, cfg.train.seed);
        }
        s = init_unit(t, u, &src, err);
    }
    if (s == ST_OK && t->st) s = init_store_activations(t, err);
    ckpt_reader_free(src.ckpt);
    store_close(from);
    st_free_aligned(unit_tmp);
    if (s != ST_OK) {
        offload_trainer_free(t);
        return s;
    }
    t->step = cfg.resume_steps;
    if (cfg.trace_path) {
        if ((s = trace_open(&t->tr, cfg.trace_path, err)) != ST_OK) {
            offload_trainer_free(t);
            return s;
        }
        t->lane_compute = trace_lane(t->tr, "compute");
        t->lane_optimizer = trace_lane(t->tr, "optimizer");
        for (int p = 0; p < cfg.n_store_paths; p++) {
            char name[64];
            snprintf(name, sizeof name, "ssd path %d", p);
            int lane = trace_lane(t->tr, name);
            if (p == 0) t->lane_ssd0 = lane;
        }
    }
    memset(&t->stats, 0, sizeof t->stats);   /* from here on: training */
    t->worker_bytes = 0;
    traffic(t, t->traffic_base);
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->job_ready, NULL);
    pthread_cond_init(&t->job_done, NULL);
    if (pthread_create(&t->worker, NULL, worker_main, t) != 0) {
        pthread_mutex_destroy(&t->lock);
        pthread_cond_destroy(&t->job_ready);
        pthread_cond_destroy(&t->job_done);
        offload_trainer_free(t);
        return st_fail(err, ST_ENOMEM, "cannot start the optimizer thread");
    }
    t->worker_started = 1;
    *out = t;
    return ST_OK;
}

/* Waits for every transfer still in flight from or into a buffer; nothing
 * is freed under I/O. */
static void drain_io(offload_trainer *t) {
    for (int b = 0; b < 2; b++) {
        for (int i = 0; i < t->wop_n[b]; i++) store_op_wait(&t->wop[b][i], NULL);
        t->wop_n[b] = 0;
    }
    for (int i = 0; i < ACT_POOL; i++) {
        if (t->act_op_pending[i]) store_op_wait(&t->act_op[i], NULL);
        if (t->act_wr_pending[i]) store_op_wait(&t->act_wr[i], NULL);
        t->act_op_pending[i] = t->act_wr_pending[i] = 0;
    }
    for (int i = 0; i < GRAD_POOL; i++) {
        for (int k = 0; k < t->gpool[i].n_rd; k++) store_op_wait(&t->gpool[i].rd[k], NULL);
        for (int k = 0; k < t->gpool[i].n_wr; k++) store_op_wait(&t->gpool[i].wr[k], NULL);
        t->gpool[i].n_rd = t->gpool[i].n_wr = 0;
    }
}

void offload_trainer_free(offload_trainer *t) {
    if (!t) return;
    if (t->worker_started) {
        pthread_mutex_lock(&t->lock);
        t->worker_stop = 1;
        pthread_cond_broadcast(&t->job_ready);
        pthread_mutex_unlock(&t->lock);
        pthread_join(t->worker, NULL);   /* it finishes the queued jobs first */
        pthread_mutex_destroy(&t->lock);
        pthread_cond_destroy(&t->job_ready);
        pthread_cond_destroy(&t->job_done);
    }
    drain_io(t);
    free(t->jobs);
    free(t->unit_pending);
    trace_close(t->tr, NULL);
    store_close(t->st);
    sched_list_free(&t->first);
    sched_list_free(&t->steady);
    sched_list_free(&t->flush);
    if (t->w32 != t->master) st_free_aligned(t->w32);
    st_free_aligned(t->master);
    st_free_aligned(t->m);
    st_free_aligned(t->v);
    st_free_aligned(t->w16);
    st_free_aligned(t->grads);
    for (int i = 0; i < GRAD_POOL; i++) st_free_aligned(t->gpool[i].data);
    free(t->grad_of);
    for (int b = 0; b < 2; b++) {
        st_free_aligned(t->wbuf[b]);
        free(t->wop[b]);
    }
    for (int i = 0; i < OPT_SLOTS; i++) {
        for (int k = 0; k < 3; k++) st_free_aligned(t->oslot[i].buf[k]);
        st_free_aligned(t->oslot[i].wout);
    }
    st_free_aligned(t->sbuf);
    for (int i = 0; i < ACT_POOL; i++) st_free_aligned(t->act_pool[i]);
    st_free_aligned(t->unit32);
    st_free_aligned(t->acts_host);
    st_free_aligned(t->dact);
    st_free_aligned(t->block_acts);
    st_free_aligned(t->scratch);
    free(t->act_slot);
    free(t->inputs);
    free(t->targets);
    free(t->mb_loss);
    free(t->unit_sumsq);
    free(t->grads_fresh);
    sched_analysis_free(&t->an_first);
    sched_analysis_free(&t->an_steady);
    sched_analysis_free(&t->an_flush);
    layout_free(&t->lay);
    st_free_aligned(t->eval_buf);
    free(t);
}

st_status offload_trainer_read_unit(offload_trainer *t, int u, float *out, st_error *err) {
    if (u < 0 || u >= t->L1) return st_fail(err, ST_EINVAL, "unit %d out of range [0, %d)", u, t->L1);
    st_status s = wait_optimizer(t, u, err);
    if (s != ST_OK) return s;
    if (t->master) {
        memcpy(out, t->master + gpt_unit_offset(&t->c, u), unit_n(t, u) * sizeof(float));
        return ST_OK;
    }
    for (int part = 0; part < 2; part++)
        for (size_t j = 0; j < seg_count(t, u, part); j++) {
            size_t lo, hi;
            seg_range(t, u, part, j, &lo, &hi);
            s = store_io(t, 0, seg_key(STORE_MASTER, u, part, j), t->sbuf, store_padded_bytes((hi - lo) * 4), 0, err);
            if (s != ST_OK) return s;
            memcpy(out + lo, t->sbuf, (hi - lo) * 4);
        }
    return ST_OK;
}

st_status offload_trainer_read_params(offload_trainer *t, float *out, st_error *err) {
    for (int u = 0; u < t->L1; u++) {
        st_status s = offload_trainer_read_unit(t, u, out + gpt_unit_offset(&t->c, u), err);
        if (s != ST_OK) return s;
    }
    return ST_OK;
}

void offload_trainer_io_bytes(const offload_trainer *t, uint64_t *read, uint64_t *written) {
    *read = *written = 0;
    if (!t->st) return;
    store_counters c;
    store_get_counters(t->st, &c);
    *read = store_counters_read(&c);
    *written = store_counters_written(&c);
}

/* ---- tasks ----------------------------------------------------------------------- */

/* Gradients of unit u are about to receive this iteration's first term. */
static st_status touch_grads(offload_trainer *t, int u, st_error *err) {
    if (t->grads_fresh[u]) return unit_grads(t, u) ? ST_OK : st_fail(err, ST_EINVAL, "unit %d's gradients are not in memory (a schedule bug)", u);
    if (t->grad_of) {
        int got;
        if (t->grad_of[u] >= 0) return st_fail(err, ST_EINVAL, "unit %d's gradient buffer is still taken (a schedule bug)", u);
        st_status s = grad_acquire(t, u, 1, &got, err);
        if (s != ST_OK) return s;
    }
    memset(unit_grads(t, u), 0, unit_n(t, u) * sizeof(float));
    t->grads_fresh[u] = 1;
    return ST_OK;
}

/* After a gradient task: when it was the unit's last, take its sum of squares. */
static void after_grad_task(offload_trainer *t, int u, int task) {
    const compute_backend *be = compute_backend_cpu();   /* TODO(executor seam) */
    if (t->an->last_grad[task]) t->unit_sumsq[u] = be->sum_sq(be, unit_grads(t, u), unit_n(t, u));
}

/* Waits for the reads in flight into weight buffer b. */
static st_status wait_weight_reads(offload_trainer *t, int b, st_error *err) {
    st_status s = ST_OK;
    for (int i = 0; i < t->wop_n[b]; i++) {
        st_status r = compute_wait(t, &t->wop[b][i], "wait for weights", s == ST_OK ? err : NULL);
        if (s == ST_OK) s = r;
    }
    t->wop_n[b] = 0;
    return s;
}

/* Starts reading unit u's compute weights into buffer b, segment by segment. */
static st_status start_weight_reads(offload_trainer *t, int b, int u, st_error *err) {
    double t0 = st_now();
    for (int part = 0; part < 2; part++)
        for (size_t j = 0; j < seg_count(t, u, part); j++) {
            size_t lo, hi;
            seg_range(t, u, part, j, &lo, &hi);
            store_op *op = &t->wop[b][t->wop_n[b]];
            st_status s = store_read_async(t->st, seg_key(STORE_WEIGHTS, u, part, j), t->wbuf[b] + lo * t->wsz,
                                           store_padded_bytes((hi - lo) * t->wsz), op, err);
            if (s != ST_OK) return s;
            t->wop_n[b]++;
        }
    t->wbuf_unit[b] = u;
    trace_ssd(t, "start read", seg_key(STORE_WEIGHTS, u, 0, 0), t0, st_now());
    return ST_OK;
}

static st_status load_weights(offload_trainer *t, int u, st_error *err) {
    const size_t off = gpt_unit_offset(&t->c, u), n = unit_n(t, u);
    const void *src;
    st_status s = wait_optimizer(t, u, err);   /* its newest weights */
    if (s != ST_OK) return s;
    if (t->cfg.place.weights) {
        /* prefetched (or being prefetched) into one buffer? else read it now */
        int b = t->wbuf_unit[0] == u ? 0 : t->wbuf_unit[1] == u ? 1 : -1;
        if (b >= 0) {
            t->stats.bytes_overlapped += layout_segment_bytes(&t->lay, u, 0, unit_n(t, u), t->wsz);
        } else {
            for (int k = 0; k < 2; k++)   /* a prefetch of another unit is abandoned */
                if ((s = wait_weight_reads(t, k, err)) != ST_OK) return s;
            b = 0;
            if ((s = start_weight_reads(t, b, u, err)) != ST_OK) return s;
            t->stats.bytes_blocking += layout_segment_bytes(&t->lay, u, 0, unit_n(t, u), t->wsz);
        }
        if ((s = wait_weight_reads(t, b, err)) != ST_OK) return s;
        t->wbuf_unit[b] = -1;
        t->wcur = b;
        src = t->wbuf[b];
    } else {
        src = t->wsz == 2 ? (const void *)(t->w16 + off) : (const void *)(t->w32 + off);
    }
    if (t->wsz == 2) {
        const compute_backend *be = compute_backend_cpu();   /* TODO(executor seam) */
        be->bf16_to_f32(be, t->unit32, src, n);
        t->weights = t->unit32;
    } else {
        t->weights = (float *)src;
    }
    return ST_OK;
}

/* A read ahead of task j may start: its inputs are final (sched_read_ahead
 * checked), and for weights no optimizer step of the unit is still on the
 * worker (only weights are written by the optimizer). */
static int ready_to_prefetch(offload_trainer *t, const sched_list *l, int j) {
    const sched_task *k = &l->tasks[j];
    if (k->op != TASK_LOAD_WEIGHTS) return 1;
    pthread_mutex_lock(&t->lock);
    int pending = t->unit_pending[k->unit];
    pthread_mutex_unlock(&t->lock);
    return pending == 0;
}

/* After task i: start reading what the next weight load, the next
 * checkpoint load and the next gradient load will need, while compute goes
 * on (one ahead of each kind). */
static st_status prefetch(offload_trainer *t, const sched_list *l, int i, st_error *err) {
    st_status s = ST_OK;
    if (t->cfg.place.weights) {
        const int j = sched_read_ahead(t->an, l, i, SCHED_LOAD_WEIGHTS);
        const int b = 1 - t->wcur;   /* wcur holds the weights compute is using */
        if (j >= 0 && t->wop_n[b] == 0 && ready_to_prefetch(t, l, j))
            s = start_weight_reads(t, b, l->tasks[j].unit, err);
    }
    if (s == ST_OK && t->cfg.place.acts) {
        const int j = sched_read_ahead(t->an, l, i, SCHED_LOAD_ACTS);
        if (j >= 0 && t->n_act_free > 0) {
            const sched_task *k = &l->tasks[j];
            float **sl = slot(t, k->unit, k->mb);
            if (!*sl && (s = wait_act_saved(t, k->unit, k->mb, err)) == ST_OK) {
                int idx = t->act_free[--t->n_act_free];
                if ((s = wait_act_write(t, idx, err)) != ST_OK) {
                    t->act_free[t->n_act_free++] = idx;
                    return s;
                }
                *sl = t->act_pool[idx];
                s = store_read_async(t->st, key(STORE_ACTIVATIONS, k->unit, k->mb), *sl,
                                     store_padded_bytes(t->NC * 4), &t->act_op[idx], err);
                if (s == ST_OK) t->act_op_pending[idx] = 1;
                else t->act_free[t->n_act_free++] = idx, *sl = NULL;
            }
        }
    }
    if (s == ST_OK && t->grad_of) {
        const int j = sched_read_ahead(t->an, l, i, SCHED_LOAD_GRADS);
        if (j >= 0 && t->grad_of[l->tasks[j].unit] < 0 && ready_to_prefetch(t, l, j)) {
            int got;
            s = grad_acquire(t, l->tasks[j].unit, 0, &got, err);
            if (s == ST_OK && got) s = grad_start_read(t, &l->tasks[j], err);
        }
    }
    return s;
}

/* If a prefetch read into buf is in flight, waits for it and sets *ready. */
static st_status wait_act_prefetch(offload_trainer *t, float *buf, int *ready, st_error *err) {
    *ready = 0;
    int i = act_index(t, buf);
    if (i < 0 || !t->act_op_pending[i]) return ST_OK;
    st_status s = compute_wait(t, &t->act_op[i], "wait for checkpoint", err);
    t->stats.bytes_overlapped += store_padded_bytes(t->NC * 4);
    t->act_op_pending[i] = 0;
    *ready = s == ST_OK;
    return s;
}

/* ---- the optimizer: a part of a unit, streamed in segments ----------------------- */


/* Waits for a slot's reads (writes = 0) or writes (1); the time spent is the
 * worker's I/O that its AdamW did not hide. */
static st_status slot_wait(offload_trainer *t, opt_slot *sl, int writes, st_error *err) {
    int *n = writes ? &sl->n_wr : &sl->n_rd;
    if (*n == 0) return ST_OK;
    st_status s = ST_OK;
    double t0 = st_now();
    for (int i = 0; i < *n; i++) {
        st_status r = store_op_wait(writes ? &sl->wr[i] : &sl->rd[i], s == ST_OK ? err : NULL);
        if (s == ST_OK) s = r;
    }
    double t1 = st_now();
    *n = 0;
    t->stats.worker_io_s += t1 - t0;
    if (t->tr) {
        char name[80];
        snprintf(name, sizeof name, "optimizer %s u%d p%d s%zu", writes ? "write" : "read", sl->u, sl->part, sl->seg);
        for (int p = 0; p < t->cfg.n_store_paths; p++)
            trace_span(t->tr, t->lane_ssd0 + p, name, writes ? sl->wr_t0 : sl->rd_t0, t1);
    }
    return s;
}

/* Starts reading segment j's master weights and moments into a slot. */
static st_status slot_read(offload_trainer *t, opt_slot *sl, int u, int part, size_t j, st_error *err) {
    size_t lo, hi;
    seg_range(t, u, part, j, &lo, &hi);
    sl->u = u, sl->part = part, sl->seg = j, sl->rd_t0 = st_now();
    for (int i = 0; t->cfg.place.optim && i < 3; i++) {
        const uint64_t bytes = store_padded_bytes((hi - lo) * 4);
        st_status s = store_read_async(t->st, seg_key(optim_kinds[i], u, part, j), sl->buf[i], bytes, &sl->rd[sl->n_rd], err);
        if (s != ST_OK) return s;
        sl->n_rd++;
        t->worker_bytes += bytes;
    }
    return ST_OK;
}

/* Starts writing a stepped segment back: state, then new compute weights. */
static st_status slot_write(offload_trainer *t, opt_slot *sl, st_error *err) {
    size_t lo, hi;
    seg_range(t, sl->u, sl->part, sl->seg, &lo, &hi);
    sl->wr_t0 = st_now();
    for (int i = 0; i < 4; i++) {
        store_key k;
        const void *buf;
        uint64_t bytes;
        if (i < 3) {
            if (!t->cfg.place.optim) continue;
            k = seg_key(optim_kinds[i], sl->u, sl->part, sl->seg), buf = sl->buf[i], bytes = (hi - lo) * 4;
        } else {
            if (!t->cfg.place.weights) continue;
            k = seg_key(STORE_WEIGHTS, sl->u, sl->part, sl->seg), buf = sl->wout, bytes = (hi - lo) * t->wsz;
        }
        bytes = store_padded_bytes(bytes);
        st_status s = store_write_async(t->st, k, buf, bytes, &sl->wr[sl->n_wr], err);
        if (s != ST_OK) return s;
        sl->n_wr++;
        t->worker_bytes += bytes;
    }
    return ST_OK;
}

/* AdamW on elements [lo, hi) of unit u, from and to host memory or a slot. */
static void step_elements(offload_trainer *t, const opt_job *job, opt_slot *sl, size_t lo, size_t hi) {
    const int u = job->task.unit;
    const size_t off = gpt_unit_offset(&t->c, u), len = hi - lo;
    const float *g = (job->grad_buf >= 0 ? t->gpool[job->grad_buf].data : t->grads + off) + lo;
    float *p = sl && t->cfg.place.optim ? sl->buf[0] : t->master + off + lo;
    float *mm = sl && t->cfg.place.optim ? sl->buf[1] : t->m + off + lo;
    float *vv = sl && t->cfg.place.optim ? sl->buf[2] : t->v + off + lo;
    /* the new bf16 compute weights are written in the optimizer's pass */
    st_bf16 *out16 = NULL;
    if (t->wsz == 2) out16 = t->cfg.place.weights ? (st_bf16 *)sl->wout : t->w16 + off + lo;
    adamw_step_range(&t->c, u, lo, hi, &t->cfg.train.adam, job->lr, job->scale, job->step_t, p, g, mm, vv, out16);
    if (t->wsz == 4) {   /* fp32: the compute weights are a copy of the master */
        if (t->cfg.place.weights) memcpy(sl->wout, p, len * 4);
        else if (t->w32 != t->master) memcpy(t->w32 + off + lo, p, len * 4);
    }
}

/* One TASK_OPTIMIZE job (on the worker). With state on the SSD its part of
 * the unit streams through OPT_SLOTS slots: segment j+1 is read ahead while
 * j is stepped, and j-1 is still being written behind. */
static st_status optimize(offload_trainer *t, const opt_job *job, st_error *err) {
    const sched_task *k = &job->task;
    const int u = k->unit;
    const size_t a = bound(t, u, k->lo), b = bound(t, u, k->hi);
    if (a >= b) return ST_OK;
    if (!t->cfg.place.optim && !t->cfg.place.weights) {
        step_elements(t, job, NULL, a, b);
        return ST_OK;
    }
    const int part = a < t->lay.units[u].split ? 0 : 1;
    const size_t nseg = seg_count(t, u, part);
    st_status s = slot_read(t, &t->oslot[0], u, part, 0, err);
    for (size_t j = 0; j < nseg && s == ST_OK; j++) {
        opt_slot *cur = &t->oslot[j % OPT_SLOTS];
        if (j + 1 < nseg) {
            opt_slot *next = &t->oslot[(j + 1) % OPT_SLOTS];
            if ((s = slot_wait(t, next, 1, err)) != ST_OK || (s = slot_read(t, next, u, part, j + 1, err)) != ST_OK) break;
        }
        if ((s = slot_wait(t, cur, 0, err)) != ST_OK) break;
        size_t lo, hi;
        seg_range(t, u, part, j, &lo, &hi);
        step_elements(t, job, cur, lo, hi);
        s = slot_write(t, cur, err);
    }
    /* the job is done when its writes are: the unit's next weight load reads them */
    for (int i = 0; i < OPT_SLOTS; i++) {
        st_status r = slot_wait(t, &t->oslot[i], 0, s == ST_OK ? err : NULL);
        if (s == ST_OK) s = r;
        r = slot_wait(t, &t->oslot[i], 1, s == ST_OK ? err : NULL);
        if (s == ST_OK) s = r;
    }
    return s;
}

/* The activation a compute task reads, or 0 for none. */
static int consumed_act(const offload_trainer *t, const sched_task *k, int *u) {
    switch (k->op) {
    case TASK_BLOCK_FORWARD: case TASK_BLOCK_BACKWARD: *u = k->unit; return 1;
    case TASK_HEAD: *u = t->L1; return 1;
    default: return 0;
    }
}

static st_status run_list(offload_trainer *t, const sched_list *l, const sched_analysis *an, float lr, long step_t,
                          st_error *err) {
    const compute_backend *be = compute_backend_cpu();   /* TODO(executor seam) */
    const gpt_config *c = &t->c;
    const int BT = t->B * t->T;
    const float grad_scale = 1.0f / (float)t->M;
    t->an = an;
    st_status s = ST_OK;
    for (int i = 0; i < l->n && s == ST_OK; i++) {
        const sched_task *k = &l->tasks[i];
        const int u = k->unit, m = k->mb;
        float *out = NULL;
        const int gu = sched_grad_unit(k);
        if (gu >= 0 && k->op != TASK_SAVE_GRAD && k->op != TASK_LOAD_GRAD && k->op != TASK_OPTIMIZE &&
            (s = touch_grads(t, gu, err)) != ST_OK)
            break;
        const double task_start = st_now();
        const int is_compute = task_op_resource(k->op) == RES_COMPUTE;
        switch (k->op) {
        case TASK_LOAD_WEIGHTS:
            s = load_weights(t, u, err);
            break;
        case TASK_EMBED_FORWARD: {
            if ((s = act_make(t, 1, m, &out, err))) break;
            gpt_embed_w w = gpt_embed_view(c, t->weights);
            gpt_embed_forward(be, c, &w, t->B, t->T, t->inputs + (size_t)m * BT, out);
            break;
        }
        case TASK_BLOCK_FORWARD: {
            if ((s = act_make(t, u + 1, m, &out, err))) break;
            gpt_block_w w = gpt_block_view(c, t->weights);
            gpt_block_acts a = gpt_block_acts_view(c, t->B, t->T, t->block_acts);
            gpt_block_forward(be, c, &w, t->B, t->T, *slot(t, u, m), out, &a);
            break;
        }
        case TASK_HEAD: {
            gpt_embed_w w = gpt_embed_view(c, t->weights), g = gpt_embed_view(c, unit_grads(t, 0));
            t->mb_loss[m] = gpt_head_forward_backward(be, c, &w, &g, t->B, t->T, *slot(t, t->L1, m),
                                                      t->targets + (size_t)m * BT, grad_scale,
                                                      t->dact + (size_t)m * t->NC, NULL, t->scratch);
            after_grad_task(t, 0, i);
            break;
        }
        case TASK_BLOCK_BACKWARD: {
            gpt_block_w w = gpt_block_view(c, t->weights), g = gpt_block_view(c, unit_grads(t, u));
            gpt_block_acts a = gpt_block_acts_view(c, t->B, t->T, t->block_acts);
            const float *x = *slot(t, u, m);
            float *dx = t->dact + (size_t)m * t->NC;
            /* recompute the block's activations from its checkpointed input;
             * the recomputed output goes to scratch, which backward reuses */
            gpt_block_forward(be, c, &w, t->B, t->T, x, t->scratch, &a);
            gpt_block_backward(be, c, &w, &g, t->B, t->T, x, &a, dx, dx, t->scratch);
            after_grad_task(t, u, i);
            break;
        }
        case TASK_EMBED_BACKWARD: {
            gpt_embed_w g = gpt_embed_view(c, unit_grads(t, 0));
            gpt_embed_backward(be, c, &g, t->B, t->T, t->inputs + (size_t)m * BT, t->dact + (size_t)m * t->NC);
            after_grad_task(t, 0, i);
            break;
        }
        case TASK_SAVE_ACT: {
            s = act_save(t, u, m, err);
            /* keep it only when the next compute task reads it (a snake turn) */
            int next = an->next_compute[i], cu;
            if (s == ST_OK && !(next < l->n && consumed_act(t, &l->tasks[next], &cu) && cu == u && l->tasks[next].mb == m))
                act_drop(t, u, m);
            break;
        }
        case TASK_LOAD_ACT: {
            if ((s = act_make(t, u, m, &out, err))) break;
            int ready = 0;
            if ((s = wait_act_prefetch(t, out, &ready, err)) || ready) break;
            if ((s = wait_act_saved(t, u, m, err))) break;
            s = store_io(t, 0, key(STORE_ACTIVATIONS, u, m), out, store_padded_bytes(t->NC * 4), 0, err);
            break;
        }
        case TASK_GRAD_NORM: {
            double sum = 0;
            for (int v = 0; v < t->L1; v++) sum += t->unit_sumsq[v];
            t->clip_scale_now = clip_scale(sqrt(sum), t->cfg.train.clip);
            break;
        }
        case TASK_SAVE_GRAD:
            s = save_grads(t, k, err);
            break;
        case TASK_LOAD_GRAD:
            s = load_grads(t, k, err);
            break;
        case TASK_OPTIMIZE:
            if (t->grad_of && t->grad_of[u] < 0) {
                s = st_fail(err, ST_EINVAL, "step of unit %d, whose gradients are not in memory (a schedule bug)", u);
                break;
            }
            if (k->deferred) enqueue_optimize(t, k, t->prev_lr, t->prev_scale, t->prev_t);
            else enqueue_optimize(t, k, lr, t->clip_scale_now, step_t);
            break;
        default:
            s = st_fail(err, ST_EUNSUPPORTED, "task %s is not supported by this executor", task_op_name(k->op));
        }
        if (is_compute) {
            const double task_end = st_now();
            t->stats.compute_s += task_end - task_start;
            if (t->tr) {
                char name[64];
                snprintf(name, sizeof name, "%s u%d mb%d", task_op_name(k->op), u, m);
                trace_span(t->tr, t->lane_compute, name, task_start, task_end);
            }
        }
        /* an activation read from the SSD is dropped once its reader is
         * done, a gradient buffer once the compute thread is */
        int cu;
        if (s == ST_OK && consumed_act(t, k, &cu)) act_drop(t, cu, m);
        if (s == ST_OK && t->grad_of && an->grad_release[i]) grad_release(t, gu);
        if (s == ST_OK) s = prefetch(t, l, i, err);
    }
    return s;
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
    t->clip_scale_now = 1.0f;   /* without clipping, steps during backward use scale 1 */
    st_status s = t->deferred_pending ? run_list(t, &t->steady, &t->an_steady, lr, t->step + 1, err)
                                      : run_list(t, &t->first, &t->an_first, lr, t->step + 1, err);
    if (s != ST_OK) return s;
    double sum = 0, loss = 0;
    for (int u = 0; u < t->L1; u++) sum += t->unit_sumsq[u];
    for (int mb = 0; mb < t->M; mb++) loss += t->mb_loss[mb];
    t->prev_lr = lr;
    t->prev_scale = t->sp.clipping ? clip_scale(sqrt(sum), t->cfg.train.clip) : 1.0f;
    t->prev_t = t->step + 1;
    t->deferred_pending = sched_deferred_share(&t->sp) > 0.0;
    t->step++;
    t->stats.steps++;
    t->stats.step_s += st_now() - t0;
    if (stats) {
        stats->loss = (float)(loss / t->M);
        stats->grad_norm = (float)sqrt(sum);
        stats->lr = lr;
        stats->seconds = st_now() - t0;
    }
    return ST_OK;
}

st_status offload_trainer_flush(offload_trainer *t, st_error *err) {
    st_status s = t->deferred_pending ? run_list(t, &t->flush, &t->an_flush, 0.0f, 0, err) : ST_OK;
    if (s == ST_OK) s = wait_optimizer(t, -1, err);   /* steps still running on the worker too */
    if (s == ST_OK) t->deferred_pending = 0;
    return s;
}

static st_status eval_forward(offload_trainer *t, const int32_t *tokens, int B, int T, float *loss, st_error *err);

st_status offload_trainer_eval(offload_trainer *t, const int32_t *tokens, int B, int T, float *loss, st_error *err) {
    if (B < 1 || T < 1 || B > t->B || T > t->T)
        return st_fail(err, ST_EINVAL, "evaluation batch %d x %d exceeds the training micro-batch %d x %d", B, T, t->B, t->T);
    st_status s = offload_trainer_flush(t, err);   /* evaluate the weights of the last step */
    if (s != ST_OK) return s;
    aside a;   /* the forward pass below is not training */
    aside_begin(t, &a);
    s = eval_forward(t, tokens, B, T, loss, err);
    aside_end(t, &a);
    return s;
}

static st_status eval_forward(offload_trainer *t, const int32_t *tokens, int B, int T, float *loss, st_error *err) {
    st_status s;
    const compute_backend *be = compute_backend_cpu();   /* TODO(executor seam) */
    const gpt_config *c = &t->c;
    /* rows of T+1 tokens into inputs and targets (the step's buffers are free now) */
    for (int b = 0; b < B; b++) {
        memcpy(t->inputs + (size_t)b * T, tokens + (size_t)b * (T + 1), sizeof(int32_t) * (size_t)T);
        memcpy(t->targets + (size_t)b * T, tokens + (size_t)b * (T + 1) + 1, sizeof(int32_t) * (size_t)T);
    }
    float *x = t->eval_buf, *y = t->eval_buf + t->NC;
    if ((s = load_weights(t, 0, err)) != ST_OK) return s;
    gpt_embed_w ew = gpt_embed_view(c, t->weights);
    gpt_embed_forward(be, c, &ew, B, T, t->inputs, x);
    for (int u = 1; u < t->L1; u++) {
        if ((s = load_weights(t, u, err)) != ST_OK) return s;
        gpt_block_w w = gpt_block_view(c, t->weights);
        gpt_block_acts a = gpt_block_acts_view(c, B, T, t->block_acts);
        gpt_block_forward(be, c, &w, B, T, x, y, &a);
        float *tmp = x;
        x = y;
        y = tmp;
    }
    if ((s = load_weights(t, 0, err)) != ST_OK) return s;
    ew = gpt_embed_view(c, t->weights);
    *loss = gpt_head_forward_backward(be, c, &ew, NULL, B, T, x, t->targets, 0.0f, NULL, NULL, t->scratch);
    return ST_OK;
}

long offload_trainer_steps_done(const offload_trainer *t) { return t->step; }

void offload_trainer_stats(const offload_trainer *t, offload_stats *out) {
    *out = t->stats;
    out->bytes_overlapped += t->worker_bytes;
    uint64_t now[2][STORE_KIND_COUNT];
    traffic(t, now);
    for (int k = 0; k < STORE_KIND_COUNT; k++) {
        out->bytes_read[k] = now[0][k] - t->traffic_base[0][k] - t->traffic_aside[0][k];
        out->bytes_written[k] = now[1][k] - t->traffic_base[1][k] - t->traffic_aside[1][k];
    }
}

st_status offload_trainer_sync(offload_trainer *t, st_error *err) {
    st_status s = wait_optimizer(t, -1, err);
    for (int i = 0; i < ACT_POOL; i++) {
        st_status r = wait_act_write(t, i, s == ST_OK ? err : NULL);
        if (s == ST_OK) s = r;
    }
    for (int i = 0; i < GRAD_POOL; i++) {
        st_status r = wait_grad_writes(t, i, s == ST_OK ? err : NULL);
        if (s == ST_OK) s = r;
    }
    return s;
}

/* Master weights and moments kept in host memory, into the store's state
 * tensors (the layout the SSD placement uses, so that a resume may place
 * them either way): one tensor, through sbuf. */
static st_status write_host_tensor(offload_trainer *t, store_key key, int u, int k, size_t lo, size_t hi,
                                   st_error *err) {
    st_status s = ensure_tensor(t, key, (hi - lo) * 4, err);
    memcpy(t->sbuf, host_state(t, k) + gpt_unit_offset(&t->c, u) + lo, (hi - lo) * 4);
    return s == ST_OK ? store_io(t, 1, key, t->sbuf, store_padded_bytes((hi - lo) * 4), 0, err) : s;
}

st_status offload_trainer_commit(offload_trainer *t, const void *meta, size_t n, st_error *err) {
    if (!t->st) return st_fail(err, ST_EINVAL, "nothing to commit to: this run was given no store directories");
    st_status s = offload_trainer_flush(t, err);   /* the weights of the last completed step */
    if (s == ST_OK) s = offload_trainer_sync(t, err);
    if (s != ST_OK) return s;
    aside a;   /* a commit is not training */
    aside_begin(t, &a);
    if (t->master) s = each_state_tensor(t, write_host_tensor, err);
    if (s == ST_OK) s = store_set_user_meta(t->st, meta, n, err);
    if (s == ST_OK) s = store_commit(t->st, err);
    aside_end(t, &a);
    return s;
}

st_status offload_trainer_close_trace(offload_trainer *t, st_error *err) {
    st_status s = offload_trainer_sync(t, err);
    if (s != ST_OK) return s;
    s = trace_close(t->tr, err);
    t->tr = NULL;
    return s;
}
