/* layout.c - one picture of a run (strata/layout.h): parts, segments, the
 * buffer plan and the store traffic of each task. */
#include <stdlib.h>
#include <string.h>

#include "strata/comm.h"
#include "strata/layout.h"

sched_params layout_sched_params(const layout_params *p) {
    return (sched_params){.kind = p->schedule, .n_units = gpt_num_units(&p->model),
                          .separate_head = gpt_head_unit(&p->model) != 0, .micro_batches = p->micro_batches,
                          .alpha = p->alpha, .clipping = p->clipping, .place = p->place,
                          .ranks = p->ranks, .defer_in_memory = p->defer_in_memory || p->separate_device,
                          .separate_device = p->separate_device};
}

static const char *const opt_io_names[OPT_IO_ORDERS] = {"phased", "interleaved", "alternating"};

const char *opt_io_order_name(opt_io_order o) { return o >= 0 && o < OPT_IO_ORDERS ? opt_io_names[o] : "?"; }

st_status opt_io_order_parse(const char *s, opt_io_order *out, st_error *err) {
    for (int o = 0; o < OPT_IO_ORDERS; o++)
        if (s && !strcmp(s, opt_io_names[o])) return *out = (opt_io_order)o, ST_OK;
    return st_fail(err, ST_EINVAL, "optimizer I/O order '%s': must be phased, interleaved or alternating", s ? s : "");
}

uint64_t layout_io_bytes(uint64_t bytes) { return store_padded_bytes(bytes) + 4096; }

/* with several ranks the blocks' gradient buffers hold the one being added
 * into and the sums in flight (offload_grads.c) */
_Static_assert(LAYOUT_GRAD_BLOCK_BUFFERS >= 1 + LAYOUT_REDUCE_SLOTS, "a block gradient buffer per sum in flight");
_Static_assert(LAYOUT_GRAD_BLOCK_BUFFERS_MORE <= LAYOUT_GRAD_BUFFERS - 1, "within the buffers' arrays");

static uint64_t round_up(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

static void plan(run_layout *l, layout_buffer_id id, const char *what, layout_tier tier, layout_use use, int count,
                 uint64_t bytes, int io) {
    l->buf[id] = (layout_buffer){.what = what, .tier = tier, .use = use, .count = count,
                                 .bytes = io ? layout_io_bytes(bytes) : bytes, .io = io};
}

void layout_parts(const gpt_config *c, int parts[PLACE_KINDS]) {
    const sched_params sp = {.n_units = gpt_num_units(c), .separate_head = gpt_head_unit(c) != 0};
    sched_parts_all(&sp, parts);
}

int layout_on_ssd(const run_layout *l, place_kind k, int i) {
    return placement_on_ssd(l->p.place, k, i, sched_parts(&l->sched, k));
}

int layout_opt_lane(const run_layout *l, int u) {
    return sched_unit_streams(&l->sched, u) ? LAYOUT_LANE_SSD : LAYOUT_LANE_HOST;
}

size_t layout_memory_elems(const run_layout *l, place_kind k) {
    const int units = placement_memory_units(l->p.place, k, l->n_units);
    return units >= l->n_units ? l->n_local : l->units[units].local;
}

size_t layout_host_index(const run_layout *l, int u, size_t e) { return l->units[u].local + (e - l->units[u].lo); }

size_t layout_grad_shard_area(const run_layout *l) {
    return l->ranks > 1 ? (size_t)round_up(l->max_shard, 1024) : 0;
}

/* Every buffer the executor allocates for this configuration. */
static void plan_buffers(run_layout *l) {
    const layout_params *p = &l->p;
    const gpt_config *c = &p->model;
    const placement pl = p->place;
    const uint64_t M = (uint64_t)p->micro_batches, NC = l->act_elems, wsz = l->weight_size;
    const uint64_t seg = l->segment, max_unit = l->max_unit;
    uint64_t scratch = gpt_block_scratch_numel(c, p->B, p->T), head = gpt_head_scratch_numel(c, p->B, p->T);
    if (head > scratch) scratch = head;
    const int mixed = wsz == 2, sep = p->separate_device;
    /* what memory keeps of each kind: a prefix of the parameter vector (units
     * from 0), or the checkpoints of the last blocks */
    const uint64_t mem_weights = layout_memory_elems(l, PLACE_WEIGHTS), mem_optim = layout_memory_elems(l, PLACE_OPTIM);
    const uint64_t mem_grads = layout_memory_elems(l, PLACE_GRADS);
    const int ssd_weights = pl.weights > 0, ssd_optim = pl.optim > 0, ssd_acts = pl.acts > 0;
    const int n_acts = sched_parts(&l->sched, PLACE_ACTS);
    const uint64_t mem_acts = (uint64_t)(n_acts - placement_units(pl, PLACE_ACTS, n_acts));
    /* the end units' gradient buffer (gradients on the SSD): the embedding
     * unit's, and a head unit's, which is done with it before the
     * embedding's backward starts */
    const int head_unit = gpt_head_unit(c);
    /* several ranks: compute adds every unit's gradient into these buffers
     * too, and memory keeps only the rank's shards of the sums */
    const int sharded = l->ranks > 1;
    uint64_t end_grads = sharded || layout_on_ssd(l, PLACE_GRADS, 0) ? l->units[0].n : 0;
    if ((sharded || layout_on_ssd(l, PLACE_GRADS, head_unit)) && l->units[head_unit].n > end_grads)
        end_grads = l->units[head_unit].n;
    /* the blocks' shared buffers, when a block is on the SSD (the last is the first to go) */
    const int block_grads_ssd = sharded || layout_on_ssd(l, PLACE_GRADS, c->n_layer);
    const uint64_t shard_area = layout_grad_shard_area(l);
    /* I/O buffers that compute reads are device memory on a unified backend,
     * host memory (and copied) on a separate device */
    const layout_tier io_tier = sep ? LAYOUT_HOST : LAYOUT_DEVICE;
    /* the device: one unit's weights, one block's activations, the gradient
     * flowing down for every micro-batch, the tokens, checkpoint buffers */
    /* with several ranks a unit's weights are gathered from the ranks' shards into these
     * (weights in memory too), the next unit's while compute reads this one's */
    plan(l, BUF_WEIGHTS_IO, "unit weights read from the SSD or gathered", io_tier,
         sep ? USE_STAGING : USE_UNIT_WEIGHTS, ssd_weights || l->ranks > 1 ? 2 : 0, max_unit * wsz, 1);
    plan(l, BUF_UNIT_F32, "unit weights widened to f32", LAYOUT_DEVICE, USE_UNIT_WEIGHTS, mixed, max_unit * 4, 0);
    plan(l, BUF_BLOCK_ACTS, "block activations", LAYOUT_DEVICE, USE_ACTIVATIONS, 1,
         gpt_block_acts_numel(c, p->B, p->T) * 4, 0);
    plan(l, BUF_SCRATCH, "backward and head scratch", LAYOUT_DEVICE, USE_ACTIVATIONS, 1, scratch * 4, 0);
    plan(l, BUF_DACT, "gradients flowing down", LAYOUT_DEVICE, USE_ACTIVATIONS, 1, M * NC * 4, 0);
    plan(l, BUF_EVAL, "evaluation activations", LAYOUT_DEVICE, USE_ACTIVATIONS, 1, 2 * NC * 4, 0);
    plan(l, BUF_TOKENS, "input and target tokens", LAYOUT_DEVICE, USE_ACTIVATIONS, 2,
         M * (uint64_t)p->B * (uint64_t)p->T * sizeof(int32_t), 0);
    plan(l, BUF_ACT_IO, "checkpoint buffers", io_tier, sep ? USE_CHECKPOINTS : USE_ACTIVATIONS,
         ssd_acts ? LAYOUT_ACT_BUFFERS : 0, NC * 4, 1);
    plan(l, BUF_UNIT_DEVICE, "unit weights copied to the device", LAYOUT_DEVICE, USE_UNIT_WEIGHTS, sep, max_unit * wsz,
         0);
    plan(l, BUF_ACT_DEVICE, "block input and output on the device", LAYOUT_DEVICE, USE_ACTIVATIONS, sep ? 2 : 0,
         NC * 4, 0);
    plan(l, BUF_GRAD_DEVICE, "unit gradients on the device", LAYOUT_DEVICE, USE_ACTIVATIONS, sep, max_unit * 4, 0);
    plan(l, BUF_TOKENS_HOST, "tokens before their copy in", LAYOUT_HOST, USE_STAGING, sep ? 2 : 0,
         M * (uint64_t)p->B * (uint64_t)p->T * sizeof(int32_t), 0);
    /* the host: the state placed there, gradients, I/O staging */
    plan(l, BUF_MASTER, "master weights", LAYOUT_HOST, USE_OPTIMIZER_STATE, mem_optim > 0, mem_optim * 4, 0);
    plan(l, BUF_ADAM_M, "Adam first moments", LAYOUT_HOST, USE_OPTIMIZER_STATE, mem_optim > 0, mem_optim * 4, 0);
    plan(l, BUF_ADAM_V, "Adam second moments", LAYOUT_HOST, USE_OPTIMIZER_STATE, mem_optim > 0, mem_optim * 4, 0);
    plan(l, BUF_OPT_STATE_IO, "optimizer segment slots", LAYOUT_HOST, USE_OPTIMIZER_STATE,
         ssd_optim ? 3 * LAYOUT_OPT_SLOTS : 0, seg * 4, 1);
    /* fp32 with the master of every unit whose weights memory keeps also in
     * memory: the compute weights are the master itself */
    plan(l, BUF_WEIGHTS_HOST, "compute weights", LAYOUT_HOST, USE_COMPUTE_WEIGHTS,
         mem_weights > 0 && (mixed || mem_weights > mem_optim), mem_weights * wsz, 0);
    plan(l, BUF_CHECKPOINTS, "activation checkpoints", LAYOUT_HOST, USE_CHECKPOINTS, mem_acts > 0,
         mem_acts * M * NC * 4, 0);
    plan(l, BUF_GRADS, "gradients", LAYOUT_HOST, USE_GRADIENTS, mem_grads > 0, mem_grads * 4, 0);
    plan(l, BUF_GRAD_IO_EMBED, "embedding and head unit gradient buffer", LAYOUT_HOST, USE_GRADIENTS,
         end_grads > 0, (shard_area + end_grads) * 4, 1);
    plan(l, BUF_GRAD_IO_BLOCK, "block gradient buffers", LAYOUT_HOST, USE_GRADIENTS,
         block_grads_ssd ? l->grad_buffers : 0, (shard_area + gpt_unit_numel(c, 1)) * 4, 1);
    /* what the other ranks send of a unit's gradient for this rank's shard */
    plan(l, BUF_COMM_SCRATCH, "gradient pieces from the other ranks", LAYOUT_HOST, USE_GRADIENTS,
         l->ranks > 1 ? LAYOUT_REDUCE_SLOTS : 0, (uint64_t)(l->ranks - 1) * l->max_shard * 4, 0);
    plan(l, BUF_OPT_WEIGHTS_IO, "stepped segments' compute weights", LAYOUT_HOST, USE_STAGING,
         ssd_weights ? LAYOUT_OPT_SLOTS : 0, seg * wsz, 1);
    plan(l, BUF_SEGMENT_IO, "segment staging", LAYOUT_HOST, USE_STAGING, placement_any_ssd(pl) || p->has_store,
         seg * 4, 1);
    /* a fresh run's units are initialized one at a time in f32: in the
     * widening buffer where that is host memory (idle until training) */
    plan(l, BUF_INIT_UNIT, "initialization unit", LAYOUT_HOST, USE_STAGING, !p->resuming && !(mixed && !sep), max_unit * 4,
         0);
    plan(l, BUF_RESUME_IO, "commit read-back staging", LAYOUT_HOST, USE_STAGING, p->resuming ? 3 : 0, seg * 4, 1);

    layout_memory *m = &l->memory;
    memset(m, 0, sizeof *m);
    uint64_t *line[] = {&m->unit_weights, &m->activations, &m->optimizer_state, &m->compute_weights,
                        &m->checkpoints, &m->gradients, &m->staging};
    for (int i = 0; i < LAYOUT_BUFFER_COUNT; i++) *line[l->buf[i].use] += (uint64_t)l->buf[i].count * l->buf[i].bytes;
    m->device = m->unit_weights + m->activations;
    m->host = m->optimizer_state + m->compute_weights + m->checkpoints + m->gradients + m->staging;
}

void layout_free(run_layout *l) {
    if (!l) return;
    free(l->units);
    l->units = NULL;
}

st_status layout_build(const layout_params *p, run_layout *l, st_error *err) {
    memset(l, 0, sizeof *l);
    if (p->segment_elems % LAYOUT_SPLIT_ALIGN != 0)
        return st_fail(err, ST_EINVAL, "segment size %zu is not a multiple of %d elements", p->segment_elems,
                       LAYOUT_SPLIT_ALIGN);
    if (p->grad_buffers != 0 && (p->grad_buffers < LAYOUT_GRAD_BLOCK_BUFFERS || p->grad_buffers > LAYOUT_GRAD_BUFFERS - 1))
        return st_fail(err, ST_EINVAL, "%d block gradient buffers: from %d to %d", p->grad_buffers,
                       LAYOUT_GRAD_BLOCK_BUFFERS, LAYOUT_GRAD_BUFFERS - 1);
    l->p = *p;
    l->grad_buffers = layout_grad_buffers(p->grad_buffers);
    l->sched = layout_sched_params(p);
    const gpt_config *c = &p->model;
    l->n_units = gpt_num_units(c);
    l->n_params = gpt_num_params(c);
    l->ranks = p->ranks > 1 ? p->ranks : 1;
    l->rank = l->ranks > 1 ? p->rank : 0;
    if (l->rank < 0 || l->rank >= l->ranks) return st_fail(err, ST_EINVAL, "rank %d of %d", p->rank, l->ranks);
    l->act_elems = (size_t)p->B * (size_t)p->T * (size_t)c->d_model;
    l->weight_size = p->precision == GPT_MIXED_BF16 ? 2 : 4;
    if (!(l->units = calloc((size_t)l->n_units, sizeof *l->units))) return st_fail(err, ST_ENOMEM, "out of memory");
    /* part 0 of a shard ends LAYOUT_SPLIT_ALIGN elements apart from its start,
     * so that part 1 starts 4096-byte aligned in a buffer the shard starts
     * in, in bf16 and in f32 alike */
    /* one split for every unit, a streaming unit's: the store's keys then
     * do not depend on the placement, and a resume into another placement
     * finds its tensors */
    const double share = sched_streaming_share(&l->sched);
    for (int u = 0; u < l->n_units; u++) {
        layout_unit *un = &l->units[u];
        un->n = gpt_unit_numel(c, u);
        un->offset = gpt_unit_offset(c, u);
        comm_shard_range(un->n, l->ranks, l->rank, &un->lo, &un->hi);
        un->local = l->n_local;
        l->n_local += un->hi - un->lo;
        const size_t len = un->hi - un->lo;
        un->split = un->lo + (share <= 0 ? len
                              : share >= 1 ? 0
                                           : (size_t)((double)len * (1.0 - share)) / LAYOUT_SPLIT_ALIGN * LAYOUT_SPLIT_ALIGN);
        if (un->n > l->max_unit) l->max_unit = un->n;
        for (int r = 0; r < l->ranks; r++) {   /* every rank's, for buffers that receive another's */
            size_t a, b;
            comm_shard_range(un->n, l->ranks, r, &a, &b);
            if (b - a > l->max_shard) l->max_shard = b - a;
        }
    }
    l->segment = p->segment_elems ? p->segment_elems : LAYOUT_SEGMENT_DEFAULT;
    if (l->segment > round_up(l->max_shard, LAYOUT_SPLIT_ALIGN)) l->segment = round_up(l->max_shard, LAYOUT_SPLIT_ALIGN);
    for (int u = 0; u < l->n_units; u++) {
        layout_unit *un = &l->units[u];
        un->segs[0] = (un->split - un->lo + l->segment - 1) / l->segment;
        un->segs[1] = (un->hi - un->split + l->segment - 1) / l->segment;
        if ((int)(un->segs[0] + un->segs[1]) > l->max_segs) l->max_segs = (int)(un->segs[0] + un->segs[1]);
    }
    if (l->max_segs >= LAYOUT_SEGMENT_STRIDE) {
        layout_free(l);
        return st_fail(err, ST_EINVAL, "segment size %zu cuts a unit into too many segments", p->segment_elems);
    }
    plan_buffers(l);
    return ST_OK;
}

void layout_part_range(const run_layout *l, int u, int part, size_t *lo, size_t *hi) {
    *lo = part == 0 ? l->units[u].lo : l->units[u].split;
    *hi = part == 0 ? l->units[u].split : l->units[u].hi;
}

void layout_segment_range(const run_layout *l, int u, int part, size_t j, size_t *lo, size_t *hi) {
    size_t plo, phi;
    layout_part_range(l, u, part, &plo, &phi);
    *lo = plo + j * l->segment;
    *hi = *lo + l->segment < phi ? *lo + l->segment : phi;
}

store_key layout_segment_key(store_kind kind, int u, int part, size_t j) {
    return (store_key){kind, u, part * LAYOUT_SEGMENT_STRIDE + (int)j};
}

size_t layout_bound(const run_layout *l, int u, double x) {
    return x <= 0.0 ? l->units[u].lo : x >= 1.0 ? l->units[u].hi : l->units[u].split;
}

uint64_t layout_segment_bytes(const run_layout *l, int u, size_t a, size_t b, size_t elem) {
    uint64_t bytes = 0;
    for (int part = 0; part < 2; part++) {
        const size_t n = l->units[u].segs[part];
        size_t plo, phi;
        layout_part_range(l, u, part, &plo, &phi);
        if (n > 0 && plo >= a && phi <= b) {
            /* a whole part (what every caller asks for): n - 1 whole segments
             * and the rest, without a loop over segments, which the planner
             * would pay at every job of every candidate */
            size_t lo, hi;
            layout_segment_range(l, u, part, n - 1, &lo, &hi);
            bytes += (uint64_t)(n - 1) * store_padded_bytes(l->segment * elem) + store_padded_bytes((hi - lo) * elem);
            continue;
        }
        for (size_t j = 0; j < n; j++) {
            size_t lo, hi;
            layout_segment_range(l, u, part, j, &lo, &hi);
            if (lo >= a && hi <= b) bytes += store_padded_bytes((hi - lo) * elem);
        }
    }
    return bytes;
}

uint64_t layout_grad_share_bytes(const run_layout *l, int u, double x0, double x1) {
    const size_t a = layout_bound(l, u, x0), b = layout_bound(l, u, x1);
    uint64_t bytes = 0;
    for (int part = 0; part < 2; part++) {
        size_t lo, hi;
        layout_part_range(l, u, part, &lo, &hi);
        if (lo < hi && lo >= a && hi <= b) bytes += store_padded_bytes((hi - lo) * 4);
    }
    return bytes;
}

uint64_t layout_act_bytes(const run_layout *l) { return store_padded_bytes(l->act_elems * 4); }

/* A task's share of its unit's elements; a task that names no share (hi <=
 * lo, as hand-made lists may) covers the whole unit. */
static void share_of(const sched_task *t, double *lo, double *hi) {
    *lo = t->hi > t->lo ? t->lo : 0.0;
    *hi = t->hi > t->lo ? t->hi : 1.0;
}

size_t layout_share_elements(const run_layout *l, const sched_task *t) {
    if (t->unit < 0 || t->unit >= l->n_units) return 0;
    double lo, hi;
    share_of(t, &lo, &hi);
    const size_t a = layout_bound(l, t->unit, lo), b = layout_bound(l, t->unit, hi);
    return b > a ? b - a : 0;
}

void layout_task_traffic(const run_layout *l, const sched_task *t, uint64_t rd[STORE_KIND_COUNT],
                         uint64_t wr[STORE_KIND_COUNT]) {
    memset(rd, 0, sizeof(uint64_t) * STORE_KIND_COUNT);
    memset(wr, 0, sizeof(uint64_t) * STORE_KIND_COUNT);
    const int u = t->unit;   /* checkpoints act[u][m] go up to u = L + 1 (the head's input) */
    if (u >= l->n_units && t->op != TASK_SAVE_ACT && t->op != TASK_LOAD_ACT) return;
    double lo, hi;
    share_of(t, &lo, &hi);
    switch (t->op) {
    case TASK_LOAD_WEIGHTS:
        if (u >= 0 && layout_on_ssd(l, PLACE_WEIGHTS, u))
            rd[STORE_WEIGHTS] = layout_segment_bytes(l, u, 0, l->units[u].n, l->weight_size);
        break;
    case TASK_SAVE_ACT:
        if (layout_on_ssd(l, PLACE_ACTS, u)) wr[STORE_ACTIVATIONS] = layout_act_bytes(l);
        break;
    case TASK_LOAD_ACT:
        if (layout_on_ssd(l, PLACE_ACTS, u)) rd[STORE_ACTIVATIONS] = layout_act_bytes(l);
        break;
    case TASK_SAVE_GRAD:
        if (u >= 0 && layout_on_ssd(l, PLACE_GRADS, u)) wr[STORE_GRADS] = layout_grad_share_bytes(l, u, lo, hi);
        break;
    case TASK_LOAD_GRAD:
        if (u >= 0 && layout_on_ssd(l, PLACE_GRADS, u)) rd[STORE_GRADS] = layout_grad_share_bytes(l, u, lo, hi);
        break;
    case TASK_OPTIMIZE: {
        if (u < 0) break;
        const size_t a = layout_bound(l, u, lo), b = layout_bound(l, u, hi);
        if (layout_on_ssd(l, PLACE_OPTIM, u))
            for (int kind = STORE_MASTER; kind <= STORE_ADAM_V; kind++)
                rd[kind] = wr[kind] = layout_segment_bytes(l, u, a, b, 4);
        if (layout_on_ssd(l, PLACE_WEIGHTS, u)) wr[STORE_WEIGHTS] = layout_segment_bytes(l, u, a, b, l->weight_size);
        break;
    }
    default:
        break;
    }
}

st_status layout_traffic_per_step(const run_layout *l, layout_traffic *out, st_error *err) {
    memset(out, 0, sizeof *out);
    sched_list steady = {0};
    st_status s = sched_build(&l->sched, 1, &steady, err);
    for (int i = 0; s == ST_OK && i < steady.n; i++) {
        uint64_t rd[STORE_KIND_COUNT], wr[STORE_KIND_COUNT];
        layout_task_traffic(l, &steady.tasks[i], rd, wr);
        for (int k = 0; k < STORE_KIND_COUNT; k++) {
            out->read[k] += rd[k];
            out->written[k] += wr[k];
        }
    }
    for (int k = 0; k < STORE_KIND_COUNT; k++) {
        out->total_read += out->read[k];
        out->total_written += out->written[k];
    }
    sched_list_free(&steady);
    return s;
}

static double kinds_on_ssd(placement p) { return p.weights + p.optim + p.acts + p.grads; }

/* placement_fills' test: the layout of base with placement p, by `fits`. */
typedef struct fill_ctx {
    const layout_params *base;
    layout_fit_fn fits;
    void *ctx;
    st_status status;
    st_error *err;
} fill_ctx;

static int layout_fits(placement p, void *ctx) {
    fill_ctx *f = ctx;
    layout_params lp = *f->base;
    lp.place = p;
    run_layout l;
    if (f->status != ST_OK || (f->status = layout_build(&lp, &l, f->err)) != ST_OK) return 0;
    const int ok = f->fits(&l, f->ctx);
    layout_free(&l);
    return ok;
}

static st_status traffic_of(const layout_params *base, placement p, uint64_t *bytes, st_error *err) {
    layout_params lp = *base;
    lp.place = p;
    run_layout l;
    layout_traffic traffic = {0};
    st_status s = layout_build(&lp, &l, err);
    if (s == ST_OK) s = layout_traffic_per_step(&l, &traffic, err);
    layout_free(&l);
    *bytes = traffic.total_read + traffic.total_written;
    return s;
}

st_status layout_least_traffic_placement(const layout_params *base, int n_candidates, layout_fit_fn fits, void *ctx,
                                         placement *out, st_error *err) {
    int found = 0;
    uint64_t best = 0;
    int parts[PLACE_KINDS];
    layout_parts(&base->model, parts);
    fill_ctx fc = {.base = base, .fits = fits, .ctx = ctx, .status = ST_OK, .err = err};
    for (int i = 0; i < n_candidates && i < PLACEMENT_COUNT; i++) {
        const placement whole = placement_at(i);
        if (!layout_fits(whole, &fc)) {
            if (fc.status != ST_OK) return fc.status;
            continue;
        }
        /* the whole placement with memory filled by its kinds' parts */
        placement filled[PLACEMENT_FILLS];
        const int n_filled = placement_fills(whole, parts, layout_fits, &fc, filled);
        for (int r = 0; r < n_filled; r++) {
            const placement p = filled[r];
            uint64_t bytes;
            st_status s = fc.status != ST_OK ? fc.status : traffic_of(base, p, &bytes, err);
            if (s != ST_OK) return s;
            if (!found || bytes < best || (bytes == best && kinds_on_ssd(p) < kinds_on_ssd(*out)))
                best = bytes, *out = p, found = 1;
        }
    }
    if (!found) return st_fail(err, ST_ENOENT, "no placement fits");
    return ST_OK;
}
