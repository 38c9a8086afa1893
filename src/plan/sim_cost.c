/* sim_cost.c - what each task of a list costs (strata/sim.h): the work a
 * compute task does, counted from the model's shapes the way the kernels
 * run it, and the bytes a task moves, from the executor's own layout
 * (strata/layout.h). */
#include <string.h>

#include "strata/comm.h"

#include "plan/sim_internal.h"

sim_config sim_default_config(void) {
    sim_config c;
    memset(&c, 0, sizeof c);
    c.B = 1;
    c.T = 1;
    c.micro_batches = 1;
    c.precision = GPT_MIXED_BF16;
    c.schedule = SCHED_VERTICAL;
    c.iterations = 3;
    c.optimizer_segment = LAYOUT_SEGMENT_DEFAULT;
    return c;
}

layout_params sim_layout_params(const sim_config *c) {
    /* strata train always has a store to commit to: its staging buffer counts */
    return (layout_params){.model = c->model, .precision = c->precision, .B = c->B, .T = c->T,
                           .micro_batches = c->micro_batches, .schedule = c->schedule, .alpha = c->alpha,
                           .clipping = c->clipping, .place = c->place, .segment_elems = c->optimizer_segment,
                           .opt_io = c->opt_io, .grad_buffers = c->grad_buffers, .has_store = 1,
                           .ranks = c->ranks > 1 ? c->ranks : 0};
}

st_status sim_layout(const sim_config *c, run_layout *out, st_error *err) {
    layout_params p = sim_layout_params(c);
    return layout_build(&p, out, err);
}

sched_params sim_sched_params(const sim_config *c) {
    layout_params p = sim_layout_params(c);
    return layout_sched_params(&p);
}

offload_config sim_offload_config(const sim_config *c) {
    offload_config oc;
    memset(&oc, 0, sizeof oc);
    oc.train = train_config_defaults();
    oc.train.model = c->model;
    oc.train.precision = c->precision;
    oc.train.B = c->B;
    oc.train.T = c->T;
    oc.train.micro_batches = c->micro_batches;
    oc.train.clip = c->clipping ? 1.0f : 0.0f;
    oc.schedule = c->schedule;
    oc.alpha = c->alpha;
    oc.place = c->place;
    oc.segment_elems = c->optimizer_segment;
    oc.opt_io = c->opt_io;
    oc.grad_buffers = c->grad_buffers;
    oc.n_store_paths = 1;   /* strata train always has a store to commit to: its staging buffer counts */
    return oc;
}

static uint64_t resolve_devices(const hw_desc *hw, const sim_config *c) {
    if (hw->backend != HW_BACKEND_GPU) return 1;
    return c->devices > 0 ? (uint64_t)c->devices : hw->devices_per_node > 1 ? (uint64_t)hw->devices_per_node : 1;
}

int sim_ranks(const hw_desc *hw, const sim_config *c) {
    if (hw->backend == HW_BACKEND_GPU) return 1;
    return c->ranks > 0 ? c->ranks : hw_ranks(hw);
}

st_status sim_ranks_split(const hw_desc *hw, int ranks, int *nodes, int *per_node, st_error *err) {
    const int n = hw->nodes > 1 ? hw->nodes : 1;
    if (ranks < 1) return st_fail(err, ST_EINVAL, "%d ranks: must be at least 1", ranks);
    if (ranks <= n) *nodes = ranks, *per_node = 1;
    else if (ranks % n)
        return st_fail(err, ST_EINVAL, "%d ranks on the description's %d nodes: give at most %d ranks (one per node) or "
                       "a multiple of %d", ranks, n, n, n);
    else *nodes = n, *per_node = ranks / n;
    return ST_OK;
}

void sim_collective(const hw_desc *hw, const sim_config *c, const sched_task *t, int n_doubles, sim_comm *out) {
    memset(out, 0, sizeof *out);
    const int N = c->ranks > 1 ? c->ranks : 1;
    int nodes = 1, R = 1;
    if (N < 2 || sim_ranks_split(hw, N, &nodes, &R, NULL) != ST_OK) return;
    const double lat = nodes > 1 ? hw->network_latency_s : hw->shm_latency_s;
    /* rank 0 shares a node with ranks 1 .. R-1 (mpirun's default, by slot) */
    uint64_t sent_local = 0, sent_remote = 0, recv_local = 0, recv_remote = 0;
    if (!t) {   /* comm_allreduce_sum_f64: every rank's n doubles to every rank */
        const uint64_t b = 8 * (uint64_t)n_doubles;
        sent_local = recv_local = (uint64_t)(R - 1) * b;
        sent_remote = recv_remote = (uint64_t)(N - R) * b;
    } else if (t->op == TASK_GATHER_WEIGHTS || t->op == TASK_REDUCE_GRADS) {
        const size_t n = t->unit >= 0 ? gpt_unit_numel(&c->model, t->unit) : 0;
        const int gather = t->op == TASK_GATHER_WEIGHTS;
        const uint64_t e = gather ? sim_wsz(c) : 4;
        size_t lo, hi;
        comm_shard_range(n, N, 0, &lo, &hi);
        const uint64_t mine = (uint64_t)(hi - lo) * e;
        for (int r = 1; r < N; r++) {
            comm_shard_range(n, N, r, &lo, &hi);
            const uint64_t theirs = (uint64_t)(hi - lo) * e;
            /* a gather sends my shard to every rank and receives theirs; a reduce-scatter sends each rank
               my part of its shard and receives every rank's part of mine */
            const uint64_t s = gather ? mine : theirs, rcv = gather ? theirs : mine;
            if (r < R) sent_local += s, recv_local += rcv;
            else sent_remote += s, recv_remote += rcv;
        }
        if (!gather) {   /* the sum in rank order (N pieces of the shard read, the shard written), added into
                            the accumulator in memory (the sum read, the accumulator written: a copy at the
                            iteration's first; on the SSD the sum is the accumulator), then the accumulator's
                            sum of squares for the norm (read once more) */
            const int on_ssd = placement_on_ssd(c->place, PLACE_GRADS, t->unit, gpt_num_units(&c->model));
            out->fixed_s += (double)(N + (on_ssd ? 2 : 4)) * (double)mine / (hw->other_gbps / R * 1e9);
        }
    } else {
        return;
    }
    out->sent = sent_local + sent_remote;
    out->received = recv_local + recv_remote;
    out->shm = (double)recv_local;
    out->net = (double)(sent_remote > recv_remote ? sent_remote : recv_remote);
    out->fixed_s += lat;
}

void sim_memory_need(const hw_desc *hw, const sim_config *c_in, layout_memory *out, int *fits_device, int *fits_host) {
    layout_memory m = {0};
    run_layout lay;
    sim_config c_r = *c_in;   /* each rank's own layout, with the ranks resolved */
    c_r.ranks = sim_ranks(hw, c_in);
    const sim_config *c = &c_r;
    if (sim_layout(c, &lay, NULL) == ST_OK) m = lay.memory;
    layout_free(&lay);
    int fd, fh;
    if (hw->backend != HW_BACKEND_GPU) {   /* one memory: the working set lives in host RAM too */
        int nodes = 1, R = 1;   /* a node holds its ranks' */
        if (c->ranks > 1 && sim_ranks_split(hw, c->ranks, &nodes, &R, NULL) != ST_OK) R = 1;
        fd = m.device * (uint64_t)R <= hw->device_bytes;
        fh = (m.device + m.host) * (uint64_t)R <= hw->host_bytes;
    } else {
        const gpt_config *g = &c->model;
        const uint64_t n = resolve_devices(hw, c), wsz = sim_wsz(c), M = (uint64_t)c->micro_batches;
        const uint64_t NC = (uint64_t)c->B * (uint64_t)c->T * (uint64_t)g->d_model;
        const uint64_t unit0 = gpt_unit_numel(g, 0), block = gpt_unit_numel(g, 1);
        const uint64_t max_unit = unit0 > block ? unit0 : block;
        uint64_t scratch = gpt_block_scratch_numel(g, c->B, c->T), head = gpt_head_scratch_numel(g, c->B, c->T);
        if (head > scratch) scratch = head;
        /* device: the unit computing and the next one arriving (gathered
         * whole), the gradient accumulators of the unit computing and of the
         * one leaving; one block's activations and scratch, the gradient
         * flowing down for each micro-batch alive at once, checkpoints in
         * flight to and from the host */
        m.unit_weights = 2 * max_unit * wsz + 2 * max_unit * 4;
        m.activations = (gpt_block_acts_numel(g, c->B, c->T) + scratch) * 4 +
                        (c->schedule == SCHED_VERTICAL ? M : 1) * NC * 4 + 2 * NC * 4 + LAYOUT_ACT_BUFFERS * NC * 4;
        m.device = m.unit_weights + m.activations;
        /* host: the executor's, with every device's checkpoints, and the
         * staging of weights read from the SSD and of checkpoints on their way */
        m.checkpoints *= n;
        /* the initialization unit: the widening buffer is the device's */
        if (wsz == 2) m.staging += max_unit * 4;
        if (c->place.weights) m.staging += 2 * layout_io_bytes(max_unit * wsz);
        if (c->place.acts) m.staging += n * LAYOUT_ACT_BUFFERS * layout_io_bytes(NC * 4);
        m.host = m.optimizer_state + m.compute_weights + m.checkpoints + m.gradients + m.staging;
        fd = m.device <= hw->device_bytes;
        fh = m.host <= hw->host_bytes;
    }
    if (out) *out = m;
    if (fits_device) *fits_device = fd;
    if (fits_host) *fits_host = fh;
}

size_t sim_wsz(const sim_config *c) { return c->precision == GPT_MIXED_BF16 ? 2 : 4; }

void sim_task_bytes(const run_layout *l, const sim_config *c, const sched_task *t, uint64_t rd[STORE_KIND_COUNT],
                    uint64_t wr[STORE_KIND_COUNT]) {
    layout_task_traffic(l, t, rd, wr);
    rd[STORE_ACTIVATIONS] *= sim_devices(c);   /* each device's own checkpoints, on the node's shared paths */
    wr[STORE_ACTIVATIONS] *= sim_devices(c);
}

uint64_t sim_devices(const sim_config *c) { return c->devices > 1 ? (uint64_t)c->devices : 1; }

/* One device's 1/n share of `bytes` (rounded up). */
static uint64_t shard(const sim_config *c, uint64_t bytes) { return (bytes + sim_devices(c) - 1) / sim_devices(c); }

/* What a ring collective (reduce-scatter or all-gather) of `bytes` moves
 * through each device: (n - 1) / n of them. */
static double ring(const sim_config *c, uint64_t bytes) {
    const double n = (double)sim_devices(c);
    return (n - 1) / n * (double)bytes;
}

uint64_t sim_task_link_bytes(const sim_config *c, const sched_task *t, int *to_device) {
    const uint64_t act = (uint64_t)c->B * (uint64_t)c->T * (uint64_t)c->model.d_model * 4;
    *to_device = 1;
    switch (t->op) {
    /* the device's shard of the unit; the interconnect gathers the rest */
    case TASK_LOAD_WEIGHTS: return t->unit >= 0 ? shard(c, gpt_unit_numel(&c->model, t->unit) * sim_wsz(c)) : 0;
    case TASK_LOAD_ACT: return act;
    case TASK_SAVE_ACT: *to_device = 0; return act;
    /* gradients are accumulated, parked and stepped on the host: they cross
     * the link when they leave the device (sim_grad_offload), not here */
    default: return 0;
    }
}

double sim_task_interconnect_bytes(const sim_config *c, const sched_task *t) {
    if (t->op != TASK_LOAD_WEIGHTS || t->unit < 0) return 0;
    return ring(c, gpt_unit_numel(&c->model, t->unit) * sim_wsz(c));   /* all-gather */
}

void sim_grad_offload(const sim_config *c, int unit, uint64_t *link, double *interconnect) {
    const uint64_t bytes = unit >= 0 ? gpt_unit_numel(&c->model, unit) * 4 : 0;   /* fp32 accumulators */
    *link = shard(c, bytes);          /* the device's shard, to the host */
    *interconnect = ring(c, bytes);   /* reduce-scatter */
}


/* The work of task t. first/last: t is the list's first/last gradient task
 * of its unit (gradients zeroed before, summed in squares after). Byte
 * counts follow the kernels' passes over memory (backend_cpu.c, gpt_pass.c);
 * FLOPs count multiply-adds as two. */
sim_work sim_task_work_at(const sim_config *c, const sched_task *t, int first, int last) {
    sim_work w = {0};
    const gpt_config *g = &c->model;
    const double B = c->B, T = c->T, N = B * T, C = g->d_model, NH = g->n_head, Vp = g->padded_vocab;
    w.rows = N;
    w.tasks = task_op_resource(t->op) == RES_COMPUTE;
    /* causal attention: query row i meets i+1 keys, for scores and for the weighted sum */
    const double att = 2.0 * B * C * T * (T + 1);
    const double tri = B * NH * T * (T + 1) / 2;   /* softmax entries */
    const int llama = g->arch == GPT_ARCH_LLAMA;
    /* Llama: q|k|v is C + 2 NKV hs wide; the MLP's three products are 3 C F
     * (GPT-2's two are 8 C^2). kv = the k and v share of a row, F the MLP width. */
    const double kv = 2.0 * g->n_kv_head * (C / NH), F = g->d_ff;
    const double block_flops = llama ? 2 * N * (C * (C + kv) + C * C + 3 * C * F) : 24 * N * C * C;
    /* forward, GPT-2: 2 LayerNorms (read, write), 2 residual adds (2 reads,
     * write), GELU over 4C (read, write), 4 bias broadcasts (write), softmax
     * (read, write); Llama: 2 RMSNorms and the residuals, the rotations of q
     * and k (read, write), SwiGLU (2F read, F written), softmax */
    const double fwd_other = llama ? (16 + 24) * N * C + 8 * N * (C + kv / 2) + 12 * N * F + 8 * tri
                                   : (16 + 24 + 32 + 36) * N * C + 8 * tri;
    /* backward beyond the recomputed forward: GPT-2's GELU backward, 2
     * LayerNorm backward, 2 copies, bias gradients, softmax backward; Llama's
     * SwiGLU backward (3F read, 2F written), 2 RMSNorm backward (24 N C each:
     * x and dout read and dx updated by rows, then x and dout read again by
     * column ranges for dw), 2 copies, the inverse rotations, softmax backward */
    const double bwd_other = llama ? 20 * N * F + (48 + 16) * N * C + 8 * N * (C + kv / 2) + 12 * tri
                                   : (48 + 32 + 16 + 36) * N * C + 12 * tri;
    switch (t->op) {
    case TASK_EMBED_FORWARD:
        w.other_bytes = (llama ? 8 : 12) * N * C;   /* token (and position) rows read, sum written */
        break;
    case TASK_BLOCK_FORWARD:
        w.block = 1;
        w.matmul_flops = block_flops;   /* GPT-2: qkv 3C^2, proj C^2, fc 4C^2, fcproj 4C^2 per row, x2 */
        w.attention_flops = att;
        w.other_bytes = fwd_other;
        break;
    case TASK_BLOCK_BACKWARD:
        w.block = 1;
        /* the recomputed forward, then backward: two products per forward product */
        w.matmul_flops = 3 * block_flops;
        w.attention_flops = 3 * att;
        w.other_bytes = fwd_other + bwd_other;
        break;
    case TASK_HEAD:
        w.head_flops = 6 * N * C * Vp;   /* logits, dx, dhead */
        /* the final norm forward and backward (Llama: RMSNorm 8, dx zeroed 4,
         * RMSNorm backward 24, per N C); cross-entropy: 3 passes over the
         * logits, one write */
        w.other_bytes = (llama ? 36 : 28) * N * C + 16 * N * Vp;
        break;
    case TASK_EMBED_BACKWARD:
        /* Llama: dout read, token rows read and written; GPT-2 positions too */
        w.other_bytes = (llama ? 12 : 24) * N * C;
        break;
    case TASK_LOAD_WEIGHTS: case TASK_GATHER_WEIGHTS:
        /* with several ranks the load stages a shard and the gather brings the unit, widened then */
        if ((t->op == TASK_GATHER_WEIGHTS) == (c->ranks < 2)) break;
        if (c->precision == GPT_MIXED_BF16 && t->unit >= 0)
            w.widen_bytes = 6.0 * (double)gpt_unit_numel(g, t->unit);   /* bf16 widened to f32 */
        break;
    default:
        break;
    }
    if (sched_is_grad_task(t->op) && t->unit >= 0) {
        const double n = (double)gpt_unit_numel(g, t->unit);
        if (first) w.other_bytes += 4 * n;   /* zeroed */
        if (last && c->ranks < 2) w.other_bytes += 4 * n;   /* sum of squares, for the norm (several ranks: of
                                                                the shard, as its reduce-scatter ends) */
    }
    return w;
}

sim_work sim_task_work(const sim_config *c, const sched_list *l, int i) {
    const sched_task *t = &l->tasks[i];
    int first = 1, last = 1;
    if (sched_is_grad_task(t->op)) {   /* (first: as sched_analysis' first_grad, since the unit's reduction) */
        for (int k = i - 1; k >= 0 && first; k--) {
            const sched_task *o = &l->tasks[k];
            if (o->op == TASK_REDUCE_GRADS && o->unit == t->unit) break;
            first = !(sched_is_grad_task(o->op) && o->unit == t->unit);
        }
        for (int k = i + 1; k < l->n && last; k++) last = !(sched_is_grad_task(l->tasks[k].op) && l->tasks[k].unit == t->unit);
    }
    return sim_task_work_at(c, t, first, last);
}

double sim_work_seconds(const hw_desc *hw, const sim_work *w) {
    const double rows = w->rows > 0 ? w->rows : 1;
    double s = w->other_bytes / (hw->other_gbps * 1e9) + w->tasks * hw->task_overhead_s;
    if (w->widen_bytes > 0) s += w->widen_bytes / ((hw->widen_gbps > 0 ? hw->widen_gbps : hw->other_gbps) * 1e9);
    if (w->matmul_flops > 0) s += w->matmul_flops / (hw_matmul_gflops_at(hw, rows) * 1e9);
    if (w->head_flops > 0) s += w->head_flops / (hw_head_gflops_at(hw, rows < GPT_HEAD_CHUNK_ROWS ? rows : (double)GPT_HEAD_CHUNK_ROWS) * 1e9);
    if (w->attention_flops > 0)
        s += w->attention_flops / ((hw->attention_gflops > 0 ? hw->attention_gflops : hw->matmul_gflops) * 1e9);
    return w->block && hw->block_factor > 0 ? s * hw->block_factor : s;
}
