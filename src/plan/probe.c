/* probe.c - measures this machine into a hardware description
 * (strata/probe.h): the model's own kernels at a GPT shape, through the CPU
 * backend's table (strata/backend.h), AdamW on a worker-like thread, both at
 * once, and the store directories through the I/O engine. */
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan/sim_internal.h"
#include "strata/backend.h"
#include "strata/checksum.h"
#include "strata/comm.h"
#include "strata/io.h"
#include "strata/fs.h"
#include "strata/layout.h"
#include "strata/offload.h"
#include "strata/optim.h"
#include "strata/probe.h"
#include "strata/store.h"

hw_probe_config hw_probe_defaults(void) {
    return (hw_probe_config){.ssd_bytes = 256u << 20, .model = "gpt2-124m", .B = 4, .T = 256, .reps = 3,
                             .adamw_elements = 4u << 20, .trial_steps = 8, .trial_layers = 4};
}

static void say(const hw_probe_config *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const hw_probe_config *c, const char *fmt, ...) {
    if (!c->progress) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->progress(c->progress_arg, line);
}

#define MAX_REPS 32

/* ---- compute ------------------------------------------------------------------------- */

/* Buffers for one block and the head at B x T. The CPU backend is unified:
 * these host buffers are its device memory. */
typedef struct bench {
    const compute_backend *be;
    gpt_config c;
    int B, T;
    float *w, *g, *acts, *scratch, *x, *y, *dy;   /* block */
    float *ew, *eg, *hscratch, *hx, *hdx;          /* head */
    int32_t *targets;
    float *mm[3];                                  /* sgemm operands */
    int pass_T;                                    /* the sequence length block_pass runs at */
} bench;

static void bench_free(bench *b) {
    float *all[] = {b->w, b->g, b->acts, b->scratch, b->x, b->y, b->dy, b->ew, b->eg, b->hscratch, b->hx, b->hdx,
                    b->mm[0], b->mm[1], b->mm[2]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) st_free_aligned(all[i]);
    free(b->targets);
}

static st_status bench_init(bench *b, const hw_probe_config *cfg, st_error *err) {
    memset(b, 0, sizeof *b);
    b->be = compute_backend_cpu();
    st_status s = gpt_config_from_name(&b->c, cfg->model, err);
    if (s != ST_OK) return s;
    if (cfg->B < 1 || cfg->T < 1 || cfg->T > b->c.n_ctx)
        return st_fail(err, ST_EINVAL, "probe shape %d x %d: need at least 1 x 1 and at most %d tokens per sequence",
                       cfg->B, cfg->T, b->c.n_ctx);
    if (cfg->reps < 1 || cfg->reps > MAX_REPS) return st_fail(err, ST_EINVAL, "probe repetitions %d not in [1, %d]", cfg->reps, MAX_REPS);
    b->B = cfg->B;
    b->T = cfg->T;
    const size_t N = (size_t)b->B * b->T, C = (size_t)b->c.d_model, NC = N * C;
    /* ew, eg: the unit the head reads (the embedding unit when tied) */
    const int head_unit = gpt_head_unit(&b->c);
    const size_t unit = gpt_unit_numel(&b->c, 1), eunit = gpt_unit_numel(&b->c, head_unit);
    const size_t hscr = gpt_head_scratch_numel(&b->c, b->B, b->T);
#define A(ptr, n) (ptr = st_alloc_aligned(64, (n) * sizeof(float)))
    int ok = A(b->w, unit) && A(b->g, unit) && A(b->acts, gpt_block_acts_numel(&b->c, b->B, b->T)) &&
             A(b->scratch, gpt_block_scratch_numel(&b->c, b->B, b->T)) && A(b->x, NC) && A(b->y, NC) && A(b->dy, NC) &&
             A(b->ew, eunit) && A(b->eg, eunit) && A(b->hscratch, hscr) && A(b->hx, NC) && A(b->hdx, NC) &&
             A(b->mm[0], N * 4 * C) && A(b->mm[1], 16 * C * C) && A(b->mm[2], N * 4 * C);
#undef A
    ok = ok && (b->targets = malloc(sizeof(int32_t) * N)) != NULL;
    if (!ok) {
        bench_free(b);
        return st_fail(err, ST_ENOMEM, "probe: out of memory for %s at %d x %d", cfg->model, b->B, b->T);
    }
    gpt_init_unit(&b->c, 1, b->w, 1);
    gpt_init_unit(&b->c, head_unit, b->ew, 1);
    memset(b->g, 0, unit * sizeof(float));
    memset(b->eg, 0, eunit * sizeof(float));
    st_rng r;
    st_rng_seed(&r, 7);
    st_rng_normal_fill(&r, b->x, NC, 1.0f);
    st_rng_normal_fill(&r, b->hx, NC, 1.0f);
    st_rng_normal_fill(&r, b->dy, NC, 0.01f);
    st_rng_normal_fill(&r, b->mm[0], N * 4 * C, 1.0f);
    st_rng_normal_fill(&r, b->mm[1], 16 * C * C, 0.02f);
    memset(b->mm[2], 0, N * 4 * C * sizeof(float));
    for (size_t i = 0; i < N; i++) b->targets[i] = (int32_t)(st_rng_next(&r) % (uint64_t)b->c.vocab_size);
    return ST_OK;
}

/* How many repetitions time a piece that took `once`: at least `reps`, and
 * enough to last about 250 ms, at most MAX_REPS. On a shared machine a time
 * slice lost to another process can double one repetition: three of a
 * block's backward (60 ms) let two such slices set their median. */
static int reps_to_fill(double once, int reps) {
    int n = once > 0 ? (int)(0.25 / once) : MAX_REPS;
    if (n < reps) n = reps;
    return n > MAX_REPS ? MAX_REPS : n;
}

/* Timed repetitions of fn, as many as reps_to_fill says; the median. */
static double timed(void (*fn)(bench *, int, int), bench *b, int arg, int rows, int reps) {
    double t[MAX_REPS];
    double t0 = st_now();
    fn(b, arg, rows);   /* warm-up, and an estimate */
    const int n = reps_to_fill(st_now() - t0, reps);
    for (int r = 0; r < n; r++) {
        t0 = st_now();
        fn(b, arg, rows);
        t[r] = st_now() - t0;
    }
    return st_median(t, n);
}

/* The block's products at `rows` rows: the forward ones (run twice in a
 * backward task with recompute) and both backward ones, dinp = dout w^T and
 * dw += inp^T dout, as the CPU backend's matmul_forward/backward call sgemm. */
static void block_products(bench *b, int unused, int rows) {
    (void)unused;
    const compute_backend *be = b->be;
    const int C = b->c.d_model;
    const int shapes[4][2] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}};
    float *inp = b->mm[0], *w = b->mm[1], *out = b->mm[2];
    for (int pass = 0; pass < 4; pass++)   /* forward, forward again, dinp, dw */
        for (int k = 0; k < 4; k++) {
            const int IC = shapes[k][0], OC = shapes[k][1];
            if (pass < 2)
                be->sgemm(be, 0, 0, rows, OC, IC, 1.0f, inp, IC, w, OC, 1.0f, out, OC);
            else if (pass == 2)
                be->sgemm(be, 0, 1, rows, IC, OC, 1.0f, inp, OC, w, OC, 0.0f, out, IC);
            else
                be->sgemm(be, 1, 0, IC, OC, rows, 1.0f, inp, IC, out, OC, 1.0f, w, OC);
        }
}

/* The head's three products at `rows` rows (gpt_pass.c): logits = h wte^T,
 * dh = dlogits wte, dwte += dlogits^T h. */
static void head_products(bench *b, int unused, int rows) {
    (void)unused;
    const compute_backend *be = b->be;
    const int C = b->c.d_model, Vp = b->c.padded_vocab;
    float *h = b->hx, *lg = b->hscratch, *wte = b->ew, *dwte = b->eg, *dh = b->hdx;
    be->sgemm(be, 0, 1, rows, Vp, C, 1.0f, h, C, wte, C, 0.0f, lg, Vp);
    be->sgemm(be, 0, 0, rows, C, Vp, 1e-6f, lg, Vp, wte, C, 0.0f, dh, C);
    be->sgemm(be, 1, 0, Vp, C, rows, 1e-6f, lg, Vp, h, C, 1.0f, dwte, C);
}

/* A block's forward and, as the executor's BLOCK_BACKWARD runs it, the
 * recomputed forward and the backward, at B x T (at most the bench's). */
static void block_forward(bench *b, int B, int T) {
    gpt_block_w w = gpt_block_view(&b->c, b->w);
    gpt_block_acts a = gpt_block_acts_view(&b->c, B, T, b->acts);
    gpt_block_forward(b->be, &b->c, &w, B, T, b->x, b->y, &a);
}

static void block_backward(bench *b, int B, int T) {
    gpt_block_w w = gpt_block_view(&b->c, b->w), g = gpt_block_view(&b->c, b->g);
    gpt_block_acts a = gpt_block_acts_view(&b->c, B, T, b->acts);
    gpt_block_forward(b->be, &b->c, &w, B, T, b->x, b->scratch, &a);
    memcpy(b->y, b->dy, (size_t)B * T * b->c.d_model * sizeof(float));
    gpt_block_backward(b->be, &b->c, &w, &g, B, T, b->x, &a, b->y, b->y, b->scratch);
}

static void block_pass(bench *b, int backward, int B) {
    if (backward) block_backward(b, B, b->pass_T);
    else block_forward(b, B, b->pass_T);
}

static void time_block(bench *b, int B, int T, int reps, double *fwd, double *bwd) {
    b->pass_T = T;
    *fwd = timed(block_pass, b, 0, B, reps);
    *bwd = timed(block_pass, b, 1, B, reps);
}

static void head_pass(bench *b, int unused, int rows) {
    (void)unused;
    (void)rows;
    gpt_embed_w w = gpt_head_view(&b->c, b->ew), g = gpt_head_view(&b->c, b->eg);
    gpt_head_forward_backward(b->be, &b->c, &w, &g, b->B, b->T, b->hx, b->targets, 1.0f, b->hdx, NULL, b->hscratch);
}

/* GB/s of bf16 -> f32 widening (and, round_trip, narrowing back) of n
 * elements, from `sources` arrays taken in turn into one f32 array; the
 * arrays hold small weights' bit patterns, not zeros. */
#define MAX_SOURCES 64
static st_status time_bf16_passes(int reps, size_t n, int sources, int round_trip, double *gbps, st_error *err) {
    float *f = st_alloc_aligned(64, n * sizeof(float));
    st_bf16 *h[MAX_SOURCES] = {0};
    int ok = f != NULL;
    for (int i = 0; i < sources; i++) ok &= (h[i] = st_alloc_aligned(64, n * sizeof(st_bf16))) != NULL;
    st_status s = ST_OK;
    if (!ok) {
        s = st_fail(err, ST_ENOMEM, "probe: out of memory for the bf16 widening measurement");
    } else {
        const compute_backend *be = compute_backend_cpu();
        for (int i = 0; i < sources; i++)
            for (size_t j = 0; j < n; j++) h[i][j] = (st_bf16)(0x3c00u + (((j + (size_t)i) * 2654435761u >> 22) & 0x3ffu));
        be->bf16_to_f32(be, f, h[0], n);   /* first touch */
        double t[MAX_REPS];
        for (int r = 0; r < reps; r++) {
            st_bf16 *src = h[(r + 1) % sources];
            double t0 = st_now();
            be->bf16_to_f32(be, f, src, n);
            if (round_trip) be->f32_to_bf16(be, src, f, n);
            t[r] = st_now() - t0;
        }
        /* 2 bytes read and 4 written each way */
        *gbps = (round_trip ? 2 : 1) * (double)n * 6.0 / st_median(t, reps) / 1e9;
    }
    st_free_aligned(f);
    for (int i = 0; i < sources; i++) st_free_aligned(h[i]);
    return s;
}

/* GB/s of a streaming pass: bf16 -> f32 and back over 8M elements (48 MiB):
 * the blocks' memory-bound passes (LayerNorm, GELU, residuals). On a machine
 * whose last-level cache holds the array it runs from the cache, as do those
 * passes over a block's activations at small B x T. */
static st_status time_stream(int reps, double *gbps, st_error *err) {
    return time_bf16_passes(reps, 8u << 20, 1, 1, gbps, err);
}

/* Bytes that a measurement of memory-bound work rotates through so that each
 * pass finds its data in memory, not in a cache, as the executor does when
 * it works on a unit last touched many units ago: past any last-level cache. */
#define PAST_CACHE_BYTES (512ull << 20)

/* GB/s of widening one block's bf16 weights to f32 (n elements), as the
 * executor does before each of a unit's tasks in mixed precision: from
 * sources rotating through PAST_CACHE_BYTES (in at most MAX_SOURCES
 * arrays) into the one f32 buffer. Far below the round trip above on a
 * machine whose last-level cache holds that one's array. */
static st_status time_widen(int reps, size_t n, double *gbps, st_error *err) {
    const uint64_t k = PAST_CACHE_BYTES / (n * sizeof(st_bf16));
    const int sources = k < 2 ? 2 : k > MAX_SOURCES ? MAX_SOURCES : (int)k;
    return time_bf16_passes(reps, n, sources, 0, gbps, err);
}

/* GB/s of CRC32C (the store's checksum) on this thread over 256 MiB, more
 * than any cache holds: the store sums chunks that the disk has just
 * written into memory, or that AdamW wrote long before. */
static st_status time_checksum(int reps, double *gbps, st_error *err) {
    const size_t n = 256u << 20;
    unsigned char *buf = st_alloc_aligned(4096, n);
    if (!buf) return st_fail(err, ST_ENOMEM, "probe: out of memory for the checksum measurement");
    memset(buf, 0x5a, n);
    double t[MAX_REPS];
    volatile uint32_t sink = 0;
    for (int r = 0; r < reps; r++) {
        const double t0 = st_now();
        sink ^= st_crc32c(0, buf, n);
        t[r] = st_now() - t0;
    }
    (void)sink;
    *gbps = (double)n / st_median(t, reps) / 1e9;
    st_free_aligned(buf);
    return ST_OK;
}

/* What moving a GB through the store costs the host's cores: its checksum
 * and the kernel's work (0 for the part not measured). */
static void set_io_cpu(hw_desc *hw) {
    const hw_probe_record *p = &hw->probe;
    hw->io_cpu_s_per_gb = (p->checksum_gbps > 0 ? 1.0 / p->checksum_gbps : 0) + p->io_kernel_s_per_gb;
}

/* ---- AdamW on a thread of its own --------------------------------------------------------- */

/* AdamW's state for `segments` steps of n parameters each, taken in turn:
 * together at least PAST_CACHE_BYTES, so each step reads and writes memory,
 * as the executor's steps over a unit's state do (this machine's cache
 * holds one step's 72 MiB: stepping it again and again ran at 2213 M
 * parameters/s, from memory at 1378, in probes a minute apart). */
typedef struct adamw_bench {
    float *p, *g, *m, *v;
    st_bf16 *p16;
    size_t n;
    int segments;
    long next;                   /* the next step's number: its segment, and its count in AdamW's bias terms */
    int fixed;                   /* > 0: run this many steps, timing each; else until stop */
    double t[MAX_REPS];
    atomic_int go, stop;
    double busy;                 /* seconds inside steps while looping */
    long steps;
} adamw_bench;

static void *adamw_thread(void *arg) {
    adamw_bench *a = arg;
    omp_set_num_threads(1);   /* as the executor's optimizer worker */
    adamw_hparams h = adamw_defaults();
    while (!atomic_load(&a->go)) usleep(100);
    for (int i = 0; a->fixed ? i < a->fixed : !atomic_load(&a->stop); i++, a->next++) {
        double t0 = st_now();
        const size_t o = (size_t)(a->next % a->segments) * a->n;
        adamw_update(a->p + o, a->g + o, a->m + o, a->v + o, a->p16 + o, a->n, &h, 1e-4f, 1.0f,
                     (int)(a->next / a->segments) + 1, 1);
        double dt = st_now() - t0;
        if (a->fixed) a->t[i] = dt;
        else a->busy += dt, a->steps++;
    }
    return NULL;
}

static st_status adamw_init(adamw_bench *a, size_t n, st_error *err) {
    memset(a, 0, sizeof *a);
    const size_t per_param = 4 * sizeof(float) + sizeof(st_bf16);
    a->n = n;
    a->segments = (int)((PAST_CACHE_BYTES + n * per_param - 1) / (n * per_param));   /* n >= 1024: at most 29128 */
    const size_t total = n * (size_t)a->segments;
    a->p = st_alloc_aligned(64, total * sizeof(float));
    a->g = st_alloc_aligned(64, total * sizeof(float));
    a->m = st_alloc_aligned(64, total * sizeof(float));
    a->v = st_alloc_aligned(64, total * sizeof(float));
    a->p16 = st_alloc_aligned(64, total * sizeof(st_bf16));
    if (!a->p || !a->g || !a->m || !a->v || !a->p16) return st_fail(err, ST_ENOMEM, "probe: out of memory for AdamW");
    st_rng r;
    st_rng_seed(&r, 3);
    st_rng_normal_fill(&r, a->p, total, 0.02f);
    st_rng_normal_fill(&r, a->g, total, 0.001f);
    memset(a->m, 0, total * sizeof(float));
    memset(a->v, 0, total * sizeof(float));
    memset(a->p16, 0, total * sizeof(st_bf16));   /* first touch here, not in a timed step */
    return ST_OK;
}

static void adamw_free(adamw_bench *a) {
    st_free_aligned(a->p);
    st_free_aligned(a->g);
    st_free_aligned(a->m);
    st_free_aligned(a->v);
    st_free_aligned(a->p16);
}

/* Runs the thread: fixed steps, or looping while `during` runs here. */
static st_status adamw_run(adamw_bench *a, int fixed, void (*during)(void *), void *arg, st_error *err) {
    pthread_t th;
    a->fixed = fixed;
    a->busy = 0;
    a->steps = 0;
    atomic_store(&a->go, 0);
    atomic_store(&a->stop, 0);
    if (pthread_create(&th, NULL, adamw_thread, a) != 0) return st_fail(err, ST_ENOMEM, "probe: cannot start a thread");
    atomic_store(&a->go, 1);
    if (during) during(arg);
    atomic_store(&a->stop, 1);
    pthread_join(th, NULL);
    return ST_OK;
}

/* AdamW alone on the thread, seconds a parameter: a warm-up step, then the median of as many steps as fill
 * about 250 ms (timed's rule). */
static st_status adamw_alone(adamw_bench *a, int reps, double *per_param, st_error *err) {
    st_status s = adamw_run(a, 1, NULL, NULL, err);
    if (s != ST_OK) return s;
    const int n = reps_to_fill(a->t[0], reps);
    if ((s = adamw_run(a, n, NULL, NULL, err)) != ST_OK) return s;
    *per_param = st_median(a->t, n) / (double)a->n;
    return ST_OK;
}

typedef struct contended {
    bench *b;
    int reps;
    double fwd, bwd;
} contended;

static void contended_block(void *arg) {
    contended *c = arg;
    time_block(c->b, c->b->B, c->b->T, c->reps, &c->fwd, &c->bwd);
}

/* ---- the probe ------------------------------------------------------------------------------- */

static st_status probe_compute(const hw_probe_config *cfg, hw_desc *hw, st_error *err) {
    bench b;
    st_status s = bench_init(&b, cfg, err);
    if (s != ST_OK) return s;
    const int reps = cfg->reps;
    sim_config sc = sim_default_config();
    sc.model = b.c;
    sc.B = b.B;
    sc.T = b.T;
    const sched_task tf = {.op = TASK_BLOCK_FORWARD, .unit = 1}, tb = {.op = TASK_BLOCK_BACKWARD, .unit = 1};
    const sched_task th = {.op = TASK_HEAD, .unit = 0};
    const sim_work wf = sim_task_work_at(&sc, &tf, 0, 0), wb = sim_task_work_at(&sc, &tb, 0, 0);
    const sim_work wh = sim_task_work_at(&sc, &th, 0, 0);

    /* rows of the products to measure: 16, 64, 256, ... below the probe's, and the probe's */
    const int N = b.B * b.T;
    int rows[HW_MAX_ROWS], n_rows = 0;
    for (int r = 16; r < N && n_rows < HW_MAX_ROWS - 1; r *= 4) rows[n_rows++] = r;
    rows[n_rows++] = N;
    say(cfg, "matrix products at %s's block shapes, %d to %d rows (%d threads)...", cfg->model, rows[0], N,
        omp_get_max_threads());
    for (int i = 0; i < n_rows; i++) {
        sc.B = 1;
        sc.T = rows[i];   /* the products' FLOPs depend on the rows alone */
        const sim_work w1 = sim_task_work_at(&sc, &tf, 0, 0), w2 = sim_task_work_at(&sc, &tb, 0, 0);
        const double t = timed(block_products, &b, 0, rows[i], reps);
        hw->matmul_by_rows[i] = (hw_rate_at){rows[i], (w1.matmul_flops + w2.matmul_flops) / t / 1e9};
    }
    hw->n_matmul_rows = n_rows;
    sc.B = b.B;
    sc.T = b.T;
    hw->matmul_gflops = hw->matmul_by_rows[n_rows - 1].gflops;
    char line[256];
    size_t len = 0;
    for (int i = 0; i < n_rows; i++)
        len += (size_t)snprintf(line + len, sizeof line - len, "%s%d rows %.3g", i ? ", " : "", rows[i],
                                hw->matmul_by_rows[i].gflops);
    say(cfg, "  GFLOP/s: %s", line);

    say(cfg, "memory-bound passes (bf16 widening and narrowing)...");
    if ((s = time_stream(reps, &hw->other_gbps, err)) != ST_OK) {
        bench_free(&b);
        return s;
    }
    say(cfg, "  %.3g GB/s", hw->other_gbps);
    const size_t block_n = (size_t)gpt_unit_numel(&b.c, 1);
    say(cfg, "bf16 widening of a block's weights (%zu elements)...", block_n);
    if ((s = time_widen(reps, block_n, &hw->widen_gbps, err)) != ST_OK) {
        bench_free(&b);
        return s;
    }
    say(cfg, "  %.3g GB/s", hw->widen_gbps);

    say(cfg, "the store's checksum (CRC32C) on one thread...");
    if ((s = time_checksum(reps, &hw->probe.checksum_gbps, err)) != ST_OK) {
        bench_free(&b);
        return s;
    }
    say(cfg, "  %.3g GB/s", hw->probe.checksum_gbps);

    /* A block at the probe's shape and at 16 tokens: what the products and
     * the passes do not explain is the attention (which grows with T) and a
     * fixed cost per task (which does not). */
    say(cfg, "a block's forward and backward (recompute + backward) at %d x %d and 1 x 16...", b.B, b.T);
    double f, k, f1, k1;
    time_block(&b, b.B, b.T, reps, &f, &k);
    const int small_T = b.T < 16 ? b.T : 16;
    time_block(&b, 1, small_T, reps, &f1, &k1);
    hw->probe.block_forward_s = f;
    hw->probe.block_backward_s = k;
    hw_desc tmp = *hw;
    tmp.attention_gflops = 1e30;   /* attention free, no overhead: what remains is theirs */
    tmp.task_overhead_s = 0;
    sim_config small = sc;
    small.B = 1;
    small.T = small_T;
    const sim_work sf = sim_task_work_at(&small, &tf, 0, 0), sb = sim_task_work_at(&small, &tb, 0, 0);
    const double rest = f + k - sim_work_seconds(&tmp, &wf) - sim_work_seconds(&tmp, &wb);
    const double rest1 = f1 + k1 - sim_work_seconds(&tmp, &sf) - sim_work_seconds(&tmp, &sb);
    const double att = wf.attention_flops + wb.attention_flops, att1 = sf.attention_flops + sb.attention_flops;
    /* rest = 2 o + att / R at both shapes (two tasks each): solve for the
     * attention's rate R and the overhead o. When that does not give a
     * plausible pair (noise), the probe's own shape wins: R no faster than
     * the products, o what is left there. */
    double R = rest > rest1 && att > att1 ? (att - att1) / (rest - rest1) / 1e9 : 0;
    double o = R > 0 ? (rest1 - att1 / (R * 1e9)) / 2 : -1;
    /* attention's products run at a fair share of sgemm's rate; a rate
     * twenty times slower is a slow repetition, not the attention */
    if (!(R >= hw->matmul_gflops / 20 && R <= hw->matmul_gflops && o >= 0 && 2 * o < f1 + k1)) {
        R = hw->matmul_gflops;
        o = (rest - att / (R * 1e9)) / 2;
        if (o < 0) {   /* even at the products' rate the attention explains more than is left */
            o = 0;
            R = rest > 0 ? att / rest / 1e9 : hw->matmul_gflops;
            if (R < hw->matmul_gflops / 100) R = hw->matmul_gflops / 100;
        }
    }
    hw->attention_gflops = R;
    hw->task_overhead_s = o;
    say(cfg, "  forward %.4f s, backward %.4f s (1 x %d: %.5f s, %.5f s): attention %.3g GFLOP/s, %.0f us per task", f,
        k, small_T, f1, k1, hw->attention_gflops, hw->task_overhead_s * 1e6);

    /* the head: its products below the probe's rows, then the whole head at
     * the probe's shape, which sets the rate there (cross-entropy aside) */
    const int head_rows = N < 1024 ? N : 1024;
    say(cfg, "the LM head (vocabulary %d): products at up to %d rows, then forward and backward at %d x %d...",
        b.c.padded_vocab, head_rows, b.B, b.T);
    int nh = 0;
    for (int r = 16; r < head_rows && r <= 64 && nh < HW_MAX_ROWS - 1; r *= 4) {
        const double t = timed(head_products, &b, 0, r, reps < 2 ? reps : 2);
        hw->head_by_rows[nh++] = (hw_rate_at){r, 6.0 * r * b.c.d_model * b.c.padded_vocab / t / 1e9};
    }
    const int head_reps = reps < 2 ? reps : 2;   /* the slowest piece: two are enough */
    const double h = timed(head_pass, &b, 0, 0, head_reps);   /* after a warm-up: its logits buffer first touched */
    hw->probe.head_s = h;
    const double head_rest = h - wh.other_bytes / (hw->other_gbps * 1e9) - hw->task_overhead_s;
    const double head_rate = head_rest > 0 ? wh.head_flops / head_rest / 1e9 : 0;
    hw->head_matmul_gflops = head_rate > 0 && head_rate < 10 * hw->matmul_gflops ? head_rate : hw->matmul_gflops;
    hw->head_by_rows[nh++] = (hw_rate_at){head_rows, hw->head_matmul_gflops};
    hw->n_head_rows = nh;
    say(cfg, "  %.4f s: %.3g GFLOP/s at %d rows", h, hw->head_matmul_gflops, head_rows);

    say(cfg, "AdamW on the optimizer thread (1 thread, steps of %llu parameters from memory)...",
        (unsigned long long)cfg->adamw_elements);
    /* alone before and after the block beside it, the faster kept (the machine's stalls only slow a step).
       The median of three steps (10-15 ms) ran 0.66-2.77 ns a parameter over 28 probes, in half of them no
       faster than AdamW beside compute (docs/BENCHMARKS.md, "AdamW alone, timed twice") */
    adamw_bench a;
    double alone = 0, again = 0;   /* seconds per parameter */
    if ((s = adamw_init(&a, (size_t)cfg->adamw_elements, err)) != ST_OK ||
        (s = adamw_alone(&a, reps, &alone, err)) != ST_OK) {
        adamw_free(&a);
        bench_free(&b);
        return s;
    }
    say(cfg, "  %.0f M parameters/s", 1e-6 / alone);

    say(cfg, "the block again with AdamW beside it (shared cores)...");
    contended cb = {.b = &b, .reps = reps};
    s = adamw_run(&a, 0, contended_block, &cb, err);
    const double beside_steps = (double)a.steps, beside_busy = a.busy;   /* the next run starts them again */
    if (s == ST_OK) s = adamw_alone(&a, reps, &again, err);
    if (s == ST_OK) {
        say(cfg, "  AdamW alone again: %.0f M parameters/s", 1e-6 / again);
        if (again < alone) alone = again;
        hw->adamw_params_per_s = 1.0 / alone;
        hw->adamw_threads = 1;
        hw->probe.adamw_alone_s = alone * 1e6;
        const double slow = (cb.fwd + cb.bwd) / (f + k);
        const double beside = beside_steps > 0 ? beside_busy / beside_steps / (double)a.n : alone;
        hw->optimizer_slowdown = beside > alone ? beside / alone : 1.0;
        hw->probe.adamw_beside_compute_s = beside * 1e6;
        hw->probe.compute_beside_adamw = slow > 1 ? slow : 1.0;
        /* Compute's threads fill every core and wait for each other at the end of each parallel region, so the
           one that shares its core with the worker sets their pace: while AdamW runs at 1/os of its speed,
           compute gets the rest of that core, 1 - 1/os. The executor's runs lose about that (the worker's
           every CPU second, one second of compute); the block timed beside AdamW looping without a pause
           loses less and varies more from one probe to the next, so it is kept for the record. When AdamW
           hardly slows (a core of its own), the timed slowdown stands. */
        const double os = hw->optimizer_slowdown;
        hw->compute_slowdown = os >= 1.05 ? os / (os - 1) : hw->probe.compute_beside_adamw;
        say(cfg, "  compute %.2fx slower, AdamW %.2fx slower: sharing a core, compute %.2fx", slow,
            hw->optimizer_slowdown, hw->compute_slowdown);
    }
    adamw_free(&a);
    bench_free(&b);
    snprintf(hw->probe.model, sizeof hw->probe.model, "%s", cfg->model);
    snprintf(hw->probe.blas_kernels, sizeof hw->probe.blas_kernels, "%s", cpu_blas_kernels());
    hw->probe.B = cfg->B;
    hw->probe.T = cfg->T;
    return s;
}

/* The optimizer's phase: LAYOUT_OPT_SLOTS segments of master weights and
 * both moments, read, stepped, written back in place (offload_optim.c). */
#define PROBE_SSD_PHASE ((uint64_t)LAYOUT_OPT_SLOTS * 3 * LAYOUT_SEGMENT_DEFAULT * 4)

static st_status probe_ssd(const hw_probe_config *cfg, hw_desc *hw, st_error *err) {
    if (cfg->n_ssd > HW_MAX_SSD) return st_fail(err, ST_EINVAL, "probe: at most %d store directories", HW_MAX_SSD);
    for (int p = 0; p < cfg->n_ssd; p++) {
        const char *dir = cfg->ssd_dirs[p];
        char size[32], phase[32];
        io_bench_config bc = io_bench_default_config();
        bc.dirs = &dir;
        bc.n_dirs = 1;
        bc.file_name = "strata-probe.dat";
        bc.size = cfg->ssd_bytes;
        /* Read and write alone: the store's own pattern, not a long sequential
         * pass each way. The file is laid down (untimed), cycled through once
         * (untimed: the blocks then hold what a step before wrote), and the
         * cycle after that is timed, reads and writes apart. */
        bc.read = 0;
        bc.cycle_phase = bc.size < PROBE_SSD_PHASE ? bc.size : PROBE_SSD_PHASE;
        bc.cycle_warm = 1;
        bc.mixed = 1;
        say(cfg, "SSD %s: O_DIRECT, %s phases read then overwritten, and both at once (%s)...", dir,
            st_format_bytes((double)bc.cycle_phase, phase, sizeof phase),
            st_format_bytes((double)cfg->ssd_bytes, size, sizeof size));
        io_bench_result r;
        st_status s = io_bench(&bc, &r, err);
        if (s != ST_OK) return s;
        hw_ssd *d = &hw->ssd[p];
        snprintf(d->path, sizeof d->path, "%s", dir);
        d->write_gbps = (double)bc.size / r.cycle_write_s[0] / 1e9;
        d->read_gbps = (double)bc.size / r.cycle_read_s[0] / 1e9;
        d->mixed_read_gbps = (double)r.mixed_read_bytes / r.mixed_read_s[0] / 1e9;
        d->mixed_write_gbps = (double)r.mixed_write_bytes / r.mixed_write_s[0] / 1e9;
        hw->n_ssd = p + 1;
        /* a cycle reads and writes the file once: the host's CPU per GB, the largest of the paths. The
           whole machine's busy time where it can be read: it also holds the kernel's work outside the
           process (completions, interrupts), 3-6x the process's own on this machine's virtual disk */
        const double cpu = r.cycle_machine_cpu_s > r.cycle_cpu_s ? r.cycle_machine_cpu_s : r.cycle_cpu_s;
        const double kernel = cpu / (2.0 * (double)bc.size / 1e9);
        if (kernel > hw->probe.io_kernel_s_per_gb) hw->probe.io_kernel_s_per_gb = kernel;
        say(cfg, "  read %.3f GB/s, write %.3f GB/s; together %.3f + %.3f GB/s", d->read_gbps, d->write_gbps,
            d->mixed_read_gbps, d->mixed_write_gbps);
    }
    return ST_OK;
}

/* ---- compute beside the drive's transfers ------------------------------------------------------ */

/* Bytes per request of the stream beside compute (at most: two at least fit in the test file's --size),
 * and the windows the block is timed in. */
#define IO_STREAM_REQUEST (8u << 20)
#define IO_ROUNDS 5         /* of three windows: compute alone, beside the stream, the stream alone */
#define IO_WINDOW_S 0.4

/* A thread that reads and writes a test file in turn, one request at a time
 * (the engine keeps its chunks in flight), while not paused, until told to
 * stop: the drive as busy as while the optimizer streams its state beside
 * compute. Paused, it sleeps on cv (no wake-ups to disturb the block timed
 * alone) once its last request is done (idle). */
typedef struct io_stream {
    io_engine *eng;
    io_file *f;
    void *buf;
    uint64_t request;      /* bytes per request */
    uint64_t regions;      /* the file's requests' worth */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pause, stop, idle; /* under mu */
    atomic_ullong moved;   /* bytes so far */
    st_status status;      /* the thread's; read after the join */
    st_error err;
} io_stream;

static void *io_stream_thread(void *arg) {
    io_stream *st = arg;
    for (uint64_t i = 0;; i++) {
        pthread_mutex_lock(&st->mu);
        while (st->pause && !st->stop) {
            st->idle = 1;
            pthread_cond_broadcast(&st->cv);
            pthread_cond_wait(&st->cv, &st->mu);
        }
        const int stop = st->stop || st->status != ST_OK;
        st->idle = stop;
        if (stop) pthread_cond_broadcast(&st->cv);
        pthread_mutex_unlock(&st->mu);
        if (stop) return NULL;
        const io_request rq = {.op = i % 2 ? IO_OP_WRITE : IO_OP_READ, .file = st->f, .buf = st->buf,
                               .len = st->request, .offset = i / 2 % st->regions * st->request};
        st->status = io_run(st->eng, &rq, &st->err);
        if (st->status == ST_OK) atomic_fetch_add(&st->moved, st->request);
    }
}

/* Pauses the stream and waits until its request in flight is done (or it
 * has stopped), or lets it go on; stop: ends it. */
static void io_stream_set(io_stream *st, int pause, int stop) {
    pthread_mutex_lock(&st->mu);
    st->pause = pause;
    st->stop |= stop;
    pthread_cond_broadcast(&st->cv);
    while (pause && !st->idle) pthread_cond_wait(&st->cv, &st->mu);
    pthread_mutex_unlock(&st->mu);
}

/* Block passes (forward and backward) for about IO_WINDOW_S: seconds per pass. */
static double block_window(bench *b) {
    b->pass_T = b->T;
    const double t0 = st_now();
    int n = 0;
    do {
        block_pass(b, 0, b->B);
        block_pass(b, 1, b->B);
        n++;
    } while (st_now() - t0 < IO_WINDOW_S);
    return (st_now() - t0) / n;
}

/* Compute and the drive beside each other, in rounds of three windows: the
 * block (forward and backward at the probe's shape) alone, the block while
 * the first store directory's drive reads and writes a test file (--size)
 * through the I/O engine, and that stream alone. On this machine's virtual
 * disk the transfers' completions take a core from compute's threads now
 * and then, and they wait for each other, so compute loses far more than
 * the kernel's CPU seconds per GB; and the I/O thread and the completions
 * wait for a core while compute's threads hold both (docs/BENCHMARKS.md).
 * The block's median time beside the stream over alone -> compute_beside_io,
 * which the simulator applies while any of its transfers moves (with reads
 * spaced out, compute slowed in proportion to the time a read was in
 * flight, not to its bytes); the stream's median rate alone over beside
 * the block -> io_beside_compute, which it applies to every transfer while
 * compute runs. */
static st_status probe_io_contention(const hw_probe_config *cfg, hw_desc *hw, st_error *err) {
    if (cfg->n_ssd < 1) return ST_OK;
    bench b;
    st_status s = bench_init(&b, cfg, err);
    if (s != ST_OK) return s;
    say(cfg, "the block alone and beside reads and writes on %s, in turns...", cfg->ssd_dirs[0]);
    io_stream st = {.status = ST_OK, .request = cfg->ssd_bytes / 2 / 4096 * 4096, .pause = 1,
                    .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    if (st.request > IO_STREAM_REQUEST) st.request = IO_STREAM_REQUEST;
    if (st.request < 4096) st.request = 4096;
    st.regions = cfg->ssd_bytes / st.request;
    if (st.regions < 2) st.regions = 2;
    const io_engine_config ec = io_engine_default_config();
    const char *name = "strata-probe-beside.dat";
    char file[4096];
    snprintf(file, sizeof file, "%s/%s", cfg->ssd_dirs[0], name);
    int path, tried = 0;
    st.buf = st_alloc_io(st.request);
    if (!st.buf) s = st_fail(err, ST_ENOMEM, "probe: out of memory for the I/O stream's buffer");
    if (s == ST_OK) s = io_engine_create(&ec, &st.eng, err);
    if (s == ST_OK) s = io_engine_add_path(st.eng, cfg->ssd_dirs[0], NULL, &path, err);
    if (s == ST_OK) {   /* removed whatever happens next, even if opening it fails once it exists */
        tried = 1;
        s = io_file_open(st.eng, path, name, IO_FILE_CREATE | IO_FILE_TRUNCATE, &st.f, err);
    }
    if (s == ST_OK) memset(st.buf, 0x5a, st.request);
    for (uint64_t r = 0; s == ST_OK && r < st.regions; r++) {   /* laid down: the reads read written blocks */
        const io_request rq = {.op = IO_OP_WRITE, .file = st.f, .buf = st.buf, .len = st.request,
                               .offset = r * st.request};
        s = io_run(st.eng, &rq, err);
    }
    /* rounds of three windows: compute alone, compute beside the stream, the stream alone */
    double alone[IO_ROUNDS], beside[IO_ROUNDS], rate_beside[IO_ROUNDS], rate_alone[IO_ROUNDS];
    pthread_t th;
    if (s == ST_OK && pthread_create(&th, NULL, io_stream_thread, &st) != 0)
        s = st_fail(err, ST_ENOMEM, "probe: cannot start a thread");
    else if (s == ST_OK) {
        block_window(&b);   /* warm-up */
        for (int w = 0; w < 3 * IO_ROUNDS; w++) {
            const int kind = w % 3, r = w / 3;
            io_stream_set(&st, kind == 0, 0);   /* paused: its last request done */
            if (kind > 0) usleep(20000);        /* the stream under way */
            const unsigned long long m0 = atomic_load(&st.moved);
            const double t0 = st_now();
            if (kind == 2) usleep((useconds_t)(IO_WINDOW_S * 1e6));
            const double t = kind < 2 ? block_window(&b) : 0;
            const double gbps = (double)(atomic_load(&st.moved) - m0) / (st_now() - t0) / 1e9;
            if (kind == 0) alone[r] = t;
            else if (kind == 1) beside[r] = t, rate_beside[r] = gbps;
            else rate_alone[r] = gbps;
        }
        io_stream_set(&st, 0, 1);
        pthread_join(th, NULL);
        if (st.status != ST_OK) {
            s = st.status;
            if (err) *err = st.err;
        }
    }
    if (s == ST_OK) {
        const double a = st_median(alone, IO_ROUNDS), bs = st_median(beside, IO_ROUNDS);
        const double ra = st_median(rate_alone, IO_ROUNDS), rb = st_median(rate_beside, IO_ROUNDS);
        const double slow = bs / a, io_slow = rb > 0 ? ra / rb : 1;
        hw->compute_beside_io = slow > 1 ? slow : 1;
        hw->io_beside_compute = io_slow > 1 ? io_slow : 1;
        say(cfg, "  %.4f s a pass alone, %.4f s beside %.3f GB/s: compute %.2fx slower; the stream alone %.3f GB/s: "
            "%.2fx slower beside compute", a, bs, rb, slow, ra, io_slow);
    }
    io_file_close(st.f);
    if (tried) unlink(file);
    io_engine_destroy(st.eng);
    pthread_cond_destroy(&st.cv);
    pthread_mutex_destroy(&st.mu);
    st_free_aligned(st.buf);
    bench_free(&b);
    return s;
}

/* ---- the executor itself, on a slice of the model ------------------------------------------- */

/* Steps of a trial run: the first warms buffers up (and, on the SSD, reads
 * what creation wrote); the rest are timed. */
#define TRIAL_MIN_STEPS 2

typedef struct trial_result {
    double step_s;    /* per timed step */
    double work_s;    /* per timed step: the compute thread not waiting (its tasks and its work between them) */
    int n_paths;
    io_path_counters io[STORE_MAX_PATHS];   /* over the timed steps */
} trial_result;

/* The trial's configuration: the probe's shape cut to its first `layers`
 * blocks (with the embedding and the head), mixed precision, vertical,
 * alpha 0, no clipping, one micro-batch. */
static st_status trial_config(const hw_probe_config *cfg, int layers, sim_config *sc, st_error *err) {
    *sc = sim_default_config();
    st_status s = gpt_config_from_name(&sc->model, cfg->model, err);
    if (s == ST_OK && layers < sc->model.n_layer) sc->model.n_layer = layers;
    sc->B = cfg->B;
    sc->T = cfg->T;
    return s;
}

/* The blocks a trial runs: at most max_layers, at most the model's, and few
 * enough that the in-memory run's buffers take at most a quarter of memory
 * (*layers 0 when one block is already too many). */
static st_status trial_blocks(const hw_probe_config *cfg, const hw_desc *hw, int max_layers, int *layers,
                              st_error *err) {
    sim_config sc;
    st_status s = trial_config(cfg, max_layers, &sc, err);
    if (s != ST_OK) return s;
    for (*layers = sc.model.n_layer; *layers > 0; (*layers)--) {
        sc.model.n_layer = *layers;
        offload_config oc = sim_offload_config(&sc);
        layout_memory m;
        offload_memory_need(&oc, &m);
        if (m.host + m.device <= hw->host_bytes / 4) break;
    }
    return ST_OK;
}

/* One trial run of sc: in memory (dirs NULL), or with what sc places on the
 * SSD in a store in a directory of its own under each of dirs (removed
 * afterwards). */
static st_status trial_run(const hw_probe_config *cfg, const sim_config *sc, const char *const *dirs, int n_dirs,
                           trial_result *out, st_error *err) {
    memset(out, 0, sizeof *out);
    offload_config oc = sim_offload_config(sc);
    char sub[STORE_MAX_PATHS][4200];
    const char *paths[STORE_MAX_PATHS];
    store_dirs sd = {.n = 0};
    oc.n_store_paths = 0;
    st_status s = ST_OK;
    if (n_dirs > STORE_MAX_PATHS)
        return st_fail(err, ST_EINVAL, "probe: at most %d store directories", STORE_MAX_PATHS);
    for (int p = 0; p < n_dirs && s == ST_OK; p++) {
        if (snprintf(sub[p], sizeof sub[p], "%s/strata-probe-trial", dirs[p]) >= (int)sizeof sub[p])
            return st_fail(err, ST_EINVAL, "probe: store directory name too long: %s", dirs[p]);
        paths[p] = sd.paths[p] = sub[p];
        sd.n = p + 1;
        s = st_mkdir_p(sub[p], err);
    }
    if (s == ST_OK && sd.n > 0) s = store_remove(&sd, err);   /* what an interrupted probe left */
    if (s != ST_OK) return s;
    if (n_dirs > 0) {
        oc.store_paths = paths;
        oc.n_store_paths = n_dirs;
    }
    const size_t n_tok = (size_t)sc->micro_batches * (size_t)sc->B * (size_t)(sc->T + 1);
    int32_t *tokens = malloc(n_tok * sizeof *tokens);
    if (!tokens) return st_fail(err, ST_ENOMEM, "probe: out of memory for the trial's tokens");
    st_rng r;
    st_rng_seed(&r, 11);
    for (size_t i = 0; i < n_tok; i++) tokens[i] = (int32_t)(st_rng_next(&r) % (uint64_t)sc->model.vocab_size);
    offload_trainer *t = NULL;
    s = offload_trainer_create(&t, &oc, NULL, err);
    train_step_stats ss;
    offload_stats a;
    double secs;
    if (s == ST_OK) s = offload_trainer_step(t, tokens, &ss, err);
    /* each timed step's time and work (its time less its waits): the medians, since one step that this
       machine stalls (a tenant beside it, the first touch of a buffer) would move a mean by tens of percent */
    double *step = calloc(2 * (size_t)cfg->trial_steps, sizeof *step), *work = step + cfg->trial_steps;
    int timed = 0;
    if (!step && s == ST_OK) s = st_fail(err, ST_ENOMEM, "probe: out of memory for the trial's steps");
    if (s == ST_OK) {
        offload_trainer_stats(t, &a);
        offload_stats prev = a, cur;
        for (int i = 1; i < cfg->trial_steps && s == ST_OK; i++) {
            if ((s = offload_trainer_step(t, tokens, &ss, err)) != ST_OK) break;
            offload_trainer_stats(t, &cur);
            const double waits = (cur.compute_io_s - prev.compute_io_s) +
                                 (cur.optimizer_wait_s - prev.optimizer_wait_s) + (cur.comm_s - prev.comm_s);
            step[timed] = cur.step_s - prev.step_s;
            work[timed++] = cur.step_s - prev.step_s - waits;
            prev = cur;
        }
    }
    if (s == ST_OK) {
        out->n_paths = offload_trainer_path_io(t, out->io, &secs);   /* the timed steps' */
        out->step_s = st_median(step, timed);
        out->work_s = st_median(work, timed);
    }
    offload_trainer_free(t);
    free(step);
    free(tokens);
    if (sd.n > 0) {
        st_error e2 = {0};
        st_status rs = store_remove(&sd, &e2);
        for (int p = 0; p < sd.n; p++) rmdir(sub[p]);
        if (s == ST_OK && rs != ST_OK) s = st_fail(err, rs, "%s", e2.msg);
    }
    return s;
}

/* The trial slice's placement on the drives: the optimizer's state of every unit but the embedding
 * (probe_trial says why). */
static void trial_on_drives(sim_config *sc) {
    const int units = gpt_num_units(&sc->model);
    sc->place.optim = (double)(units - 1) / units;
}

/* The longer in-memory slice: up to this many times the first's blocks (its time grows with them). */
#define TRIAL_LONG_TIMES 6

/* block_factor: what makes the simulator's work on the compute thread for sc the given work. The blocks'
 * tasks scale with it and the rest (the head, the embedding, timed as the executor runs them) does not;
 * the contention with AdamW beside them follows it only roughly, so a few rounds. */
static st_status fit_block_factor(const hw_desc *hw, const sim_config *sc, double work, double *factor,
                                  st_error *err) {
    hw_desc h = *hw;
    double f = 1;
    for (int round = 0; round < 3; round++) {
        sim_result r1, r2;
        st_status s;
        h.block_factor = f;
        if ((s = sim_run(&h, sc, &r1, err)) != ST_OK) return s;
        h.block_factor = f + 1;
        if ((s = sim_run(&h, sc, &r2, err)) != ST_OK) return s;
        const double blocks = r2.compute_s - r1.compute_s, rest = r1.compute_s - f * blocks;
        f = blocks > 0 ? (work - r1.contention_s - rest) / blocks : 1;
        f = f < 0.25 ? 0.25 : f > 4 ? 4 : f;
    }
    *factor = f;
    return ST_OK;
}

/* The longer in-memory slice, its work the one the whole model is fitted to: run twice, and when the two
 * differ by more than LONG_TRIAL_AGREE a third time, each of half the probe's trial steps. Of 26 such trials
 * of gpt2-350m on this machine, 3 took 1.7-2.0x their median and 3 more 1.15-1.3x, every step of them (a
 * whole process slow, not one stalled step, which the median of its steps already drops), and a description
 * fitted to one set the compute-bound runs' predictions off by about as much; trials that agree give their
 * mean, and of three the median (docs/BENCHMARKS.md). */
#define LONG_TRIAL_AGREE 0.10

static st_status long_trial_work(const hw_probe_config *cfg, const sim_config *lc, double *work, st_error *err) {
    /* each of half the steps, so that two cost what one did (at gpt2-124m's 4 x 256 a step of the whole
       model takes 7 s): a slow trial is slow in every step, and a few show it */
    hw_probe_config half = *cfg;
    half.trial_steps = (cfg->trial_steps + 1) / 2 < TRIAL_MIN_STEPS ? TRIAL_MIN_STEPS : (cfg->trial_steps + 1) / 2;
    double w[3];
    int n = 0;
    while (n < 3) {
        say(cfg, "the executor on %d blocks, all state in memory, %d steps (trial %d)...", lc->model.n_layer,
            half.trial_steps, n + 1);
        trial_result t;
        st_status s = trial_run(&half, lc, NULL, 0, &t, err);
        if (s != ST_OK) return s;
        w[n++] = t.work_s;
        say(cfg, "  %.4f s a step of work", t.work_s);
        if (n == 2) {
            const double lo = fmin(w[0], w[1]), hi = fmax(w[0], w[1]);
            if (hi <= lo * (1 + LONG_TRIAL_AGREE)) break;
            say(cfg, "  the two differ by %.0f%%: a third", 100 * (hi / lo - 1));
        }
    }
    *work = st_median(w, n);   /* of two the mean */
    return ST_OK;
}

/* The in-memory trials, which set block_factor: the slice sc, then a longer one where a quarter of memory
 * holds it. One slice's work is its blocks' and a fixed part (the head, the embedding, AdamW's contention
 * on them); fitting the factor to one short slice charges every error in the fixed part to its few
 * blocks, which the whole model then repeats many times (gpt2-350m at 1 x 64: 4 blocks overstated the
 * whole model's work by 15%). The two slices' difference is the work per block, and the factor is fitted to
 * the whole model's work that it extrapolates to. */
static st_status fit_trial_in_memory(const hw_probe_config *cfg, hw_desc *hw, const sim_config *sc,
                                     st_error *err) {
    const int layers = sc->model.n_layer;
    say(cfg, "the executor itself on %d block%s of %s at %d x %d, %d steps, all state in memory...", layers,
        layers == 1 ? "" : "s", cfg->model, cfg->B, cfg->T, cfg->trial_steps);
    trial_result tr;
    st_status s = trial_run(cfg, sc, NULL, 0, &tr, err);
    hw_desc rates = *hw;
    rates.block_factor = 1;
    sim_result r;
    if (s == ST_OK) s = sim_run(&rates, sc, &r, err);
    if (s != ST_OK) return s;
    hw->probe.trial_layers = layers;
    hw->probe.trial_work_s = tr.work_s;
    hw->probe.trial_predicted_work_s = r.compute_s + r.contention_s;
    say(cfg, "  %.3f s a step of work on the compute thread, %.3f s predicted from the rates above", tr.work_s,
        hw->probe.trial_predicted_work_s);

    sim_config whole, fit = *sc;
    double work = tr.work_s;
    int long_layers;
    if ((s = trial_config(cfg, INT_MAX, &whole, err)) != ST_OK ||
        (s = trial_blocks(cfg, hw, layers * TRIAL_LONG_TIMES, &long_layers, err)) != ST_OK)
        return s;
    if (long_layers > layers) {
        sim_config lc;
        double long_work;
        if ((s = trial_config(cfg, long_layers, &lc, err)) != ST_OK) return s;
        if ((s = long_trial_work(cfg, &lc, &long_work, err)) != ST_OK) return s;
        hw->probe.trial_long_layers = long_layers;
        hw->probe.trial_long_work_s = long_work;
        const double per_block = (long_work - tr.work_s) / (long_layers - layers);
        if (per_block > 0) {
            fit = whole;
            work = tr.work_s + (whole.model.n_layer - layers) * per_block;
            say(cfg, "  %.3f s a step: %.4f s per block, %.3f s for the whole model's %d", long_work, per_block, work,
                whole.model.n_layer);
        } else {   /* noise larger than the blocks' difference: the longer slice alone */
            fit = lc;
            work = long_work;
            say(cfg, "  %.3f s a step, no more than the shorter slice's: the factor from this slice alone", long_work);
        }
    }
    if ((s = fit_block_factor(hw, &fit, work, &hw->block_factor, err)) != ST_OK) return s;
    say(cfg, "  the blocks' tasks %.3fx the rates'", hw->block_factor);
    return ST_OK;
}

/* The executor itself on a slice of the probe's model: all state in memory
 * (and on a longer slice), which sets block_factor (the blocks' share of the
 * compute thread's measured work over what the rates predict for them: the
 * bookkeeping between tasks and kernels over many units' weights, which
 * timing one block leaves out; fit_trial_in_memory), then, with store
 * directories, the blocks' optimizer state on them: each path's
 * read and write rates while its transfers were in flight, into disk (which
 * the caller zeroes: 0 stays where nothing was measured; use_trial_disk puts
 * them in the description). With ssd_only, the second alone. */
static st_status probe_trial(const hw_probe_config *cfg, hw_desc *hw, int ssd_only, hw_ssd disk[HW_MAX_SSD],
                             st_error *err) {
    int layers;
    st_status s = trial_blocks(cfg, hw, cfg->trial_layers, &layers, err);
    if (s != ST_OK) return s;
    if (layers < 1) {
        say(cfg, "the executor's trial run: skipped (one block of %s needs more than a quarter of memory)", cfg->model);
        return ST_OK;
    }
    sim_config sc;
    if ((s = trial_config(cfg, layers, &sc, err)) != ST_OK) return s;
    trial_result tr;
    if (!ssd_only && (s = fit_trial_in_memory(cfg, hw, &sc, err)) != ST_OK) return s;
    if (cfg->n_ssd < 1) return ST_OK;
    /* The optimizer's state of every unit but the embedding on the drives: the embedding's is the largest
       unit's and takes little compute, so in a slice of a few blocks it would make the drives, not compute,
       set the pace; without it the slice streams about as many bytes per second of compute as the whole
       model does, and the drives serve bursts beside compute as in most runs that stream the optimizer. */
    sim_config ssd = sc;
    trial_on_drives(&ssd);
    say(cfg, "the executor again with the blocks' optimizer state on the store director%s...",
        cfg->n_ssd == 1 ? "y" : "ies");
    if ((s = trial_run(cfg, &ssd, cfg->ssd_dirs, cfg->n_ssd, &tr, err)) != ST_OK) return s;
    hw->probe.trial_layers = layers;
    hw->probe.trial_ssd_step_s = tr.step_s;
    hw->probe.trial_ssd_work_s = tr.work_s;
    for (int p = 0; p < tr.n_paths && p < HW_MAX_SSD; p++) {
        const io_path_counters *c = &tr.io[p];
        /* a rate from less than 10 ms of transfers says little: the test file's pass stands then */
        if (c->read_busy_s < 0.01 || c->write_busy_s < 0.01 || !c->bytes_read || !c->bytes_written) continue;
        disk[p].read_gbps = (double)c->bytes_read / c->read_busy_s / 1e9;
        disk[p].write_gbps = (double)c->bytes_written / c->write_busy_s / 1e9;
        say(cfg, "  %s: read %.3f GB/s, write %.3f GB/s while busy; %.3f s a step", cfg->ssd_dirs[p], disk[p].read_gbps,
            disk[p].write_gbps, tr.step_s);
    }
    return ST_OK;
}

/* The trial on the drives (run in this probe) predicted on the finished description: the simulator's error on
 * the executor's own slice with its state streaming (progress only: a check to read beside the description,
 * not fitted). */
static void say_trial_prediction(const hw_probe_config *cfg, const hw_desc *hw) {
    if (!(hw->probe.trial_ssd_step_s > 0) || hw->probe.trial_layers < 1) return;
    sim_config sc;
    sim_result r;
    st_error e = {0};
    if (trial_config(cfg, hw->probe.trial_layers, &sc, &e) != ST_OK) return;
    trial_on_drives(&sc);
    if (sim_run(hw, &sc, &r, &e) != ST_OK) return;
    const double m = hw->probe.trial_ssd_step_s;
    say(cfg, "the trial on the drives: %.3f s a step measured, %.3f s predicted from this description (%+.1f%%)", m,
        r.iter_s, 100 * (r.iter_s - m) / m);
}

/* The trial's rates as each path's read and write (hw_ssd_use_store_rates). */
static void use_trial_disk(const hw_probe_config *cfg, hw_desc *hw, const hw_ssd disk[HW_MAX_SSD]) {
    for (int p = 0; p < hw->n_ssd; p++) {
        hw_ssd *d = &hw->ssd[p];
        if (!(disk[p].read_gbps > 0 && disk[p].write_gbps > 0)) continue;
        hw_ssd_use_store_rates(d, disk[p].read_gbps, disk[p].write_gbps);
        say(cfg, "%s: read %.3f GB/s, write %.3f GB/s as the trial's store moved its bytes (the test file's cycle: "
            "%.3f, %.3f); together %.3f + %.3f GB/s in proportion", d->path, d->read_gbps, d->write_gbps,
            d->bench_read_gbps, d->bench_write_gbps, d->mixed_read_gbps, d->mixed_write_gbps);
    }
}

st_status hw_probe(const hw_probe_config *cfg, hw_desc *out, st_error *err) {
    hw_desc hw;
    memset(&hw, 0, sizeof hw);
    if (cfg->trial_steps != 0 && (cfg->trial_steps < TRIAL_MIN_STEPS || cfg->trial_layers < 1))
        return st_fail(err, ST_EINVAL, "probe: a trial run needs at least %d steps and 1 block (0 steps: none)",
                       TRIAL_MIN_STEPS);
    if (cfg->base) {   /* the SSD paths again (and compute beside them), everything else as it was */
        hw = *cfg->base;
        if (cfg->n_ssd < 1) return st_fail(err, ST_EINVAL, "probe: updating a description needs store directories");
        if (cfg->ssd_bytes < 8192 || cfg->ssd_bytes % 4096)
            return st_fail(err, ST_EINVAL, "probe: the SSD test size must be a multiple of 4096 and at least 8192");
        memset(hw.ssd, 0, sizeof hw.ssd);
        hw.n_ssd = 0;
        hw.probe.io_kernel_s_per_gb = 0;
        /* the test file's pass, then the trial's run on the SSD again at the shape and slice the
           description's was run at */
        hw_ssd disk[HW_MAX_SSD] = {0};
        st_status s = probe_ssd(cfg, &hw, err);
        hw_probe_config tc = *cfg;   /* at the shape the description's compute was measured at */
        tc.model = hw.probe.model;
        tc.B = hw.probe.B;
        tc.T = hw.probe.T;
        tc.trial_layers = hw.probe.trial_layers;
        if (s == ST_OK && hw.probe.model[0] && hw.probe.B > 0 && hw.probe.T > 0) s = probe_io_contention(&tc, &hw, err);
        const double kept_step_s = hw.probe.trial_ssd_step_s;   /* the description's, unless the trial runs now */
        hw.probe.trial_ssd_step_s = 0;
        if (s == ST_OK && cfg->trial_steps > 0 && hw.probe.trial_layers > 0 && hw.probe.model[0])
            s = probe_trial(&tc, &hw, 1, disk, err);
        const int trial_ran = hw.probe.trial_ssd_step_s > 0;
        if (!trial_ran) hw.probe.trial_ssd_step_s = kept_step_s;
        use_trial_disk(cfg, &hw, disk);
        set_io_cpu(&hw);
        if (s == ST_OK && trial_ran) say_trial_prediction(&tc, &hw);
        if (s == ST_OK) s = hw_check(&hw, "probe", err);
        if (s == ST_OK) *out = hw;
        return s;
    }
    if (cfg->n_ssd > 0 && (cfg->ssd_bytes < 8192 || cfg->ssd_bytes % 4096))
        return st_fail(err, ST_EINVAL, "probe: the SSD test size must be a multiple of 4096 and at least 8192");
    if (cfg->adamw_elements < 1024 || cfg->adamw_elements > (1ull << 32))
        return st_fail(err, ST_EINVAL, "probe: AdamW elements %llu not in [1024, 2^32]",
                       (unsigned long long)cfg->adamw_elements);
    if (cfg->name) {
        snprintf(hw.name, sizeof hw.name, "%s", cfg->name);
    } else {
        char host[64] = "";
        gethostname(host, sizeof host - 1);
        snprintf(hw.name, sizeof hw.name, "probe-%s", host[0] ? host : "localhost");
    }
    hw.backend = HW_BACKEND_CPU;
    hw.cores = omp_get_num_procs();
    double load[1];
    if (getloadavg(load, 1) == 1 && load[0] > 0.5 * hw.cores)
        say(cfg, "warning: the machine is busy (load %.1f on %d cores): the rates measured now are this load's, "
            "not the machine's", load[0], hw.cores);
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    hw.host_bytes = hw.device_bytes = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    hw.devices_per_node = 1;
    /* the test file's pass over each drive, compute, then the trial of the executor (whose fit needs
       compute's rates and whose store lands where the test file was, as a run's lands where the run before
       it kept its state) */
    hw_ssd disk[HW_MAX_SSD] = {0};
    st_status s = probe_ssd(cfg, &hw, err);
    if (s == ST_OK) s = probe_compute(cfg, &hw, err);
    if (s == ST_OK) s = probe_io_contention(cfg, &hw, err);
    if (s == ST_OK && cfg->trial_steps > 0) s = probe_trial(cfg, &hw, 0, disk, err);
    use_trial_disk(cfg, &hw, disk);
    set_io_cpu(&hw);
    if (s == ST_OK) say_trial_prediction(cfg, &hw);
    if (s == ST_OK) s = hw_check(&hw, "probe", err);
    if (s == ST_OK) *out = hw;
    return s;
}

/* ---- ranks ------------------------------------------------------------------------------ */

st_status hw_probe_ranks(comm *c, size_t n, int reps, hw_desc *hw, st_error *err) {
    const int N = comm_size(c), me = comm_rank(c);
    if (N < 2) return ST_OK;
    if (reps < 1 || reps > MAX_REPS) return st_fail(err, ST_EINVAL, "probe repetitions %d not in [1, %d]", reps, MAX_REPS);
    if (n < (size_t)N) return st_fail(err, ST_EINVAL, "probe: %zu elements for %d ranks", n, N);
    /* which ranks share a host */
    enum { HOST = 64 };
    char mine[HOST] = {0};
    gethostname(mine, HOST - 1);
    char *hosts = calloc((size_t)N, HOST);
    float *x = st_alloc_aligned(64, n * sizeof(float));
    float *scratch = st_alloc_aligned(64, (n / (size_t)N + 1) * (size_t)N * sizeof(float));
    st_status s = hosts && x && scratch ? ST_OK : st_fail(err, ST_ENOMEM, "probe: out of memory");
    /* every rank must take part in every collective: a rank out of memory aborts the job */
    if (s != ST_OK) comm_abort(c, 1);
    if ((s = comm_allgather(c, mine, HOST, hosts, err)) != ST_OK) goto out;
    int nodes = 0;
    for (int r = 0; r < N; r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++) seen = !strncmp(hosts + (size_t)q * HOST, hosts + (size_t)r * HOST, HOST);
        nodes += !seen;
    }
    if (N % nodes) {
        s = st_fail(err, ST_EINVAL, "probe: %d ranks on %d hosts, not as many on each (run the same number per host)", N, nodes);
        goto out;
    }
    for (size_t i = 0; i < n; i++) x[i] = (float)(i % 97) * 0.25f;
    size_t lo, hi;
    comm_shard_range(n, N, me, &lo, &hi);
    double tg[MAX_REPS], tr[MAX_REPS], tl[MAX_REPS * 8];
    for (int k = 0; k <= reps && s == ST_OK; k++) {   /* one warm-up, then the timed ones */
        if ((s = comm_barrier(c, err)) != ST_OK) break;
        double t0 = st_now();
        if ((s = comm_allgather_shards_f32(c, x, n, err)) != ST_OK) break;
        const double t1 = st_now();
        if ((s = comm_barrier(c, err)) != ST_OK) break;
        const double t2 = st_now();
        s = comm_reduce_scatter_f32(c, x, n, x + lo, scratch, err);
        const double t3 = st_now();
        for (size_t i = lo; i < hi; i++) x[i] *= 1.0f / (float)N;   /* keep the values bounded */
        if (k > 0) tg[k - 1] = t1 - t0, tr[k - 1] = t3 - t2;
    }
    for (int k = 0; k < 8 * reps + 1 && s == ST_OK; k++) {
        double v[2] = {1, 2};
        const double t0 = st_now();
        s = comm_allreduce_sum_f64(c, v, 2, err);
        if (k > 0) tl[k - 1] = st_now() - t0;
    }
    if (s != ST_OK) goto out;
    /* rank 0's figures: the bytes it received per second */
    comm_shard_range(n, N, 0, &lo, &hi);
    const double g = st_median(tg, reps), rsc = st_median(tr, reps), lat = st_median(tl, 8 * reps);
    const double per_rank = (double)(n - (hi - lo)) * 4 / g / 1e9;
    hw->probe.ranks_allgather_gbps = per_rank;
    hw->probe.ranks_reduce_scatter_gbps = (double)(N - 1) * (double)(hi - lo) * 4 / rsc / 1e9;
    hw->nodes = nodes;
    hw->ranks_per_node = N / nodes;
    if (nodes == 1) {
        hw->shm_gbps = per_rank * hw->ranks_per_node;
        hw->shm_latency_s = lat;
    } else {   /* the network's rate over the ranks of a node (shared memory not told apart) */
        hw->network_gbps = per_rank * hw->ranks_per_node;
        hw->network_latency_s = lat;
        if (hw->ranks_per_node > 1 && !(hw->shm_gbps > 0)) hw->shm_gbps = hw->network_gbps;
    }
out:
    free(hosts);
    st_free_aligned(x);
    st_free_aligned(scratch);
    return s;
}
