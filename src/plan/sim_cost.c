/* sim_cost.c - what each task of a list costs (strata/sim.h): the work a
 * compute task does, counted from the model's shapes the way the kernels
 * run it, and the bytes a task moves, laid out as the executor stores its
 * tensors (src/schedule/offload.c). */
#include <string.h>

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
    c.optimizer_segment = (size_t)2 << 20;
    return c;
}

sched_params sim_sched_params(const sim_config *c) {
    return (sched_params){.kind = c->schedule, .n_units = c->model.n_layer + 1, .micro_batches = c->micro_batches,
                          .alpha = c->alpha, .clipping = c->clipping, .place = c->place};
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
    oc.n_store_paths = 1;   /* strata train always has a store to commit to: its staging buffer counts */
    return oc;
}

/* Checkpoint buffers the executor keeps in flight (offload.c's ACT_POOL). */
#define SIM_ACT_BUFFERS 6

static uint64_t resolve_devices(const hw_desc *hw, const sim_config *c) {
    if (hw->backend != HW_BACKEND_GPU) return 1;
    return c->devices > 0 ? (uint64_t)c->devices : hw->devices_per_node > 1 ? (uint64_t)hw->devices_per_node : 1;
}

void sim_memory_need(const hw_desc *hw, const sim_config *c, layout_memory *out, int *fits_device, int *fits_host) {
    offload_config oc = sim_offload_config(c);
    layout_memory m;
    offload_memory_need(&oc, &m);
    int fd, fh;
    if (hw->backend != HW_BACKEND_GPU) {   /* one memory: the working set lives in host RAM too */
        fd = m.device <= hw->device_bytes;
        fh = m.device + m.host <= hw->host_bytes;
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
                        (c->schedule == SCHED_VERTICAL ? M : 1) * NC * 4 + 2 * NC * 4 + SIM_ACT_BUFFERS * NC * 4;
        m.device = m.unit_weights + m.activations;
        /* host: the executor's, with every device's checkpoints, and the
         * staging of weights read from the SSD and of checkpoints on their way */
        m.checkpoints *= n;
        if (c->place.weights) m.staging += 2 * (store_padded_bytes(max_unit * wsz) + 4096);
        if (c->place.acts) m.staging += n * SIM_ACT_BUFFERS * (store_padded_bytes(NC * 4) + 4096);
        m.host = m.optimizer_state + m.compute_weights + m.checkpoints + m.gradients + m.staging;
        fd = m.device <= hw->device_bytes;
        fh = m.host <= hw->host_bytes;
    }
    if (out) *out = m;
    if (fits_device) *fits_device = fd;
    if (fits_host) *fits_host = fh;
}

size_t sim_wsz(const sim_config *c) { return c->precision == GPT_MIXED_BF16 ? 2 : 4; }

/* The executor's split of unit u into the part stepped during backward and
 * the deferred part: a multiple of 2048 elements (offload.c, "Part 0 of a
 * unit ends on a multiple of 2048 elements"). */
size_t sim_unit_split(const sim_config *c, int u) {
    sched_params p = sim_sched_params(c);
    const double share = sched_deferred_share(&p);
    const size_t n = gpt_unit_numel(&c->model, u);
    return share <= 0 ? n : share >= 1 ? 0 : (size_t)((double)n * (1.0 - share)) / 2048 * 2048;
}

/* The element boundary of share boundary x: 0, the split, or the end. */
static size_t bound(const sim_config *c, int u, double x) {
    return x <= 0.0 ? 0 : x >= 1.0 ? gpt_unit_numel(&c->model, u) : sim_unit_split(c, u);
}

size_t sim_share_elements(const sim_config *c, const sched_task *t) {
    if (t->unit < 0) return 0;
    if (!(t->hi > t->lo)) return gpt_unit_numel(&c->model, t->unit);   /* no share given: the whole unit */
    size_t a = bound(c, t->unit, t->lo), b = bound(c, t->unit, t->hi);
    return b > a ? b - a : 0;
}

uint64_t sim_act_bytes(const sim_config *c) {
    return store_padded_bytes((uint64_t)c->B * (uint64_t)c->T * (uint64_t)c->model.d_model * 4);
}

void sim_task_bytes(const sim_config *c, const sched_task *t, uint64_t rd[STORE_KIND_COUNT],
                    uint64_t wr[STORE_KIND_COUNT]) {
    memset(rd, 0, sizeof(uint64_t) * STORE_KIND_COUNT);
    memset(wr, 0, sizeof(uint64_t) * STORE_KIND_COUNT);
    const uint64_t wsz = sim_wsz(c);
    switch (t->op) {
    case TASK_LOAD_WEIGHTS:
        if (c->place.weights && t->unit >= 0) {
            /* the unit's two parts, each its own tensor */
            const uint64_t n = gpt_unit_numel(&c->model, t->unit), s = sim_unit_split(c, t->unit);
            if (s) rd[STORE_WEIGHTS] += store_padded_bytes(s * wsz);
            if (n > s) rd[STORE_WEIGHTS] += store_padded_bytes((n - s) * wsz);
        }
        break;
    case TASK_LOAD_ACT:   /* each device's own checkpoints, on the node's shared paths */
        if (c->place.acts) rd[STORE_ACTIVATIONS] = sim_act_bytes(c) * sim_devices(c);
        break;
    case TASK_SAVE_ACT:
        if (c->place.acts) wr[STORE_ACTIVATIONS] = sim_act_bytes(c) * sim_devices(c);
        break;
    case TASK_LOAD_GRAD:
        if (c->place.grads) rd[STORE_GRADS] = store_padded_bytes((uint64_t)sim_share_elements(c, t) * 4);
        break;
    case TASK_SAVE_GRAD:
        if (c->place.grads) wr[STORE_GRADS] = store_padded_bytes((uint64_t)sim_share_elements(c, t) * 4);
        break;
    case TASK_OPTIMIZE: {
        const uint64_t len = sim_share_elements(c, t);
        if (!len) break;
        if (c->place.optim) {
            const uint64_t b = store_padded_bytes(len * 4);
            rd[STORE_MASTER] = rd[STORE_ADAM_M] = rd[STORE_ADAM_V] = b;
            wr[STORE_MASTER] = wr[STORE_ADAM_M] = wr[STORE_ADAM_V] = b;
        }
        if (c->place.weights) wr[STORE_WEIGHTS] = store_padded_bytes(len * wsz);
        break;
    }
    default:
        break;
    }
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

void sim_grad_leaves(const sched_list *l, char *leave) {
    int next_unit = -1;   /* unit of the next gradient task, -1 when none */
    for (int i = l->n - 1; i >= 0; i--) {
        const sched_task *t = &l->tasks[i];
        leave[i] = 0;
        if (t->op != TASK_HEAD && t->op != TASK_BLOCK_BACKWARD && t->op != TASK_EMBED_BACKWARD) continue;
        leave[i] = t->unit != next_unit;
        next_unit = t->unit;
    }
}

static int is_grad_task(task_op op) { return op == TASK_HEAD || op == TASK_BLOCK_BACKWARD || op == TASK_EMBED_BACKWARD; }

/* The work of task t. first/last: t is the list's first/last gradient task
 * of its unit (gradients zeroed before, summed in squares after). Byte
 * counts follow the kernels' passes over memory (kernels.c, gpt_pass.c);
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
    /* forward: 2 LayerNorms (read, write), 2 residual adds (2 reads, write),
     * GELU over 4C (read, write), 4 bias broadcasts (write), softmax (read, write) */
    const double fwd_other = (16 + 24 + 32 + 36) * N * C + 8 * tri;
    switch (t->op) {
    case TASK_EMBED_FORWARD:
        w.other_bytes = 12 * N * C;   /* token and position rows read, sum written */
        break;
    case TASK_BLOCK_FORWARD:
        w.matmul_flops = 24 * N * C * C;   /* qkv 3C^2, proj C^2, fc 4C^2, fcproj 4C^2 per row, x2 */
        w.attention_flops = att;
        w.other_bytes = fwd_other;
        break;
    case TASK_BLOCK_BACKWARD:
        /* the recomputed forward, then backward: two products per forward product */
        w.matmul_flops = 3 * 24 * N * C * C;
        w.attention_flops = 3 * att;
        /* GELU backward (2 reads, write over 4C), 2 LayerNorm backward, 2 copies,
         * bias gradients (column sums over 9C), softmax backward (2 reads, write) */
        w.other_bytes = fwd_other + (48 + 32 + 16 + 36) * N * C + 12 * tri;
        break;
    case TASK_HEAD:
        w.head_flops = 6 * N * C * Vp;   /* logits, dx, dwte */
        /* ln_f forward and backward; cross-entropy: 3 passes over the logits, one write */
        w.other_bytes = 28 * N * C + 16 * N * Vp;
        break;
    case TASK_EMBED_BACKWARD:
        w.other_bytes = 24 * N * C;   /* token rows and positions accumulated */
        break;
    case TASK_LOAD_WEIGHTS:
        if (c->precision == GPT_MIXED_BF16 && t->unit >= 0)
            w.other_bytes = 6.0 * (double)gpt_unit_numel(g, t->unit);   /* bf16 widened to f32 */
        break;
    default:
        break;
    }
    if (is_grad_task(t->op) && t->unit >= 0) {
        const double n = (double)gpt_unit_numel(g, t->unit);
        if (first) w.other_bytes += 4 * n;   /* zeroed */
        if (last) w.other_bytes += 4 * n;    /* sum of squares, for the norm */
    }
    return w;
}

sim_work sim_task_work(const sim_config *c, const sched_list *l, int i) {
    const sched_task *t = &l->tasks[i];
    int first = 1, last = 1;
    if (is_grad_task(t->op)) {
        for (int k = 0; k < i && first; k++) first = !(is_grad_task(l->tasks[k].op) && l->tasks[k].unit == t->unit);
        for (int k = i + 1; k < l->n && last; k++) last = !(is_grad_task(l->tasks[k].op) && l->tasks[k].unit == t->unit);
    }
    return sim_task_work_at(c, t, first, last);
}

/* Rows of logits the head computes at once (gpt_pass.c's HEAD_CHUNK): its
 * products run at that size however large B x T is. */
#define HEAD_CHUNK_ROWS 1024.0

double sim_work_seconds(const hw_desc *hw, const sim_work *w) {
    const double rows = w->rows > 0 ? w->rows : 1;
    double s = w->other_bytes / (hw->other_gbps * 1e9) + w->tasks * hw->task_overhead_s;
    if (w->matmul_flops > 0) s += w->matmul_flops / (hw_matmul_gflops_at(hw, rows) * 1e9);
    if (w->head_flops > 0) s += w->head_flops / (hw_head_gflops_at(hw, rows < HEAD_CHUNK_ROWS ? rows : HEAD_CHUNK_ROWS) * 1e9);
    if (w->attention_flops > 0)
        s += w->attention_flops / ((hw->attention_gflops > 0 ? hw->attention_gflops : hw->matmul_gflops) * 1e9);
    return s;
}
