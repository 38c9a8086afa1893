/* planner.c - searches configurations by simulating them (strata/planner.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/planner.h"

plan_request plan_default_request(void) {
    plan_request q;
    memset(&q, 0, sizeof q);
    q.precision = GPT_MIXED_BF16;
    q.clipping = 1;
    q.schedule = -1;
    q.max_micro_batches = 64;
    q.alpha = -1;
    q.grad_buffers = -1;
    q.n_best = 5;
    return q;
}

static st_status check_request(const hw_desc *hw, const plan_request *q, st_error *err) {
    gpt_config model = q->model;
    st_status s = gpt_config_check(&model, err);
    if (s != ST_OK) return s;
    if (q->T < 1 || q->T > q->model.n_ctx)
        return st_fail(err, ST_EINVAL, "plan: sequence length %d must be in [1, %d] (the model's context)", q->T,
                       q->model.n_ctx);
    if (q->global_batch < 1) return st_fail(err, ST_EINVAL, "plan: global batch %d must be at least 1", q->global_batch);
    if (q->n_best < 1 || q->n_best > PLAN_MAX_BEST)
        return st_fail(err, ST_EINVAL, "plan: n_best %d must be in [1, %d]", q->n_best, PLAN_MAX_BEST);
    if (q->max_micro_batches < 1)
        return st_fail(err, ST_EINVAL, "plan: max_micro_batches %d must be at least 1", q->max_micro_batches);
    if (q->micro_batches < 0 || (q->micro_batches > 0 && q->global_batch % q->micro_batches))
        return st_fail(err, ST_EINVAL, "plan: %d micro-batches do not divide the global batch %d", q->micro_batches,
                       q->global_batch);
    if (q->alpha > 1 || q->alpha != q->alpha) return st_fail(err, ST_EINVAL, "plan: alpha %g must be at most 1", q->alpha);
    if (q->grad_buffers > 0 && (q->grad_buffers < LAYOUT_GRAD_BLOCK_BUFFERS || q->grad_buffers > LAYOUT_GRAD_BUFFERS - 1))
        return st_fail(err, ST_EINVAL, "plan: %d block gradient buffers: from %d to %d", q->grad_buffers,
                       LAYOUT_GRAD_BLOCK_BUFFERS, LAYOUT_GRAD_BUFFERS - 1);
    if (q->schedule != -1 && q->schedule != SCHED_VERTICAL && q->schedule != SCHED_HORIZONTAL)
        return st_fail(err, ST_EINVAL, "plan: unknown schedule %d", q->schedule);
    if (hw->n_ssd < 1 && (q->mem_host || q->mem_device))
        return st_fail(err, ST_EINVAL, "plan: the hardware description has no SSD to offload to");
    return ST_OK;
}

/* The configuration's memory (sim_memory_need: the executor's accounting on
 * a CPU backend, the device's own on a GPU one) within the budgets (the
 * machine's when 0). */
static int fits(const hw_desc *hw, const plan_request *q, const sim_config *c, layout_memory *m) {
    int fits_device, fits_host;
    sim_memory_need(hw, c, m, &fits_device, &fits_host);
    if (!q->mem_host && !q->mem_device) return fits_device && fits_host;
    const uint64_t dev = q->mem_device ? q->mem_device : hw->device_bytes;
    const uint64_t host = q->mem_host ? q->mem_host : hw->host_bytes;
    return m->device <= dev && m->host <= host;
}

/* placement_fills' test: the candidate with placement p fits. */
typedef struct fill_ctx {
    const hw_desc *hw;
    const plan_request *q;
    sim_config c;
} fill_ctx;

static int placement_fits(placement p, void *ctx) {
    fill_ctx *f = ctx;
    sim_config c = f->c;
    c.place = p;
    layout_memory m;
    return fits(f->hw, f->q, &c, &m);
}

/* Keeps out->best sorted by iteration time, then by SSD traffic. */
static void keep(plan_result *out, int n_best, const plan_choice *c) {
    /* the runner-up: the fastest of another placement than the best's */
    if (out->n_best > 0) {
        const plan_choice *best = &out->best[0];
        const int same = !memcmp(&best->config.place, &c->config.place, sizeof(placement));
        if (c->result.iter_s < best->result.iter_s) {
            if (!same) out->runner_up = *best, out->has_runner_up = 1;
        } else if (!same && (!out->has_runner_up || c->result.iter_s < out->runner_up.result.iter_s)) {
            out->runner_up = *c, out->has_runner_up = 1;
        }
    }
    const uint64_t bytes = c->result.total_read + c->result.total_written;
    int at = out->n_best;
    while (at > 0) {
        const sim_result *o = &out->best[at - 1].result;
        const uint64_t ob = o->total_read + o->total_written;
        if (o->iter_s < c->result.iter_s || (o->iter_s == c->result.iter_s && ob <= bytes)) break;
        at--;
    }
    if (at >= n_best) return;
    int last = out->n_best < n_best ? out->n_best : n_best - 1;
    memmove(&out->best[at + 1], &out->best[at], sizeof out->best[0] * (size_t)(last - at));
    out->best[at] = *c;
    if (out->n_best < n_best) out->n_best++;
}

/* The candidates to simulate, in the search's order: their configurations
 * only (a result is five times the size, and only the best few are kept). */
typedef struct candidates {
    sim_config *c;
    int n, cap;
} candidates;

static st_status add_candidate(candidates *cs, const sim_config *c, st_error *err) {
    if (cs->n == cs->cap) {
        const int cap = cs->cap ? 2 * cs->cap : 256;
        sim_config *m = realloc(cs->c, sizeof *m * (size_t)cap);
        if (!m) return st_fail(err, ST_ENOMEM, "plan: out of memory for %d candidates", cap);
        cs->c = m, cs->cap = cap;
    }
    cs->c[cs->n++] = *c;
    return ST_OK;
}

#define SIMULATE_CHUNK 256   /* candidates simulated side by side before they are ranked */

/* Simulates every candidate, a chunk at a time on all the cores (each
 * simulation is a pure function of its configuration), ranking each chunk
 * in the search's order: the same result as one after another. The first
 * failure in that order is the error. */
static st_status simulate_all(const hw_desc *hw, const plan_request *q, const candidates *cs, plan_result *out,
                              st_error *err) {
    plan_choice *ch = malloc(sizeof *ch * SIMULATE_CHUNK);
    st_status *status = malloc(sizeof *status * SIMULATE_CHUNK);
    st_error *errs = calloc(SIMULATE_CHUNK, sizeof *errs);
    st_status s = ST_OK;
    if (!ch || !status || !errs) s = st_fail(err, ST_ENOMEM, "plan: out of memory for the candidates' results");
    int done = 0;
    for (int at = 0; at < cs->n && s == ST_OK; at += SIMULATE_CHUNK) {
        const int n = cs->n - at < SIMULATE_CHUNK ? cs->n - at : SIMULATE_CHUNK;
#pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < n; i++) {
            memset(&ch[i], 0, sizeof ch[i]);
            ch[i].config = cs->c[at + i];
            status[i] = sim_run(hw, &ch[i].config, &ch[i].result, &errs[i]);
            if (status[i] == ST_OK) status[i] = sim_roofline_bound(hw, &ch[i].config, &ch[i].roofline, &errs[i]);
            if (q->progress) {
#pragma omp critical(plan_progress)
                q->progress(q->progress_ctx, ++done, cs->n);
            }
        }
        for (int i = 0; i < n && s == ST_OK; i++) {
            if ((s = status[i]) != ST_OK) {
                if (err) *err = errs[i];
                break;
            }
            out->simulated++;
            keep(out, q->n_best, &ch[i]);
        }
    }
    free(ch), free(status), free(errs);
    return s;
}

/* Some step of c's lists defers to the next forward. */
static int alpha_defers(const hw_desc *hw, const sim_config *c) {
    const sched_params p = sim_list_params(hw, c);
    return sched_defers(&p);
}

st_status plan_search(const hw_desc *hw, const plan_request *q, plan_result *out, st_error *err) {
    memset(out, 0, sizeof *out);
    st_status s = check_request(hw, q, err);
    if (s != ST_OK) return s;
    candidates cs = {0};
    static const double alphas[] = {0.0, 0.1, 0.25, 0.5, 1.0};
    const int alpha_count = (int)(sizeof alphas / sizeof alphas[0]);
    const int gbufs[2] = {q->grad_buffers >= 0 ? q->grad_buffers : LAYOUT_GRAD_BLOCK_BUFFERS, LAYOUT_GRAD_BLOCK_BUFFERS_MORE};
    const int n_gbuf = q->grad_buffers >= 0 ? 1 : 2;
    uint64_t least_device = UINT64_MAX, least_host = UINT64_MAX;
    const int placements = hw->n_ssd > 0 ? PLACEMENT_COUNT : 1;
    int parts[PLACE_KINDS];
    layout_parts(&q->model, parts);
    for (int k = 0; k < 2; k++) {
        if (q->schedule != -1 && q->schedule != k) continue;
        for (int M = 1; M <= q->global_batch && M <= q->max_micro_batches; M++) {
            if (q->global_batch % M || (q->micro_batches && M != q->micro_batches)) continue;
            /* with clipping, vertical defers every step: alpha does not change its list */
            const int n_alpha = q->alpha >= 0 || (q->clipping && k == SCHED_VERTICAL) ? 1 : alpha_count;
            for (int a = 0; a < n_alpha; a++)
            for (int gb = 0; gb < n_gbuf; gb++) {
                placement fitting[PLACEMENT_COUNT];
                placement tried[PLACEMENT_COUNT * PLACEMENT_FILLS];   /* of this schedule, M, alpha, buffers */
                int n_fitting = 0, n_tried = 0;
                for (int p = 0; p < placements; p++) {
                    /* more gradient buffers only where they can help: gradients on the SSD, steps that stream */
                    const placement whole = placement_at(p);
                    if (gbufs[gb] != gbufs[0] && !(whole.grads > 0 && (whole.optim > 0 || whole.weights > 0))) continue;
                    sim_config c = sim_default_config();
                    c.model = q->model;
                    c.B = q->global_batch / M, c.T = q->T, c.micro_batches = M;
                    c.precision = q->precision;
                    c.schedule = (sched_kind)k;
                    c.alpha = q->alpha >= 0 ? q->alpha : alphas[a];
                    c.clipping = q->clipping;
                    c.grad_buffers = gbufs[gb];
                    c.place = whole;
                    /* alpha above 0 where the lists defer nothing (on the CPU backend, steps all in
                     * memory: sched_deferred_share) is alpha 0's list again; fills only take
                     * more of the state into memory */
                    if (a > 0 && q->alpha < 0 && !alpha_defers(hw, &c)) continue;
                    layout_memory m;
                    const int ok = fits(hw, q, &c, &m);
                    out->considered++;
                    if (m.device < least_device) least_device = m.device;
                    if (m.host < least_host) least_host = m.host;
                    if (!ok) continue;
                    /* a whole placement that contains a fitting one only adds traffic; with memory
                     * filled by its kinds' parts it is another trade-off (some of one kind on the SSD
                     * to keep more of another in memory), tried in every order */
                    int minimal = 1;
                    for (int f = 0; f < n_fitting && minimal; f++)
                        if (placement_within(fitting[f], c.place)) minimal = 0;
                    fitting[n_fitting++] = c.place;
                    placement filled[PLACEMENT_FILLS];
                    fill_ctx fc = {.hw = hw, .q = q, .c = c};
                    if (q->whole_placements && !minimal) continue;
                    const int n_filled = q->whole_placements ? (filled[0] = c.place, 1)
                                                             : placement_fills(c.place, parts, placement_fits, &fc,
                                                                               filled);
                    for (int r = 0; r < n_filled; r++) {
                        sim_config cand = c;
                        cand.place = filled[r];
                        int seen = !minimal && !memcmp(&cand.place, &c.place, sizeof(placement));
                        for (int t = 0; t < n_tried && !seen; t++)
                            seen = !memcmp(&tried[t], &cand.place, sizeof(placement));
                        if (seen || (a > 0 && q->alpha < 0 && !alpha_defers(hw, &cand))) continue;
                        out->considered += memcmp(&cand.place, &c.place, sizeof(placement)) != 0;   /* a fill */
                        tried[n_tried++] = cand.place;
                        if ((s = add_candidate(&cs, &cand, err)) != ST_OK) {
                            free(cs.c);
                            return s;
                        }
                    }
                }
            }
        }
    }
    s = simulate_all(hw, q, &cs, out, err);
    free(cs.c);
    if (s != ST_OK) return s;
    if (out->n_best == 0) {
        char d[32], h[32];
        return st_fail(err, ST_ENOMEM,
                       "plan: no configuration fits the memory budgets: the smallest device working set any "
                       "candidate needs is %s, the smallest host share %s",
                       st_format_bytes((double)least_device, d, sizeof d), st_format_bytes((double)least_host, h, sizeof h));
    }
    return ST_OK;
}
