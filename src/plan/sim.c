/* sim.c - the simulator's engine (strata/sim.h): a fluid simulation of the
 * executor running task lists. Between two events every rate is constant
 * (compute, AdamW, each transfer's share of each SSD path and of the link),
 * so the engine jumps from one completion to the next: it lets the compute
 * thread, the prefetcher and the optimizer worker start what they can, sets
 * the rates, advances to the first thing that finishes, and repeats. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/sim_internal.h"

enum { KIND_WEIGHTS = SCHED_LOAD_WEIGHTS, KIND_ACTS = SCHED_LOAD_ACTS, KIND_GRADS = SCHED_LOAD_GRADS,
       N_KINDS = SCHED_LOAD_KINDS };
enum { C_READY, C_RUNNING, C_WAITING, C_DONE };
/* optimizer job phases: the first read (phased: every read, AdamW beside), I/O beside AdamW (phased: the
 * AdamW left), the last write (phased: every write) */
enum { W_IDLE, W_FILL, W_STREAM, W_DRAIN };

#define LINK HW_MAX_SSD         /* index of the link in a transfer's parts */
#define IC (HW_MAX_SSD + 1)     /* index of the interconnect (data-parallel collectives; CPU ranks: shared memory) */
#define NET (HW_MAX_SSD + 2)    /* CPU ranks: the network between nodes */
#define N_PARTS (HW_MAX_SSD + 3)
#define BYTES_EPS 1e-6    /* a transfer part this close to done is done */
#define SECONDS_EPS 1e-15
#define MAX_EVENTS 50000000L

typedef struct xfer {
    double left[N_PARTS];          /* bytes still to move on each SSD path; [LINK]: the host-device link;
                                      [IC]: the interconnect; [NET]: the network */
    double fixed;                  /* CPU ranks: seconds before its bytes move (a collective's latency) */
    int comm;                      /* CPU ranks: a collective */
    int write;                     /* SSD direction */
    int to_device;                 /* link direction */
    int done;
    int after;                     /* starts when this transfer is done (-1: at once) */
    int waiting;                   /* created, not started: waits for `after` */
    int seq, task;                 /* a save: the list and task it completes, or task -1 */
    int grad_unit;                 /* a gradient save: its unit, or -1 */
    double start, bytes, link, ic; /* for the trace */
    const char *what;
    int unit, mb;
} xfer;

typedef struct job {
    int seq, task, unit, deferred;
    int lane;                      /* the optimizer lane that runs it (layout_opt_lane) */
    int after;                     /* the transfer bringing its gradients to the host (GPU backend), or -1 */
    int gbuf;                      /* the gradient buffer it reads (held until it is done), or -1 */
    double lo, hi;
    double fill_read, stream_read, stream_write, drain_write;   /* SSD bytes per phase */
    /* the worker's CPU seconds at full speed: AdamW beside the first read; in the stream, AdamW
       (phased: what is stepped after the reads, and the sums of each phase's first write; interleaved:
       all of it and the writes' sums); beside the last writes, the rest of the writes' sums */
    double fill_adamw_s, adamw_s, drain_adamw_s;
} job;

/* What a task moves: SSD bytes, link bytes (to the device or from it),
 * interconnect bytes. */
typedef struct task_io_bytes {
    double ssd, link, ic;
    int to_device;
} task_io_bytes;

typedef struct list_stats {
    double start, end;
    double compute_s, contention_s, wait_s, wait_on[SIM_RESOURCE_COUNT];
    double compute_busy, optimizer_busy, adamw_busy, link_busy, ic_busy;
    double read_busy[HW_MAX_SSD], write_busy[HW_MAX_SSD], busy[HW_MAX_SSD];
} list_stats;

typedef struct sim {
    const hw_desc *hw;
    sim_config cfg;
    run_layout lay;                /* the executor's layout of this configuration */
    sched_analysis an;             /* of the list being run */
    int L1, n_paths, cpu_shared, gpu;
    int part[N_PARTS], n_part;     /* a transfer's parts on this machine: its SSD paths, LINK, IC, NET */
    int ranks;                     /* CPU ranks (1: one process) */
    double share[HW_MAX_SSD];
    double rd_bw[HW_MAX_SSD], wr_bw[HW_MAX_SSD], mrd_bw[HW_MAX_SSD], mwr_bw[HW_MAX_SSD], link_bw, ic_bw, net_bw;
    double adamw_rate;
    double t;
    long events;
    int oom;
    /* transfers: all made so far, and the ones still moving */
    xfer *x;
    int nx, capx;
    int *active;
    int nactive, capactive;
    int *waiting;                  /* transfers waiting for another to finish */
    int nwaiting, capwaiting;
    /* the optimizer worker: its jobs in list order, each lane running its own in turn */
    job *jobs;
    int njobs, capjobs;
    struct worker_lane {
        int next;                  /* its job running or next to run: an index into jobs (njobs: none yet) */
        int wphase, wx[2];
        double adamw_left, job_start;
    } wl[LAYOUT_LANES];
    int *unit_jobs;                /* [L+1] queued or running */
    int *grad_write;               /* [L+1] transfer of a gradient save still moving, or -1 */
    int *grad_off;                 /* [L+1] GPU: the last transfer taking the unit's gradients off the device, or -1 */
    int *reduce_x;                 /* [L+1] CPU ranks: the unit's last reduce-scatter, or -1 */
    /* One rank (CPU, or a GPU: the buffers are host memory on both): the executor's gradient buffers
       for units whose gradients are on the SSD (offload_grads.c): a unit takes a free one at its first gradient task or its gradient load, the
       compute thread gives it back at grad_release, and each optimizer job of the unit holds it until the
       job is done; so the backward runs at most the layout's grad_buffers blocks ahead of the worker */
    int grad_pool;                 /* 1: modelled */
    int gbuf_held[LAYOUT_GRAD_BUFFERS], gbuf_jobs[LAYOUT_GRAD_BUFFERS], gbuf_wr[LAYOUT_GRAD_BUFFERS];
    int *gbuf_of;                  /* [L+1] the unit's buffer, or -1 */
    int reduce_order[LAYOUT_REDUCE_SLOTS + 1], n_reduce;   /* reduce-scatters started, oldest first, not known done */
    int gather_task, gather_x;     /* CPU ranks: a gather started ahead of its task, or -1 */
    int tail;                      /* CPU ranks, after the list's last task: 0 wait for the reduce-scatters, 1 the sums */
    const hw_desc *hw_node;        /* the whole description (hw is the rank's share of it) */
    /* the compute thread, on list `seq` */
    const sched_list *l;
    int seq, ci, cstate, lphase, wait_x;
    double compute_left;
    char *done;                    /* [n] the task has completed */
    task_io_bytes *tio;            /* [n] what the task moves (the search looks them up at every event) */
    int last_loaded[N_KINDS], pf_task[N_KINDS], pf_x[N_KINDS];
    int arm[N_KINDS];              /* executor's policy: the load chosen for a prefetch, or -1 */
    list_stats cur, first, last;
    /* the simulated timeline, when traced */
    trace *tr;
    int lane_compute, lane_optimizer[LAYOUT_LANES], lane_link, lane_ic, lane_ssd[HW_MAX_SSD];
    double tbase, run_start, wait_start;
} sim;

const char *sim_resource_name(sim_resource r) {
    static const char *names[SIM_RESOURCE_COUNT] = {"compute", "contention", "optimizer", "ssd", "link", "interconnect"};
    return (unsigned)r < SIM_RESOURCE_COUNT ? names[r] : "?";
}

#define load_kind sched_load_kind
#define is_grad_task sched_is_grad_task

static double ssd_bytes(const uint64_t b[STORE_KIND_COUNT]) {
    double s = 0;
    for (int k = 0; k < STORE_KIND_COUNT; k++) s += (double)b[k];
    return s;
}

/* ---- transfers ---------------------------------------------------------------------- */

/* A transfer of `bytes` over the SSD paths (striped), `link` over the
 * host-device link and `ic` over the interconnect, all at once (pipelined),
 * starting now or, when `after` is a transfer still moving, when it ends;
 * -1 when there is nothing to move (or no memory for it: then s->oom is set
 * and the run fails). */
static int xfer_new(sim *s, double bytes, int write, double link, int to_device, double ic, double net, double fixed,
                    int after) {
    if (bytes <= 0 && link <= 0 && ic <= 0 && net <= 0 && fixed <= 0) return -1;
    if (s->nx == s->capx) {
        int cap = s->capx ? 2 * s->capx : 256;
        xfer *nx = realloc(s->x, sizeof *nx * (size_t)cap);
        if (!nx) return s->oom = 1, -1;
        s->x = nx;
        s->capx = cap;
    }
    const int wait = after >= 0 && !s->x[after].done;
    int **list = wait ? &s->waiting : &s->active, *n = wait ? &s->nwaiting : &s->nactive;
    int *capn = wait ? &s->capwaiting : &s->capactive;
    if (*n == *capn) {
        int cap = *capn ? 2 * *capn : 64;
        int *na = realloc(*list, sizeof *na * (size_t)cap);
        if (!na) return s->oom = 1, -1;
        *list = na;
        *capn = cap;
    }
    xfer *x = &s->x[s->nx];
    memset(x, 0, sizeof *x);
    for (int p = 0; p < s->n_paths; p++) x->left[p] = bytes > 0 ? bytes * s->share[p] : 0;
    x->left[LINK] = link > 0 ? link : 0;
    x->left[IC] = ic > 0 ? ic : 0;
    x->left[NET] = net > 0 ? net : 0;
    x->fixed = fixed > 0 ? fixed : 0;
    x->comm = net > 0 || fixed > 0 || (ic > 0 && !s->gpu);
    x->write = write;
    x->to_device = to_device;
    x->task = x->grad_unit = -1;
    x->after = wait ? after : -1;
    x->waiting = wait;
    x->start = s->t;
    x->bytes = bytes;
    x->link = link;
    x->ic = ic;
    x->what = "";
    x->unit = x->mb = -1;
    (*list)[(*n)++] = s->nx;
    return s->nx++;
}

static int xfer_start_after(sim *s, double bytes, int write, double link, int to_device, double ic, int after) {
    return xfer_new(s, bytes, write, link, to_device, ic, 0, 0, after);
}

static int xfer_start(sim *s, double bytes, int write, double link, int to_device) {
    return xfer_start_after(s, bytes, write, link, to_device, 0, -1);
}

/* Starts the waiting transfers whose predecessor is done. */
static void start_waiting(sim *s) {
    int keep = 0;
    for (int w = 0; w < s->nwaiting; w++) {
        const int id = s->waiting[w];
        xfer *x = &s->x[id];
        if (!s->x[x->after].done) {
            s->waiting[keep++] = id;
            continue;
        }
        if (s->nactive == s->capactive) {
            int cap = s->capactive ? 2 * s->capactive : 64;
            int *na = realloc(s->active, sizeof *na * (size_t)cap);
            if (!na) {
                s->oom = 1;
                s->waiting[keep++] = id;
                continue;
            }
            s->active = na;
            s->capactive = cap;
        }
        x->waiting = 0;
        x->start = s->t;
        s->active[s->nactive++] = id;
    }
    s->nwaiting = keep;
}

/* Names a transfer for the trace. */
static void xfer_label(sim *s, int id, const char *what, int unit, int mb) {
    if (id < 0) return;
    s->x[id].what = what;
    s->x[id].unit = unit;
    s->x[id].mb = mb;
}

static void trace_xfer(sim *s, const xfer *x) {
    if (!s->tr) return;
    char name[96];
    const char *dir = x->bytes > 0 ? (x->write ? "write" : "read") : "move";   /* nothing on the SSD: link, interconnect */
    int n = snprintf(name, sizeof name, "%s %s u%d", dir, x->what, x->unit);
    if (x->mb >= 0 && n > 0 && (size_t)n < sizeof name) snprintf(name + n, sizeof name - (size_t)n, " mb%d", x->mb);
    for (int p = 0; p < s->n_paths && x->bytes > 0; p++)
        if (s->share[p] > 0) trace_span(s->tr, s->lane_ssd[p], name, s->tbase + x->start, s->tbase + s->t);
    if (x->link > 0) trace_span(s->tr, s->lane_link, name, s->tbase + x->start, s->tbase + s->t);
    if (x->ic > 0 || x->comm) trace_span(s->tr, s->lane_ic, name, s->tbase + x->start, s->tbase + s->t);
}

static int xfer_done(const sim *s, int id) { return id < 0 || s->x[id].done; }

/* The rate one flow of part p moves at now, bytes/s, in direction dir (SSD
 * paths: 1 a write; the link: 1 to the device) while nr, nw, nl flows share
 * the resources. */
static double part_rate(const sim *s, const int *nr, const int *nw, const int *nl, int dir, int p) {
    if (p == LINK) return s->link_bw / nl[dir];
    if (p == IC) return s->ic_bw / nl[2];
    if (p == NET) return s->net_bw / nl[3];
    if (nr[p] && nw[p]) return dir ? s->mwr_bw[p] / nw[p] : s->mrd_bw[p] / nr[p];
    return dir ? s->wr_bw[p] / nw[p] : s->rd_bw[p] / nr[p];
}

static int xfer_dir(const xfer *x, int p) { return p == LINK ? x->to_device : x->write; }

/* Every flowing part's rate now, [dir][part], looked up per transfer by
 * the event loop (which visits every active transfer's parts several
 * times an event: computed once, the planner's searches run faster). */
typedef struct flow_rates {
    double r[2][N_PARTS];
} flow_rates;

static void flow_rates_now(const sim *s, const int *nr, const int *nw, const int *nl, flow_rates *f) {
    for (int i = 0; i < s->n_part; i++) {
        const int p = s->part[i];
        const int flows[2] = {p == LINK ? nl[0] : p == IC ? nl[2] : p == NET ? nl[3] : nr[p],
                              p == LINK ? nl[1] : p == IC ? nl[2] : p == NET ? nl[3] : nw[p]};
        for (int dir = 0; dir < 2; dir++) f->r[dir][p] = flows[dir] ? part_rate(s, nr, nw, nl, dir, p) : 0;
    }
}

static void count_flows(const sim *s, int *nr, int *nw, int *nl) {
    memset(nr, 0, sizeof(int) * HW_MAX_SSD);
    memset(nw, 0, sizeof(int) * HW_MAX_SSD);
    nl[0] = nl[1] = nl[2] = nl[3] = 0;
    for (int a = 0; a < s->nactive; a++) {
        const xfer *x = &s->x[s->active[a]];
        if (x->fixed > 0) continue;   /* its latency first: no bytes move yet */
        for (int p = 0; p < s->n_paths; p++)
            if (x->left[p] > 0) (x->write ? nw : nr)[p]++;
        if (x->left[LINK] > 0) nl[x->to_device]++;
        if (x->left[IC] > 0) nl[2]++;
        if (x->left[NET] > 0) nl[3]++;
    }
}

/* What a transfer waits on now: the part that will take longest. */
static sim_resource xfer_blame(const sim *s, const int *nr, const int *nw, const int *nl, int id, double *eta) {
    const xfer *x = &s->x[id];
    double worst = 0;
    sim_resource r = SIM_SSD;
    if (x->waiting) {   /* not started: what it waits for */
        double before = 0;
        r = xfer_blame(s, nr, nw, nl, x->after, &before);
        if (eta) *eta = before;
        return r;
    }
    for (int i = 0; i < s->n_part; i++) {
        const int p = s->part[i];
        if (x->left[p] <= 0) continue;
        /* a part not flowing yet (behind its latency) moves at the rate it would have alone */
        int one[4] = {1, 1, 1, 1};
        double t = x->left[p] / part_rate(s, nr, nw, x->fixed > 0 ? one : nl, xfer_dir(x, p), p);
        if (t > worst) worst = t, r = p == LINK ? SIM_LINK : p == IC || p == NET ? SIM_INTERCONNECT : SIM_SSD;
    }
    if (x->comm) {   /* its latency; the network holds up a collective */
        worst += x->fixed;
        r = SIM_INTERCONNECT;
    }
    if (eta) *eta = worst;
    return r;
}

/* ---- the optimizer worker ------------------------------------------------------------- */

typedef struct worker_lane worker_lane;

static int lane_stepping(const worker_lane *w) { return w->wphase != W_IDLE && w->adamw_left > 0; }

/* The lane's job running or next to run, or NULL (its jobs so far all done). */
static const job *lane_job(sim *s, int lane) {
    worker_lane *w = &s->wl[lane];
    while (w->next < s->njobs && s->jobs[w->next].lane != lane) w->next++;
    return w->next < s->njobs ? &s->jobs[w->next] : NULL;
}

/* ---- the gradient buffers (one rank) ----------------------------------------------------- */

static int grads_on_ssd(const sim *s, int u) {
    return s->grad_pool && u >= 0 && u < s->L1 && layout_on_ssd(&s->lay, PLACE_GRADS, u);
}

/* Takes a buffer for unit u as the executor's acquire does (the end units' one, or one of the blocks'; a
 * read ahead only while another stays free), one whose last save has left; 0 when none can be had now. */
static int gbuf_take(sim *s, int u, int ahead) {
    const int block = gpt_unit_is_block(&s->cfg.model, u), lo = block ? 1 : 0, hi = block ? 1 + s->lay.grad_buffers : 1;
    int pick = -1, n_free = 0;
    for (int b = lo; b < hi; b++)
        if (!s->gbuf_held[b] && s->gbuf_jobs[b] == 0 && xfer_done(s, s->gbuf_wr[b])) {
            if (pick < 0) pick = b;
            n_free++;
        }
    if (pick < 0 || (ahead && hi - lo > 1 && n_free < 2)) return 0;
    s->gbuf_held[pick] = 1;
    s->gbuf_of[u] = pick;
    return 1;
}

/* Unit u needs a buffer before its task runs: 1 when it has one (taken now, or before). */
static int gbuf_ready(sim *s, int u) {
    return !grads_on_ssd(s, u) || s->gbuf_of[u] >= 0 || gbuf_take(s, u, 0);
}

/* The compute thread is done with unit u's buffer (grad_release); its jobs may still hold it. */
static void gbuf_release(sim *s, int u) {
    if (!grads_on_ssd(s, u) || s->gbuf_of[u] < 0) return;
    s->gbuf_held[s->gbuf_of[u]] = 0;
    s->gbuf_of[u] = -1;
}

/* What the current job of the lane running unit u's steps waits on now. */
static sim_resource worker_blame(sim *s, const int *nr, const int *nw, const int *nl, int u) {
    const int lane = layout_opt_lane(&s->lay, u);
    const worker_lane *w = &s->wl[lane];
    const job *j = lane_job(s, lane);
    double io = 0, t;
    sim_resource r = SIM_OPTIMIZER;
    if (w->wphase == W_IDLE && j && !xfer_done(s, j->after))
        return xfer_blame(s, nr, nw, nl, j->after, NULL);   /* its gradients, on their way */
    for (int k = 0; k < 2; k++)
        if (w->wx[k] >= 0 && !s->x[w->wx[k]].done) {
            sim_resource xr = xfer_blame(s, nr, nw, nl, w->wx[k], &t);
            if (t > io) io = t, r = xr;
        }
    if (lane_stepping(w) && w->adamw_left >= io) r = SIM_OPTIMIZER;
    return r;
}

/* The segments an optimizer job of unit u streams, elements [a, b): how
 * many, the first's and the last's elements, and the elements of each
 * phase's last segment (the one stepped after the phase's reads). */
typedef struct job_segments {
    size_t segs;
    double first, last, exposed;
} job_segments;

static job_segments segments_loop(const run_layout *l, int u, size_t a, size_t b) {
    job_segments js = {0};
    for (int part = 0; part < 2; part++)
        for (size_t k = 0; k < l->units[u].segs[part]; k++) {
            size_t lo, hi;
            layout_segment_range(l, u, part, k, &lo, &hi);
            if (lo < a || hi > b) continue;
            if (js.first == 0) js.first = (double)(hi - lo);
            js.last = (double)(hi - lo);
            if (js.segs % LAYOUT_OPT_SLOTS == LAYOUT_OPT_SLOTS - 1) js.exposed += js.last;
            js.segs++;
        }
    if (js.segs % LAYOUT_OPT_SLOTS) js.exposed += js.last;
    return js;
}

static job_segments segments_of(const run_layout *l, int u, size_t a, size_t b) {
    job_segments js = {0};
    for (int part = 0; part < 2; part++) {
        const size_t n = l->units[u].segs[part];
        size_t plo, phi;
        layout_part_range(l, u, part, &plo, &phi);
        if (n == 0 || plo < a || phi > b) {
            if (n > 0 && phi > a && plo < b) return segments_loop(l, u, a, b);   /* a part cut: one by one */
            continue;
        }
        /* a whole part: n - 1 whole segments, then the rest; the segments at
         * positions 2, 5, 8, ... of the job (counted over both parts) end a phase */
        size_t lo, hi;
        layout_segment_range(l, u, part, n - 1, &lo, &hi);
        const double seg = (double)l->segment, rest = (double)(hi - lo);
        const size_t g0 = js.segs, g_last = g0 + n - 1;
        if (js.first == 0) js.first = n == 1 ? rest : seg;
        js.last = rest;
        js.exposed += seg * (double)(g_last / LAYOUT_OPT_SLOTS - g0 / LAYOUT_OPT_SLOTS);
        if (g_last % LAYOUT_OPT_SLOTS == LAYOUT_OPT_SLOTS - 1) js.exposed += rest;
        js.segs += n;
    }
    if (js.segs % LAYOUT_OPT_SLOTS) js.exposed += js.last;
    return js;
}

static st_status enqueue_job(sim *s, int task, st_error *err) {
    const sched_task *t = &s->l->tasks[task];
    if (s->njobs == s->capjobs) {
        int cap = s->capjobs ? 2 * s->capjobs : 64;
        job *nj = realloc(s->jobs, sizeof *nj * (size_t)cap);
        if (!nj) return st_fail(err, ST_ENOMEM, "simulator: out of memory");
        s->jobs = nj;
        s->capjobs = cap;
    }
    uint64_t rd[STORE_KIND_COUNT], wr[STORE_KIND_COUNT];
    sim_task_bytes(&s->lay, &s->cfg, t, rd, wr);
    const double len = (double)layout_share_elements(&s->lay, t), read = ssd_bytes(rd), write = ssd_bytes(wr);
    job j = {.seq = s->seq, .task = task, .unit = t->unit, .deferred = t->deferred, .lo = t->lo, .hi = t->hi,
             .lane = layout_opt_lane(&s->lay, t->unit),
             .after = t->unit >= 0 && t->unit < s->L1 ? s->grad_off[t->unit] : -1,
             .gbuf = grads_on_ssd(s, t->unit) ? s->gbuf_of[t->unit] : -1};
    if (j.gbuf >= 0) s->gbuf_jobs[j.gbuf]++;
    /* CPU ranks: the step waits for the unit's reduce-scatter (the worker finishes it) */
    if (s->ranks > 1 && t->unit >= 0 && t->unit < s->L1) j.after = s->reduce_x[t->unit];
    if (len > 0) {
        /* the executor streams the share in the layout's segments. Interleaved:
         * the first is read before AdamW starts, the last written after it
         * ends, and the rest moves beside AdamW. Phased: groups of
         * LAYOUT_OPT_SLOTS segments are read (AdamW stepping each segment as
         * it arrives, so only a group's last segment is stepped after its
         * reads), then written back; modelled as the job's reads, then its
         * writes: the same bytes at the same rates, in two phases rather than
         * one pair per group, which keeps the events per job few */
        const size_t a = layout_bound(&s->lay, t->unit, t->hi > t->lo ? t->lo : 0.0);
        const size_t b = layout_bound(&s->lay, t->unit, t->hi > t->lo ? t->hi : 1.0);
        const job_segments js = segments_of(&s->lay, t->unit, a, b);
        const double first = js.first, last = js.last, exposed = js.exposed;
        const size_t segs = js.segs;
        const double adamw = len / s->adamw_rate;
        /* The store's CPU work: a read's checksums run on the I/O thread as
         * its chunks arrive, beside the transfer and the steps of segments
         * that arrived before (not the worker's time); a write's on the
         * worker before each tensor's write is queued, so after the first
         * of a phase they run beside the writes already queued. (Counting
         * the reads' on the worker over-stated compute's time beside
         * streaming runs by 9% in the 1 x 64 sweep, and the writes' all
         * before the first write left the drive idle 17 ms a block.) */
        const double wcpu = write * s->hw->io_cpu_s_per_gb / 1e9;
        if (s->lay.p.opt_io == OPT_IO_PHASED) {
            int written = 0;   /* tensors written per segment: optimizer state, weights */
            for (int k = 0; k < STORE_KIND_COUNT; k++) written += wr[k] > 0;
            const double exposed_share = segs > 0 ? exposed / len : 1;
            const double exposed_wcpu = written > 0 ? wcpu * exposed_share / written : 0;
            j.fill_read = read, j.drain_write = write;
            j.fill_adamw_s = adamw * (1 - exposed_share);
            j.adamw_s = adamw * exposed_share + exposed_wcpu;
            j.drain_adamw_s = wcpu - exposed_wcpu;
        } else {
            j.fill_read = first > 0 ? read * first / len : read;
            j.stream_read = read - j.fill_read;
            j.drain_write = last > 0 ? write * last / len : write;
            j.stream_write = write - j.drain_write;
            j.adamw_s = adamw + wcpu;
        }
    }
    s->jobs[s->njobs++] = j;
    s->unit_jobs[t->unit]++;
    return ST_OK;
}

/* Moves a lane on as far as it can go now; 1 if anything changed. */
static int step_lane(sim *s, int lane) {
    worker_lane *w = &s->wl[lane];
    const job *j = lane_job(s, lane);
    if (!j) return 0;
    if (w->wphase == W_IDLE) {
        if (!xfer_done(s, j->after)) return 0;   /* its gradients are not on the host yet */
        w->wphase = W_FILL;
        w->job_start = s->t;
        w->wx[0] = xfer_start(s, j->fill_read, 0, 0, 0);
        w->wx[1] = -1;
        w->adamw_left = j->fill_adamw_s;
        xfer_label(s, w->wx[0], "optimizer state", j->unit, -1);
        return 1;
    }
    if (w->wphase == W_FILL) {
        if (!xfer_done(s, w->wx[0]) || w->adamw_left > 0) return 0;
        w->wphase = W_STREAM;
        w->wx[0] = xfer_start(s, j->stream_read, 0, 0, 0);
        w->wx[1] = xfer_start(s, j->stream_write, 1, 0, 0);
        xfer_label(s, w->wx[0], "optimizer state", j->unit, -1);
        xfer_label(s, w->wx[1], "optimizer state", j->unit, -1);
        w->adamw_left = j->adamw_s;
        return 1;
    }
    if (w->wphase == W_STREAM) {
        if (!xfer_done(s, w->wx[0]) || !xfer_done(s, w->wx[1]) || w->adamw_left > 0) return 0;
        w->wphase = W_DRAIN;
        w->wx[0] = xfer_start(s, j->drain_write, 1, 0, 0);
        w->wx[1] = -1;
        xfer_label(s, w->wx[0], "optimizer state", j->unit, -1);
        w->adamw_left = j->drain_adamw_s;
        return 1;
    }
    if (!xfer_done(s, w->wx[0]) || w->adamw_left > 0) return 0;
    if (s->tr) {
        char name[64];
        snprintf(name, sizeof name, "adamw u%d [%.2f, %.2f)%s", j->unit, j->lo, j->hi, j->deferred ? " deferred" : "");
        trace_span(s->tr, s->lane_optimizer[lane], name, s->tbase + w->job_start, s->tbase + s->t);
    }
    s->unit_jobs[j->unit]--;
    if (j->gbuf >= 0) s->gbuf_jobs[j->gbuf]--;
    if (j->seq == s->seq) s->done[j->task] = 1;
    w->next++;
    w->wphase = W_IDLE;
    w->wx[0] = w->wx[1] = -1;
    return 1;
}

static int step_worker(sim *s) {
    int progress = 0;
    for (int lane = 0; lane < LAYOUT_LANES; lane++) progress |= step_lane(s, lane);
    return progress;
}

/* ---- the compute thread ------------------------------------------------------------------ */

/* SSD, link and interconnect bytes of a load or save. */
static void task_io_of(const sim *s, const sched_task *t, task_io_bytes *b) {
    uint64_t rd[STORE_KIND_COUNT], wr[STORE_KIND_COUNT];
    sim_task_bytes(&s->lay, &s->cfg, t, rd, wr);
    b->ssd = ssd_bytes(rd) + ssd_bytes(wr);
    b->link = s->gpu ? (double)sim_task_link_bytes(&s->cfg, t, &b->to_device) : 0;
    b->ic = s->gpu ? sim_task_interconnect_bytes(&s->cfg, t) : 0;
    if (!s->gpu) b->to_device = 1;
}

/* Task t of the current list's bytes, as begin_list worked them out. */
static void task_io(const sim *s, const sched_task *t, double *ssd, double *link, int *to_device, double *ic) {
    const task_io_bytes *b = &s->tio[t - s->l->tasks];
    *ssd = b->ssd, *link = b->link, *to_device = b->to_device, *ic = b->ic;
}

/* CPU backend: the host CPU time the store spends on a load's or save's
 * ssd bytes (compute's cores; a GPU computes beside it). */
static double store_cpu_s(const sim *s, double ssd) {
    return s->cpu_shared ? ssd * s->hw->io_cpu_s_per_gb / 1e9 : 0;
}

static int deps_done(const sim *s, const sched_task *t) {
    for (int d = 0; d < t->n_deps; d++)
        if (!s->done[t->deps[d]]) return 0;
    return 1;
}

/* Sets up list number seq (its per-task state). */
static st_status begin_list(sim *s, const sched_list *l, int seq, st_error *err) {
    s->l = l;
    s->seq = seq;
    s->ci = 0;
    s->cstate = C_READY;
    s->lphase = 0;
    free(s->done);
    free(s->tio);
    s->tio = NULL;
    sched_analysis_free(&s->an);
    st_status st = sched_analyze(l, s->L1, &s->an, err);
    if (st != ST_OK) return st;
    if (!(s->done = calloc((size_t)l->n + 1, 1)) || !(s->tio = malloc(sizeof *s->tio * ((size_t)l->n + 1))))
        return st_fail(err, ST_ENOMEM, "simulator: out of memory");
    for (int i = 0; i < l->n; i++) task_io_of(s, &l->tasks[i], &s->tio[i]);
    for (int k = 0; k < N_KINDS; k++) s->last_loaded[k] = s->pf_task[k] = s->pf_x[k] = s->arm[k] = -1;
    s->gather_task = s->gather_x = -1;
    s->tail = 0;
    memset(&s->cur, 0, sizeof s->cur);
    s->cur.start = s->t;
    return ST_OK;
}

/* The executor's read-ahead policy (sched_read_ahead): right after a weight
 * or checkpoint load, the next load of that kind when its inputs are final
 * then (for weights, with no optimizer job of the unit pending), else it is
 * read when reached; the next gradient load is looked at after every task. */
static void arm_after(sim *s, int i) {
    if (s->cfg.prefetch_eager) return;
    for (int k = KIND_WEIGHTS; k <= KIND_ACTS; k++) {
        const int j = sched_read_ahead(&s->an, s->l, i, k);
        if (j >= 0 && (k != KIND_WEIGHTS || s->unit_jobs[s->l->tasks[j].unit] == 0)) s->arm[k] = j;
    }
    const int g = sched_read_ahead(&s->an, s->l, i, KIND_GRADS);
    if (g >= 0 && s->arm[KIND_GRADS] != g && s->pf_task[KIND_GRADS] != g) s->arm[KIND_GRADS] = g;
}

/* ---- CPU ranks: collectives ---------------------------------------------------------- */

/* Starts rank 0's collective for task t (NULL: a sum of n_doubles doubles). */
static int comm_start(sim *s, const sched_task *t, int n_doubles, const char *what) {
    sim_comm c;
    sim_collective(s->hw_node, &s->cfg, t, n_doubles, &c);
    const int x = xfer_new(s, 0, 0, 0, 1, c.shm, c.net, c.fixed_s, -1);
    xfer_label(s, x, what, t ? t->unit : -1, -1);
    return x;
}

/* The executor's comm_ahead after task i: when the list's next collective
 * is a unit's gather whose load has its inputs final and whose shard is at
 * hand (read, when on the SSD; its steps done, when in memory), it starts. */
static void gather_ahead(sim *s, int i) {
    if (s->ranks < 2 || s->gather_task >= 0) return;
    const int j = s->an.next_network[i + 1];
    if (j >= s->l->n) return;
    const sched_task *g = &s->l->tasks[j];
    if (g->op != TASK_GATHER_WEIGHTS || g->n_deps != 1 || !sched_inputs_final(s->l, g->deps[0], i)) return;
    const int load = g->deps[0];
    if (!s->done[load]) {
        double ssd, link, ic;
        int to_dev;
        task_io(s, &s->l->tasks[load], &ssd, &link, &to_dev, &ic);
        if (ssd > 0) {   /* read ahead, and every read of it done */
            if (s->pf_task[KIND_WEIGHTS] != load || !xfer_done(s, s->pf_x[KIND_WEIGHTS])) return;
        } else if (s->unit_jobs[g->unit] > 0) {
            return;
        }
    }
    s->gather_task = j;
    s->gather_x = comm_start(s, g, 0, "gather weights");
}

/* The oldest reduce-scatter still moving, or -1; forgets the finished ones. */
static int oldest_reduce(sim *s) {
    int keep = 0;
    for (int k = 0; k < s->n_reduce; k++)
        if (!xfer_done(s, s->reduce_order[k])) s->reduce_order[keep++] = s->reduce_order[k];
    s->n_reduce = keep;
    return keep ? s->reduce_order[0] : -1;
}

static st_status next_task(sim *s, const sched_list *const *lists, int n_lists, st_error *err) {
    if (s->ci < s->l->n && s->an.grad_release[s->ci]) gbuf_release(s, sched_grad_unit(&s->l->tasks[s->ci]));
    arm_after(s, s->ci);
    gather_ahead(s, s->ci);
    s->ci++;
    s->lphase = 0;
    s->cstate = C_READY;
    if (s->ci < s->l->n) return ST_OK;
    if (s->ranks > 1 && s->tail < 2) return ST_OK;   /* the step's end: reduce-scatters and sums first */
    s->cur.end = s->t;
    if (s->seq == 0) s->first = s->cur;
    s->last = s->cur;
    if (s->seq + 1 == n_lists) {
        s->cstate = C_DONE;
        return ST_OK;
    }
    return begin_list(s, lists[s->seq + 1], s->seq + 1, err);
}

static const char *kind_name(int k) { return k == KIND_WEIGHTS ? "weights" : k == KIND_ACTS ? "checkpoint" : "gradients"; }

static void set_waiting(sim *s) {
    if (s->cstate != C_WAITING) s->wait_start = s->t;
    s->cstate = C_WAITING;
}

/* The compute thread stops waiting: the wait goes into the trace. */
static void end_wait(sim *s, const char *what) {
    if (s->cstate == C_WAITING && s->tr && s->t > s->wait_start) {
        char name[48];
        snprintf(name, sizeof name, "wait for %s", what);
        trace_span(s->tr, s->lane_compute, name, s->tbase + s->wait_start, s->tbase + s->t);
    }
    s->cstate = C_READY;
}

static void start_running(sim *s, double seconds) {
    s->compute_left = seconds;
    s->run_start = s->t;
    s->cstate = C_RUNNING;
}

/* CPU ranks: waits for every reduce-scatter in flight (reduce_finish_all),
 * then for a sum of n doubles over the ranks; 1 when both are done. */
static int finish_reduces_and_sum(sim *s, int n_doubles) {
    if (s->lphase == 0) {
        const int x = oldest_reduce(s);
        if (x >= 0) {
            s->wait_x = x;
            set_waiting(s);
            return 0;
        }
        s->lphase = 1;
        s->wait_x = comm_start(s, NULL, n_doubles, "sum over the ranks");
    }
    if (!xfer_done(s, s->wait_x)) {
        set_waiting(s);
        return 0;
    }
    end_wait(s, "the ranks");
    return 1;
}

/* Moves the compute thread on as far as it can go now; 1 if anything changed. */
static int step_compute(sim *s, const sched_list *const *lists, int n_lists, st_error *err, st_status *st) {
    if (s->cstate == C_DONE) return 0;
    if (s->ci == s->l->n) {   /* CPU ranks: the end of the step (offload_trainer_step) */
        if (!finish_reduces_and_sum(s, 2)) return 0;
        s->tail = 2;
        s->ci--;   /* next_task moves past the end again, and now ends the list */
        *st = next_task(s, lists, n_lists, err);
        return 1;
    }
    if (s->cstate == C_RUNNING) {
        if (s->compute_left > 0) return 0;
        const sched_task *t = &s->l->tasks[s->ci];
        int k = load_kind(t->op);
        if (k >= 0) {
            s->last_loaded[k] = s->ci;
            if (s->pf_task[k] == s->ci) s->pf_task[k] = -1;
        }
        if (s->tr && s->t > s->run_start) {
            char name[64];
            if (k >= 0) snprintf(name, sizeof name, "widen weights u%d", t->unit);
            else snprintf(name, sizeof name, "%s u%d mb%d", task_op_name(t->op), t->unit, t->mb);
            trace_span(s->tr, s->lane_compute, name, s->tbase + s->run_start, s->tbase + s->t);
        }
        /* a save is done when its write is */
        if (t->op != TASK_SAVE_ACT && t->op != TASK_SAVE_GRAD) s->done[s->ci] = 1;
        if ((s->gpu && s->an.grad_leave[s->ci])) {   /* GPU: the unit's gradients leave the device, written behind */
            uint64_t link;
            double ic;
            sim_grad_offload(&s->cfg, t->unit, &link, &ic);
            const int x = xfer_start_after(s, 0, 0, (double)link, 0, ic, -1);
            xfer_label(s, x, "gradients off the device", t->unit, t->mb);
            s->grad_off[t->unit] = x;
        }
        *st = next_task(s, lists, n_lists, err);
        return 1;
    }
    const sched_task *t = &s->l->tasks[s->ci];
    const int first = s->an.first_grad[s->ci], last = s->an.last_grad[s->ci];
    /* a unit's first gradient task, or its gradient load, takes a buffer: waiting for the worker's jobs */
    if ((first || t->op == TASK_LOAD_GRAD) && s->lphase == 0) {
        if (!gbuf_ready(s, sched_grad_unit(t))) {
            set_waiting(s);
            return 0;
        }
        end_wait(s, "a gradient buffer");
    }
    switch (t->op) {
    case TASK_LOAD_WEIGHTS: case TASK_LOAD_ACT: case TASK_LOAD_GRAD: {
        const int k = load_kind(t->op);
        if (s->lphase == 0) {   /* a weight load waits for its unit's pending optimizer steps */
            if (t->op == TASK_LOAD_WEIGHTS && s->unit_jobs[t->unit] > 0) {
                set_waiting(s);
                return 0;
            }
            end_wait(s, "optimizer");
            s->lphase = 1;
        }
        if (s->lphase == 1) {   /* what it reads must be written first; then read it, or take the prefetch */
            double ssd, link, ic;
            int to_dev;
            task_io(s, t, &ssd, &link, &to_dev, &ic);
            if (ssd > 0 || link > 0 || ic > 0) {
                if (!deps_done(s, t) || (t->op == TASK_LOAD_GRAD && s->grad_write[t->unit] >= 0)) {
                    set_waiting(s);
                    return 0;
                }
                end_wait(s, "a write");
                if (s->pf_task[k] == s->ci) {
                    s->wait_x = s->pf_x[k];
                } else {
                    s->wait_x = xfer_start_after(s, ssd, 0, link, to_dev, ic, -1);
                    xfer_label(s, s->wait_x, kind_name(k), t->unit, t->mb);
                }
            } else {
                s->wait_x = -1;
            }
            s->lphase = 2;
        }
        if (!xfer_done(s, s->wait_x)) {
            set_waiting(s);
            return 0;
        }
        end_wait(s, kind_name(k));
        /* loaded: widen bf16 weights on the compute thread, and take the
         * time the store's checks of what arrived took from the cores */
        double ssd, link, ic;
        int to_dev;
        task_io(s, t, &ssd, &link, &to_dev, &ic);
        sim_work w = sim_task_work_at(&s->cfg, t, first, last);
        start_running(s, sim_work_seconds(s->hw, &w) + store_cpu_s(s, ssd));
        return 1;
    }
    case TASK_SAVE_ACT: case TASK_SAVE_GRAD: {   /* written behind: compute moves on */
        /* CPU ranks: the save of a unit's shard waits, on the compute thread, for its sum */
        if (t->op == TASK_SAVE_GRAD && s->ranks > 1 && t->unit >= 0 && t->unit < s->L1 && s->reduce_x[t->unit] >= 0 &&
            !xfer_done(s, s->reduce_x[t->unit])) {
            s->wait_x = s->reduce_x[t->unit];
            set_waiting(s);
            return 0;
        }
        end_wait(s, "the ranks");
        double ssd, link, ic;
        int to_dev;
        task_io(s, t, &ssd, &link, &to_dev, &ic);
        /* GPU: gradients are written from the host, once they have arrived there */
        const int after = t->op == TASK_SAVE_GRAD && t->unit >= 0 && t->unit < s->L1 ? s->grad_off[t->unit] : -1;
        int x = xfer_start_after(s, ssd, 1, link, to_dev, ic, after);
        xfer_label(s, x, t->op == TASK_SAVE_ACT ? "checkpoint" : "gradients", t->unit, t->mb);
        if (x < 0) {
            s->done[s->ci] = 1;
        } else {
            s->x[x].seq = s->seq;
            s->x[x].task = s->ci;
            if (t->op == TASK_SAVE_GRAD) s->x[x].grad_unit = t->unit, s->grad_write[t->unit] = x;
            if (t->op == TASK_SAVE_GRAD && grads_on_ssd(s, t->unit) && s->gbuf_of[t->unit] >= 0)
                s->gbuf_wr[s->gbuf_of[t->unit]] = x;
        }
        /* the store checksums what it writes on the thread that queues it */
        const double cpu = store_cpu_s(s, ssd);
        if (cpu > 0) {
            start_running(s, cpu);
            return 1;
        }
        *st = next_task(s, lists, n_lists, err);
        return 1;
    }
    case TASK_OPTIMIZE:
        *st = enqueue_job(s, s->ci, err);
        if (*st == ST_OK) *st = next_task(s, lists, n_lists, err);
        return 1;
    case TASK_GRAD_NORM:   /* a sum of the units' sums of squares, on the compute thread */
        if (s->ranks > 1 && !finish_reduces_and_sum(s, 1)) return 0;   /* ranks: of the shards, summed over them */
        s->done[s->ci] = 1;
        *st = next_task(s, lists, n_lists, err);
        return 1;
    case TASK_GATHER_WEIGHTS: {   /* started ahead, or now; compute waits for it, then widens the unit */
        if (s->lphase == 0) {
            if (s->gather_task == s->ci) s->wait_x = s->gather_x;
            else s->wait_x = comm_start(s, t, 0, "gather weights");
            s->gather_task = s->gather_x = -1;
            s->lphase = 1;
        }
        if (!xfer_done(s, s->wait_x)) {
            set_waiting(s);
            return 0;
        }
        end_wait(s, "the ranks");
        sim_work w = sim_task_work_at(&s->cfg, t, first, last);
        start_running(s, sim_work_seconds(s->hw, &w));
        return 1;
    }
    case TASK_REDUCE_GRADS: {   /* started; with every slot taken, the oldest is finished first */
        if (s->lphase == 0) {
            const int x = oldest_reduce(s);
            if (x >= 0 && s->n_reduce >= LAYOUT_REDUCE_SLOTS) {
                s->wait_x = x;
                set_waiting(s);
                return 0;
            }
            end_wait(s, "the ranks");
        }
        const int x = comm_start(s, t, 0, "reduce-scatter gradients");
        if (t->unit >= 0 && t->unit < s->L1) s->reduce_x[t->unit] = x;
        if (x >= 0) s->reduce_order[s->n_reduce++] = x;
        s->done[s->ci] = 1;
        *st = next_task(s, lists, n_lists, err);
        return 1;
    }
    default: {
        sim_work w = sim_task_work_at(&s->cfg, t, first, last);
        start_running(s, sim_work_seconds(s->hw, &w));
        return 1;
    }
    }
}

/* Starts the next load of each kind once the last one of that kind has
 * completed and its inputs are final; 1 if one started. */
static int step_prefetch(sim *s) {
    int progress = 0;
    if (s->cstate == C_DONE) return 0;
    for (int k = 0; k < N_KINDS; k++) {
        if (s->pf_task[k] >= 0) continue;
        /* eager: the next load of the kind after the last one done; else the one chosen */
        const int j = s->cfg.prefetch_eager ? (s->last_loaded[k] >= 0 ? s->an.next_load[s->last_loaded[k]] : -1) : s->arm[k];
        if (j < 0 || j <= s->ci) {   /* none, or the compute thread is on it */
            s->arm[k] = -1;
            continue;
        }
        const sched_task *t = &s->l->tasks[j];
        double ssd, link, ic;
        int to_dev;
        task_io(s, t, &ssd, &link, &to_dev, &ic);
        if (ssd <= 0 && link <= 0 && ic <= 0) continue;
        if (!deps_done(s, t)) continue;
        if (s->cfg.prefetch_eager && t->op == TASK_LOAD_WEIGHTS && s->unit_jobs[t->unit] > 0) continue;
        if (t->op == TASK_LOAD_GRAD && s->grad_write[t->unit] >= 0) continue;
        if (t->op == TASK_LOAD_GRAD && grads_on_ssd(s, t->unit) && s->gbuf_of[t->unit] < 0 && !gbuf_take(s, t->unit, 1))
            continue;
        int x = xfer_start_after(s, ssd, 0, link, to_dev, ic, -1);
        xfer_label(s, x, kind_name(k), t->unit, t->mb);
        s->pf_task[k] = j;
        s->arm[k] = -1;
        s->pf_x[k] = x;
        progress = 1;
    }
    return progress;
}

/* ---- time ------------------------------------------------------------------------------- */

/* What the blocked compute thread waits on. */
static sim_resource compute_blame(sim *s, const int *nr, const int *nw, const int *nl) {
    if (s->ci == s->l->n) return xfer_blame(s, nr, nw, nl, s->wait_x, NULL);   /* CPU ranks: the step's end */
    const sched_task *t = &s->l->tasks[s->ci];
    if (t->op == TASK_GATHER_WEIGHTS || t->op == TASK_REDUCE_GRADS || (t->op == TASK_GRAD_NORM && s->ranks > 1))
        return xfer_blame(s, nr, nw, nl, s->wait_x, NULL);
    if (s->lphase == 0) return worker_blame(s, nr, nw, nl, t->unit);
    if (s->lphase == 1) {
        for (int d = 0; d < t->n_deps; d++)
            if (!s->done[t->deps[d]] && s->l->tasks[t->deps[d]].op == TASK_OPTIMIZE)
                return worker_blame(s, nr, nw, nl, s->l->tasks[t->deps[d]].unit);
        if (t->op == TASK_LOAD_GRAD && s->grad_write[t->unit] >= 0)
            return xfer_blame(s, nr, nw, nl, s->grad_write[t->unit], NULL);
        return SIM_SSD;   /* the write of what it reads */
    }
    return xfer_blame(s, nr, nw, nl, s->wait_x, NULL);
}

/* Advances to the next completion; ST_EINVAL when nothing can move. */
static st_status advance(sim *s, st_error *err) {
    int nr[HW_MAX_SSD], nw[HW_MAX_SSD], nl[4];   /* nl: link from / to the device, the interconnect, the network */
    count_flows(s, nr, nw, nl);
    flow_rates fr;
    flow_rates_now(s, nr, nw, nl, &fr);
    /* the lanes' AdamW each on a thread of its own, each slowed alike by compute beside it */
    int stepping = 0, busy = 0;
    for (int k = 0; k < LAYOUT_LANES; k++) stepping |= lane_stepping(&s->wl[k]), busy |= s->wl[k].wphase != W_IDLE;
    const int running = s->cstate == C_RUNNING;
    /* the drives' completions interrupt compute's threads (CPU backend) while any moves bytes */
    int drives_busy = 0;
    for (int p = 0; p < s->n_paths; p++) drives_busy |= nr[p] || nw[p];
    const double io_factor = s->cpu_shared && drives_busy && s->hw->compute_beside_io > 1 ? s->hw->compute_beside_io : 1.0;
    const double cs = (s->cpu_shared && stepping ? s->hw->compute_slowdown : 1.0) * io_factor;
    const double os = s->cpu_shared && running ? s->hw->optimizer_slowdown : 1.0;
    const double rc = running ? 1.0 / cs : 0, ra = 1.0 / os;   /* work-seconds per second */
    /* and the drives' transfers wait for a core while compute runs (the I/O thread, the completions) */
    if (s->cpu_shared && running && s->hw->io_beside_compute > 1)
        for (int p = 0; p < s->n_paths; p++) fr.r[0][p] /= s->hw->io_beside_compute, fr.r[1][p] /= s->hw->io_beside_compute;
    double dt = INFINITY;
    if (running) dt = s->compute_left / rc;
    for (int k = 0; k < LAYOUT_LANES; k++)
        if (lane_stepping(&s->wl[k]) && s->wl[k].adamw_left / ra < dt) dt = s->wl[k].adamw_left / ra;
    int ncomm = 0;
    for (int a = 0; a < s->nactive; a++) {
        const xfer *x = &s->x[s->active[a]];
        ncomm += x->comm;
        if (x->fixed > 0) {   /* its latency runs out first */
            if (x->fixed < dt) dt = x->fixed;
            continue;
        }
        for (int i = 0; i < s->n_part; i++) {
            const int p = s->part[i];
            if (x->left[p] > 0) {
                double t = x->left[p] / fr.r[xfer_dir(x, p)][p];
                if (t < dt) dt = t;
            }
        }
    }
    if (!isfinite(dt)) {
        const sched_task *t = &s->l->tasks[s->ci < s->l->n ? s->ci : s->l->n - 1];
        return st_fail(err, ST_EINVAL, "simulation stuck: list %d task %d (%s, unit %d) waits for something that never "
                       "happens (a dependency on a later task?)", s->seq, s->ci, task_op_name(t->op), t->unit);
    }
    if (++s->events > MAX_EVENTS) return st_fail(err, ST_EINVAL, "simulation did not finish in %ld events", MAX_EVENTS);
    /* where the time goes */
    list_stats *st = &s->cur;
    if (running) {
        st->compute_busy += dt;
        st->compute_s += dt / cs;
        st->contention_s += dt - dt / cs;
    } else {
        st->wait_s += dt;
        st->wait_on[compute_blame(s, nr, nw, nl)] += dt;
    }
    if (busy) st->optimizer_busy += dt;
    if (stepping) st->adamw_busy += dt;
    for (int p = 0; p < s->n_paths; p++) {
        if (nr[p]) st->read_busy[p] += dt;
        if (nw[p]) st->write_busy[p] += dt;
        if (nr[p] || nw[p]) st->busy[p] += dt;
    }
    if (nl[0] || nl[1]) st->link_busy += dt;
    if (nl[2] || ncomm) st->ic_busy += dt;
    /* move */
    /* the item that set dt finishes exactly: the same expression, compared */
    if (running) {
        s->compute_left = s->compute_left / rc <= dt ? 0 : s->compute_left - dt * rc;
        if (s->compute_left < SECONDS_EPS) s->compute_left = 0;
    }
    for (int k = 0; k < LAYOUT_LANES; k++) {
        worker_lane *w = &s->wl[k];
        if (!lane_stepping(w)) continue;
        w->adamw_left = w->adamw_left / ra <= dt ? 0 : w->adamw_left - dt * ra;
        if (w->adamw_left < SECONDS_EPS) w->adamw_left = 0;
    }
    for (int a = 0; a < s->nactive; a++) {
        xfer *x = &s->x[s->active[a]];
        if (x->fixed > 0) {
            x->fixed = x->fixed <= dt ? 0 : x->fixed - dt;
            if (x->fixed < SECONDS_EPS) x->fixed = 0;
            continue;
        }
        for (int i = 0; i < s->n_part; i++) {
            const int p = s->part[i];
            if (x->left[p] > 0) {
                double rate = fr.r[xfer_dir(x, p)][p];
                x->left[p] = x->left[p] / rate <= dt ? 0 : x->left[p] - rate * dt;
                if (x->left[p] < BYTES_EPS) x->left[p] = 0;
            }
        }
    }
    s->t += dt;
    /* transfers that finished */
    int keep = 0;
    for (int a = 0; a < s->nactive; a++) {
        const int id = s->active[a];
        xfer *x = &s->x[id];
        int moving = x->fixed > 0;
        for (int i = 0; i < s->n_part; i++) moving |= x->left[s->part[i]] > 0;
        if (moving) {
            s->active[keep++] = id;
            continue;
        }
        x->done = 1;
        trace_xfer(s, x);
        if (x->task >= 0 && x->seq == s->seq) s->done[x->task] = 1;
        if (x->grad_unit >= 0 && s->grad_write[x->grad_unit] == id) s->grad_write[x->grad_unit] = -1;
    }
    s->nactive = keep;
    if (s->nwaiting) start_waiting(s);
    return ST_OK;
}

/* ---- runs ---------------------------------------------------------------------------------- */

static st_status check_inputs(const hw_desc *hw, sim_config *c, const sched_list *const *lists, int n_lists,
                              st_error *err) {
    st_status s = hw_check(hw, "hw", err);
    if (s != ST_OK) return s;
    if ((s = gpt_config_check(&c->model, err)) != ST_OK) return s;
    if (c->B < 1 || c->T < 1 || c->micro_batches < 1)
        return st_fail(err, ST_EINVAL, "micro-batch %d x %d and %d micro-batches must all be at least 1", c->B, c->T, c->micro_batches);
    if (c->T > c->model.n_ctx)
        return st_fail(err, ST_EINVAL, "sequence length %d exceeds the model's context %d", c->T, c->model.n_ctx);
    if (!(c->alpha >= 0 && c->alpha <= 1)) return st_fail(err, ST_EINVAL, "alpha %g must be in [0, 1]", c->alpha);
    if (placement_any_ssd(c->place) && hw->n_ssd < 1)
        return st_fail(err, ST_EINVAL, "hw: ssd: the description has no SSD path, but the configuration places state on "
                       "the SSD");
    if (c->optimizer_segment == 0) c->optimizer_segment = LAYOUT_SEGMENT_DEFAULT;
    if (c->opt_io != OPT_IO_PHASED && c->opt_io != OPT_IO_INTERLEAVED)
        return st_fail(err, ST_EINVAL, "optimizer I/O order %s: the simulator models phased and interleaved (simulate "
                       "each of what alternating runs)", opt_io_order_name(c->opt_io));
    if (c->devices < 0) return st_fail(err, ST_EINVAL, "devices %d must be >= 1 (0: the description's node.devices)", c->devices);
    if (c->ranks < 0) return st_fail(err, ST_EINVAL, "ranks %d must be >= 1 (0: the description's cluster)", c->ranks);
    if (hw->backend != HW_BACKEND_GPU) {
        if (c->devices > 1)
            return st_fail(err, ST_EINVAL, "%d data-parallel devices: devices are modelled on a gpu backend only (on a cpu backend, "
                           "data parallelism is ranks: sim_config.ranks or the description's cluster)", c->devices);
        c->devices = 1;
        c->ranks = sim_ranks(hw, c);
        int nodes, per_node;
        if ((s = sim_ranks_split(hw, c->ranks, &nodes, &per_node, err)) != ST_OK) return s;
        if (per_node > 1 && !(hw->shm_gbps > 0))
            return st_fail(err, ST_EINVAL, "hw: cluster.shm_gbps: must be > 0 for %d ranks on a node", per_node);
        if (nodes > 1 && !(hw->network_gbps > 0))
            return st_fail(err, ST_EINVAL, "hw: cluster.network_gbps: must be > 0 for ranks on %d nodes", nodes);
    } else {
        if (c->ranks > 1)
            return st_fail(err, ST_EINVAL, "%d ranks: ranks are modelled on a cpu backend (a gpu node's data "
                           "parallelism is its devices)", c->ranks);
        c->ranks = 1;
        if (c->devices == 0) c->devices = hw->devices_per_node;
        if (c->devices > 1 && !(hw->interconnect_gbps > 0))
            return st_fail(err, ST_EINVAL, "hw: node.interconnect_gbps: must be > 0 for %d data-parallel devices",
                           c->devices);
    }
    for (int p = 0; p < hw->n_ssd; p++)
        if (!(c->stripe[p] >= 0) || !isfinite(c->stripe[p]))
            return st_fail(err, ST_EINVAL, "stripe share of SSD path %d must be >= 0", p);
    if (n_lists < 1) return st_fail(err, ST_EINVAL, "nothing to simulate: no task list");
    const int L1 = gpt_num_units(&c->model), n_acts = c->model.n_layer + 1;
    for (int k = 0; k < n_lists; k++) {
        const sched_list *l = lists[k];
        for (int i = 0; i < l->n; i++) {
            const sched_task *t = &l->tasks[i];
            if ((unsigned)t->op >= TASK_OP_COUNT)
                return st_fail(err, ST_EINVAL, "list %d task %d: unknown operation %d", k, i, (int)t->op);
            /* checkpoints are act[1..L+1]: the last block's output is one too */
            const int act = t->op == TASK_SAVE_ACT || t->op == TASK_LOAD_ACT;
            const int top = act ? n_acts : L1 - 1;
            if (t->op != TASK_GRAD_NORM && (t->unit < (act ? 1 : 0) || t->unit > top))
                return st_fail(err, ST_EINVAL, "list %d task %d (%s): unit %d outside %d..%d", k, i,
                               task_op_name(t->op), t->unit, act ? 1 : 0, top);
            if (t->n_deps < 0 || t->n_deps > SCHED_MAX_DEPS)
                return st_fail(err, ST_EINVAL, "list %d task %d: %d dependencies", k, i, t->n_deps);
            for (int d = 0; d < t->n_deps; d++)
                if (t->deps[d] < 0 || t->deps[d] >= i)
                    return st_fail(err, ST_EINVAL, "list %d task %d: dependency %d is not an earlier task", k, i,
                                   t->deps[d]);
            if (!(t->lo >= 0 && t->hi <= 1 && t->lo <= t->hi))
                return st_fail(err, ST_EINVAL, "list %d task %d: share [%g, %g) outside [0, 1]", k, i, t->lo, t->hi);
        }
    }
    return ST_OK;
}

static void setup(sim *s, const hw_desc *hw, const hw_desc *node, const sim_config *c) {
    memset(s, 0, sizeof *s);
    s->hw = hw;
    s->hw_node = node;
    s->ranks = c->ranks > 1 ? c->ranks : 1;
    s->gather_task = s->gather_x = -1;
    s->cfg = *c;
    s->L1 = gpt_num_units(&c->model);
    s->n_paths = hw->n_ssd;
    for (int p = 0; p < s->n_paths; p++) s->part[s->n_part++] = p;
    s->part[s->n_part++] = LINK, s->part[s->n_part++] = IC, s->part[s->n_part++] = NET;
    s->cpu_shared = hw->backend == HW_BACKEND_CPU;
    s->gpu = hw->backend == HW_BACKEND_GPU;
    double total = 0;
    for (int p = 0; p < s->n_paths; p++) total += c->stripe[p];
    for (int p = 0; p < s->n_paths; p++) {
        s->share[p] = total > 0 ? c->stripe[p] / total : 1.0 / s->n_paths;
        const hw_ssd *d = &hw->ssd[p];
        s->rd_bw[p] = d->read_gbps * 1e9;
        s->wr_bw[p] = d->write_gbps * 1e9;
        s->mrd_bw[p] = (d->mixed_read_gbps > 0 ? d->mixed_read_gbps : d->read_gbps / 2) * 1e9;
        s->mwr_bw[p] = (d->mixed_write_gbps > 0 ? d->mixed_write_gbps : d->write_gbps / 2) * 1e9;
    }
    s->link_bw = hw->backend == HW_BACKEND_GPU ? hw->host_device_gbps * 1e9 : 0;
    s->ic_bw = hw->backend == HW_BACKEND_GPU && c->devices > 1 ? hw->interconnect_gbps * 1e9 : 0;
    if (s->ranks > 1) {   /* the rank's share of its node's shared memory and network */
        int nodes = 1, per_node = 1;
        sim_ranks_split(node, s->ranks, &nodes, &per_node, NULL);
        s->ic_bw = node->shm_gbps * 1e9 / per_node;
        s->net_bw = node->network_gbps * 1e9 / per_node;
    }
    s->adamw_rate = hw_adamw_rate(hw);
    for (int k = 0; k < LAYOUT_LANES; k++) s->wl[k] = (worker_lane){.wphase = W_IDLE, .wx = {-1, -1}};
    if ((s->tr = c->trace)) {
        s->tbase = st_now();
        s->lane_compute = trace_lane(s->tr, "compute (simulated)");
        s->lane_optimizer[LAYOUT_LANE_SSD] = trace_lane(s->tr, "optimizer (simulated)");
        s->lane_optimizer[LAYOUT_LANE_HOST] = trace_lane(s->tr, "optimizer, state in memory (simulated)");
        for (int p = 0; p < s->n_paths; p++) {
            char name[64];
            snprintf(name, sizeof name, "ssd path %d (simulated)", p);
            s->lane_ssd[p] = trace_lane(s->tr, name);
        }
        if (s->link_bw > 0) s->lane_link = trace_lane(s->tr, "host-device link (simulated)");
        if (s->ranks > 1) s->lane_ic = trace_lane(s->tr, "ranks (simulated)");
        else if (s->ic_bw > 0) s->lane_ic = trace_lane(s->tr, "interconnect (simulated)");
    }
}

static void teardown(sim *s) {
    free(s->x);
    free(s->active);
    free(s->waiting);
    free(s->jobs);
    free(s->unit_jobs);
    free(s->grad_write);
    free(s->grad_off);
    free(s->gbuf_of);
    free(s->reduce_x);
    free(s->done);
    free(s->tio);
    sched_analysis_free(&s->an);
    layout_free(&s->lay);
}

/* Per-iteration figures that follow from the list alone. */
static st_status list_totals(const hw_desc *hw, const hw_desc *node, const sim_config *c, const sched_list *l,
                             sim_result *r, st_error *err) {
    run_layout lay;
    sched_analysis an;
    st_status st = sim_layout(c, &lay, err);
    if (st != ST_OK) return st;
    if ((st = sched_analyze(l, lay.n_units, &an, err)) != ST_OK) {
        layout_free(&lay);
        return st;
    }
    for (int i = 0; i < l->n; i++) {
        const sched_task *t = &l->tasks[i];
        uint64_t rd[STORE_KIND_COUNT], wr[STORE_KIND_COUNT];
        sim_task_bytes(&lay, c, t, rd, wr);
        for (int k = 0; k < STORE_KIND_COUNT; k++) {
            r->bytes_read[k] += rd[k];
            r->bytes_written[k] += wr[k];
            r->total_read += rd[k];
            r->total_written += wr[k];
        }
        if (hw->backend == HW_BACKEND_GPU) {
            int to_dev;
            const uint64_t link = sim_task_link_bytes(c, t, &to_dev);
            *(to_dev ? &r->link_to_device : &r->link_from_device) += link;
            r->interconnect_bytes += sim_task_interconnect_bytes(c, t);
            if (an.grad_leave[i]) {   /* the unit's gradients leave the device */
                uint64_t glink;
                double gic;
                sim_grad_offload(c, t->unit, &glink, &gic);
                r->link_from_device += glink;
                r->interconnect_bytes += gic;
            }
            r->link_bytes = r->link_to_device + r->link_from_device;
        }
        /* the store's CPU work: the worker's for the optimizer's writes (its reads' run on the I/O
           thread, enqueue_job), compute's (CPU) for loads and saves */
        const double io_cpu_s_per_byte = hw->io_cpu_s_per_gb / 1e9;
        if (t->op == TASK_OPTIMIZE)
            r->work_adamw_s += (double)layout_share_elements(&lay, t) / hw_adamw_rate(hw) +
                               ssd_bytes(wr) * io_cpu_s_per_byte;
        else if (hw->backend == HW_BACKEND_CPU)
            r->work_compute_s += (ssd_bytes(rd) + ssd_bytes(wr)) * io_cpu_s_per_byte;
        if (c->ranks > 1 && (task_op_resource(t->op) == RES_NETWORK || t->op == TASK_GRAD_NORM)) {
            sim_comm cm;
            sim_collective(node, c, t->op == TASK_GRAD_NORM ? NULL : t, 1, &cm);
            r->comm_sent += cm.sent;
            r->comm_received += cm.received;
            r->interconnect_bytes += cm.shm + cm.net;
        }
        sim_work w = sim_task_work_at(c, t, an.first_grad[i], an.last_grad[i]);
        r->work_compute_s += sim_work_seconds(hw, &w);
    }
    if (c->ranks > 1) {   /* the step's sum of the loss and the norm */
        sim_comm cm;
        sim_collective(node, c, NULL, 2, &cm);
        r->comm_sent += cm.sent;
        r->comm_received += cm.received;
        r->interconnect_bytes += cm.shm + cm.net;
    }
    sched_analysis_free(&an);
    layout_free(&lay);
    return ST_OK;
}

st_status sim_run_lists(const hw_desc *hw, const sim_config *cfg_in, const sched_list *const *lists, int n_lists,
                        sim_result *out, st_error *err) {
    memset(out, 0, sizeof *out);
    sim_config cfg = *cfg_in;
    st_status st = check_inputs(hw, &cfg, lists, n_lists, err);
    if (st != ST_OK) return st;
    int nodes = 1, per_node = 1;
    if (cfg.ranks > 1) sim_ranks_split(hw, cfg.ranks, &nodes, &per_node, NULL);
    hw_desc rank_hw;   /* CPU ranks: the rank's share of its node */
    hw_rank_share(hw, per_node, &rank_hw);
    sim s;
    setup(&s, &rank_hw, hw, &cfg);
    if ((st = sim_layout(&cfg, &s.lay, err)) != ST_OK) {
        teardown(&s);
        return st;
    }
    s.unit_jobs = calloc((size_t)s.L1, sizeof(int));
    s.grad_write = malloc(sizeof(int) * (size_t)s.L1);
    s.grad_off = malloc(sizeof(int) * (size_t)s.L1);
    s.reduce_x = malloc(sizeof(int) * (size_t)s.L1);
    s.gbuf_of = malloc(sizeof(int) * (size_t)s.L1);
    if (!s.unit_jobs || !s.grad_write || !s.grad_off || !s.reduce_x || !s.gbuf_of) {
        teardown(&s);
        return st_fail(err, ST_ENOMEM, "simulator: out of memory");
    }
    for (int u = 0; u < s.L1; u++) s.grad_write[u] = s.grad_off[u] = s.reduce_x[u] = s.gbuf_of[u] = -1;
    for (int b = 0; b < LAYOUT_GRAD_BUFFERS; b++) s.gbuf_wr[b] = -1;
    s.grad_pool = s.ranks == 1;
    st = begin_list(&s, lists[0], 0, err);
    while (st == ST_OK && s.cstate != C_DONE) {
        int progress;
        do {
            progress = step_compute(&s, lists, n_lists, err, &st);
            if (st == ST_OK) progress |= step_prefetch(&s);
            if (st == ST_OK) progress |= step_worker(&s);
        } while (progress && st == ST_OK && s.cstate != C_DONE);
        if (st == ST_OK && s.oom) st = st_fail(err, ST_ENOMEM, "simulator: out of memory");
        if (st != ST_OK || s.cstate == C_DONE) break;
        st = advance(&s, err);
    }
    if (st != ST_OK) {
        teardown(&s);
        return st;
    }
    /* the last list is the steady state */
    const list_stats *ls = &s.last;
    const double it = ls->end - ls->start;
    out->iter_s = it;
    out->first_iter_s = s.first.end - s.first.start;
    const double tokens = (double)cfg.B * cfg.T * cfg.micro_batches;
    out->tokens_per_s = it > 0 ? tokens / it : 0;
    out->model_flops_per_s = it > 0 ? gpt_train_flops(&cfg.model, cfg.B * cfg.micro_batches, cfg.T) / it : 0;
    out->compute_s = ls->compute_s;
    out->contention_s = ls->contention_s;
    out->wait_s = ls->wait_s;
    memcpy(out->wait_on, ls->wait_on, sizeof out->wait_on);
    memcpy(out->critical, ls->wait_on, sizeof out->critical);
    out->critical[SIM_COMPUTE] += ls->compute_s;
    out->critical[SIM_CONTENTION] += ls->contention_s;
    out->bottleneck = SIM_COMPUTE;
    for (int r = 0; r < SIM_RESOURCE_COUNT; r++)
        if (out->critical[r] > out->critical[out->bottleneck]) out->bottleneck = (sim_resource)r;
    const double inv = it > 0 ? 1.0 / it : 0;
    out->compute_busy = ls->compute_busy * inv;
    out->optimizer_busy = ls->optimizer_busy * inv;
    out->adamw_busy = ls->adamw_busy * inv;
    out->link_busy = ls->link_busy * inv;
    out->interconnect_busy = ls->ic_busy * inv;
    out->devices = cfg.devices;
    out->ranks = cfg.ranks > 1 ? cfg.ranks : 1;
    out->nodes = nodes;
    out->ranks_per_node = per_node;
    if ((st = list_totals(&rank_hw, hw, &cfg, lists[n_lists - 1], out, err)) != ST_OK) {
        teardown(&s);
        return st;
    }
    out->n_paths = s.n_paths;
    for (int p = 0; p < s.n_paths; p++) {
        out->path[p] = (sim_path_stats){.read_busy = ls->read_busy[p] * inv, .write_busy = ls->write_busy[p] * inv,
                                        .busy = ls->busy[p] * inv, .bytes_read = (double)out->total_read * s.share[p],
                                        .bytes_written = (double)out->total_written * s.share[p]};
    }
    sim_memory_need(hw, &cfg, &out->memory, &out->fits_device, &out->fits_host);
    teardown(&s);
    return ST_OK;
}

/* The executor's lists for cfg on hw: on a GPU backend every checkpoint
 * leaves the device (to the host, or on to the SSD), so the lists save and
 * load them whatever the placement (sim_task_bytes charges the SSD only
 * when place.acts). */
sched_params sim_list_params(const hw_desc *hw, const sim_config *cfg_in) {
    sim_config c = *cfg_in;   /* CPU ranks: each rank's list */
    c.ranks = sim_ranks(hw, cfg_in);
    const sim_config *cfg = &c;
    sched_params p = sim_sched_params(cfg);
    if (hw->backend == HW_BACKEND_GPU) p.place.acts = 1, p.defer_in_memory = 1;   /* AdamW beside the device */
    return p;
}

st_status sim_run(const hw_desc *hw, const sim_config *cfg, sim_result *out, st_error *err) {
    memset(out, 0, sizeof *out);
    sched_params p = sim_list_params(hw, cfg);
    const int steady = cfg->iterations > 0 ? cfg->iterations : 3;
    sched_list first, next;
    st_status s = sched_build(&p, 0, &first, err);
    if (s != ST_OK) return s;
    if ((s = sched_build(&p, 1, &next, err)) != ST_OK) {
        sched_list_free(&first);
        return s;
    }
    const sched_list **lists = malloc(sizeof *lists * (size_t)(steady + 1));
    if (!lists) {
        sched_list_free(&first);
        sched_list_free(&next);
        return st_fail(err, ST_ENOMEM, "simulator: out of memory");
    }
    lists[0] = &first;
    for (int i = 1; i <= steady; i++) lists[i] = &next;
    s = sim_run_lists(hw, cfg, lists, steady + 1, out, err);
    free(lists);
    sched_list_free(&first);
    sched_list_free(&next);
    return s;
}

/* ---- the roofline ----------------------------------------------------------------------- */

/* A collective's time alone: its latency, then its shared-memory and network parts side by side. */
static double comm_seconds(const hw_desc *node, int per_node, const sim_comm *c) {
    const double shm = c->shm > 0 ? c->shm / (node->shm_gbps * 1e9 / per_node) : 0;
    const double net = c->net > 0 ? c->net / (node->network_gbps * 1e9 / per_node) : 0;
    return c->fixed_s + (shm > net ? shm : net);
}

st_status sim_roofline_list(const hw_desc *hw, const sim_config *cfg_in, const sched_list *l, sim_roofline *out,
                            st_error *err) {
    sim_config c = *cfg_in;   /* the devices it runs on, as check_inputs resolves them */
    if (hw->backend != HW_BACKEND_GPU || c.devices < 0) c.devices = 1;
    else if (c.devices == 0) c.devices = hw->devices_per_node;
    c.ranks = c.ranks < 0 ? 1 : sim_ranks(hw, &c);
    int nodes = 1, per_node = 1;
    if (c.ranks > 1 && sim_ranks_split(hw, c.ranks, &nodes, &per_node, NULL) != ST_OK) c.ranks = 1;
    const sim_config *cfg = &c;
    const hw_desc *node = hw;
    hw_desc rank_hw;   /* CPU ranks: the rank's share of its node */
    hw_rank_share(node, per_node, &rank_hw);
    hw = &rank_hw;
    sim_result r;
    memset(&r, 0, sizeof r);
    memset(out, 0, sizeof *out);
    st_status st = list_totals(hw, node, cfg, l, &r, err);
    if (st != ST_OK) return st;
    out->compute_s = r.work_compute_s;
    out->optimizer_s = r.work_adamw_s;
    /* each path moves its stripe share; the slowest path sets the pace */
    double total = 0, rd = 0, wr = 0;
    for (int p = 0; p < hw->n_ssd; p++) total += cfg->stripe[p] > 0 ? cfg->stripe[p] : 0;
    for (int p = 0; p < hw->n_ssd; p++) {
        const double share = total > 0 ? (cfg->stripe[p] > 0 ? cfg->stripe[p] : 0) / total : 1.0 / hw->n_ssd;
        const double a = (double)r.total_read * share / (hw->ssd[p].read_gbps * 1e9);
        const double b = (double)r.total_written * share / (hw->ssd[p].write_gbps * 1e9);
        if (a > rd) rd = a;
        if (b > wr) wr = b;
    }
    out->io_s = rd + wr;
    out->ssd_read = r.total_read;
    out->ssd_written = r.total_written;
    if (hw->backend == HW_BACKEND_CPU) {   /* compute and AdamW share the cores */
        const double cpu = out->compute_s + out->optimizer_s;
        out->bound_s = cpu >= out->io_s ? cpu : out->io_s;
        out->limit = cpu >= out->io_s ? SIM_COMPUTE : SIM_SSD;
        if (cfg->ranks > 1) {   /* the rank's collectives, one after another at their rates alone */
            for (int i = 0; i < l->n; i++) {
                const sched_task *t = &l->tasks[i];
                if (task_op_resource(t->op) != RES_NETWORK && !(t->op == TASK_GRAD_NORM)) continue;
                sim_comm cm;
                sim_collective(node, cfg, t->op == TASK_GRAD_NORM ? NULL : t, 1, &cm);
                out->interconnect_s += comm_seconds(node, per_node, &cm);
            }
            sim_comm cm;
            sim_collective(node, cfg, NULL, 2, &cm);
            out->interconnect_s += comm_seconds(node, per_node, &cm);
            if (out->interconnect_s > out->bound_s) out->bound_s = out->interconnect_s, out->limit = SIM_INTERCONNECT;
        }
    } else {
        /* the link carries both ways at once; the devices' collectives share the interconnect */
        const double link = (double)(r.link_to_device > r.link_from_device ? r.link_to_device : r.link_from_device);
        out->link_s = link / (hw->host_device_gbps * 1e9);
        out->interconnect_s = cfg->devices > 1 && r.interconnect_bytes > 0 && hw->interconnect_gbps > 0
                                  ? r.interconnect_bytes / (hw->interconnect_gbps * 1e9) : 0;
        out->bound_s = out->compute_s, out->limit = SIM_COMPUTE;
        if (out->optimizer_s > out->bound_s) out->bound_s = out->optimizer_s, out->limit = SIM_OPTIMIZER;
        if (out->io_s > out->bound_s) out->bound_s = out->io_s, out->limit = SIM_SSD;
        if (out->link_s > out->bound_s) out->bound_s = out->link_s, out->limit = SIM_LINK;
        if (out->interconnect_s > out->bound_s) out->bound_s = out->interconnect_s, out->limit = SIM_INTERCONNECT;
    }
    return ST_OK;
}

st_status sim_roofline_bound(const hw_desc *hw, const sim_config *cfg_in, sim_roofline *out, st_error *err) {
    memset(out, 0, sizeof *out);
    sim_config cfg = *cfg_in;
    sched_params p = sim_list_params(hw, &cfg);
    sched_list l;
    st_status s = sched_build(&p, sched_defers(&p), &l, err);
    if (s != ST_OK) return s;
    const sched_list *one = &l;
    if ((s = check_inputs(hw, &cfg, &one, 1, err)) == ST_OK) s = sim_roofline_list(hw, &cfg, &l, out, err);
    sched_list_free(&l);
    return s;
}
