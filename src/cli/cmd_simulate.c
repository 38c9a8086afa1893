/* cmd_simulate.c - `strata simulate`: predicts an offloaded training
 * configuration on a described machine (strata/sim.h): iteration time,
 * tokens/s, what each resource does, bytes moved, the memory of each
 * tier's buffers, the bottleneck and the roofline bound. Where it prints a
 * quantity `strata train` prints too, it names it the same way
 * (docs/ARCHITECTURE.md, "What a run prints"). */
#include <cjson/cJSON.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_flags.h"
#include "strata/sim.h"

typedef struct simulate_opts {
    const char *hw, *precision, *schedule, *offload, *optimizer_io, *trace;
    cli_model_flags shape;
    long micro_batch, grad_accum, global_batch, devices, ranks, iterations, grad_buffers;
    double alpha, clip;
    int json;
} simulate_opts;

#define O(field) offsetof(simulate_opts, field)
#define SHAPE(field) O(shape.field)
static const cli_flag simulate_flags[] = {
    CLI_HW_FLAG(O(hw)),
    CLI_MODEL_SHAPE_FLAGS(SHAPE),
    CLI_INT("micro-batch", O(micro_batch), 1, 1 << 20, "B", "sequences per micro-batch (default 8)"),
    CLI_SEQ_FLAG(SHAPE(seq)),
    CLI_INT("grad-accum", O(grad_accum), 1, 1 << 16, "M", "micro-batches per iteration (default 1)"),
    CLI_INT("global-batch", O(global_batch), 1, 1 << 24, "G",
            "sequences per optimizer step over all devices: sets M = G / (devices x B)"),
    CLI_STRING("precision", O(precision), "P", "fp32 (default) or mixed (bf16 compute weights)"),
    CLI_STRING("schedule", O(schedule), "S", "vertical (default) or horizontal"),
    CLI_DOUBLE("alpha", O(alpha), 0, 1, "A", "share of each unit's optimizer step deferred to the next forward, where\n"
               "the unit's optimizer state or weights are on the SSD (every unit's on a GPU;\n"
               "default 0)"),
    CLI_DOUBLE("clip", O(clip), 0, 1e9, "X", "gradient clipping as in train (default 1.0; 0 = off; vertical then defers all)"),
    CLI_STRING("offload", O(offload), "LIST",
               "state on the SSD: weights,optim,acts,grads, KIND=SHARE (optim=0.6) or\n"
               "none (default none); auto: the placement with the least SSD traffic\n"
               "that fits the machine's memory, memory filled with whole units"),
    CLI_STRING("optimizer-io", O(optimizer_io), "ORDER",
               "how an optimizer job orders its SSD reads and writes: phased\n"
               "(default, as train) or interleaved"),
    CLI_INT("grad-buffers", O(grad_buffers), LAYOUT_GRAD_BLOCK_BUFFERS, LAYOUT_GRAD_BUFFERS - 1, "N",
            "block gradient buffers when gradients live on the SSD (default 3, as train)"),
    CLI_INT("devices", O(devices), 1, 4096, "N",
            "data-parallel devices on a gpu backend (default: the description's\n"
            "node.devices); each runs B x M sequences, state sharded ZeRO-3 style"),
    CLI_INT("ranks", O(ranks), 1, 1000000, "N",
            "data-parallel ranks on a cpu backend, as 'mpirun -np N strata train'\n"
            "(default: the description's cluster, nodes x ranks_per_node); each\n"
            "runs B x M sequences, state sharded; at most one per node, or a\n"
            "multiple of the nodes, spread evenly"),
    CLI_INT("iterations", O(iterations), 1, 100, "N", "steady iterations simulated after the first (default 3)"),
    CLI_STRING("trace", O(trace), "FILE", "write the simulated timeline as a Chrome trace"),
    CLI_ON("json", O(json), "print the prediction as JSON"),
};

static const cli_spec simulate_spec = {
    .command = "simulate",
    .usage = "usage: strata simulate --hw FILE [--model NAME | --n-layer N --n-head N --d-model N]\n"
             "                       [--micro-batch B] [--seq T] [--grad-accum M | --global-batch G]\n"
             "                       [--precision fp32|mixed] [--schedule vertical|horizontal] [--alpha A] [--clip X]\n"
             "                       [--offload weights,optim=0.6,acts,grads|none|auto] [--devices N] [--ranks N]\n"
             "                       [--iterations N]\n"
             "                       [--optimizer-io phased|interleaved] [--grad-buffers N] [--trace FILE] [--json]",
    .about = "Replays the task lists the schedule executor runs ('strata train --schedule')\n"
             "against a hardware description ('strata probe' writes one for this machine) and\n"
             "predicts the steady iteration: time and tokens/s, where the compute thread's\n"
             "time goes, each resource's utilization, SSD bytes per kind of state, the memory\n"
             "of each tier's buffers, the bottleneck, and the roofline bound. On a gpu\n"
             "backend with several devices, throughput is per device (include/strata/sim.h\n"
             "says what is modelled).",
    .flags = simulate_flags,
    .n_flags = CLI_COUNT(simulate_flags),
    .lists_models = 1,
};

static double pct(double x) { return 100.0 * x; }

static void print_text(const char *hw_path, const hw_desc *hw, const sim_config *c, const char *where,
                       const sim_result *r, const sim_roofline *rf) {
    char a[32], b[32];
    const gpt_config *g = &c->model;
    printf("model: %d layers, %d heads, d_model %d, context %d, vocab %d: %.2fM parameters; micro-batch %d x %d, "
           "%d micro-batch%s (%d tokens per iteration%s), %s\n",
           g->n_layer, g->n_head, g->d_model, g->n_ctx, g->vocab_size, (double)gpt_num_real_params(g) / 1e6, c->B,
           c->T, c->micro_batches, c->micro_batches == 1 ? "" : "es", c->B * c->T * c->micro_batches, r->devices > 1 ? " per device" : "",
           gpt_precision_name(c->precision));
    if (r->devices > 1)
        printf("data parallel: %d devices, global batch %d sequences; state sharded over them (ZeRO-3), collectives "
               "over the interconnect at %.0f GB/s\n",
               r->devices, r->devices * c->B * c->micro_batches, hw->interconnect_gbps);
    if (r->ranks > 1) {
        printf("data parallel: %d ranks (%d node%s x %d), global batch %d sequences; state sharded over them (ZeRO-3); "
               "each rank gets 1/%d of its node", r->ranks, r->nodes, r->nodes == 1 ? "" : "s", r->ranks_per_node,
               r->ranks * c->B * c->micro_batches, r->ranks_per_node);
        if (r->ranks_per_node > 1) printf("; between a node's ranks %.3g GB/s in all", hw->shm_gbps);
        if (r->nodes > 1) printf("; network %.3g GB/s per node", hw->network_gbps);
        printf("\n");
    }
    sched_params sp = {.kind = c->schedule, .alpha = c->alpha, .clipping = c->clipping};
    const int opt_streams = placement_streams_optimizer(c->place);
    printf("schedule: %s, alpha %.2f%s, clipping %s; on the SSD: %s%s%s\n",
           c->schedule == SCHED_VERTICAL ? "vertical" : "horizontal", c->alpha,
           sp.clipping && sp.kind == SCHED_VERTICAL && c->alpha != 1.0 ? " (clipping defers every step: 1.00)" : "", c->clipping ? "on" : "off",
           where, opt_streams ? ", optimizer I/O " : "", opt_streams ? opt_io_order_name(c->opt_io) : "");
    printf("hardware: %s (%s): %s, %d cores, %d SSD path%s\n", hw->name, hw_path, hw_backend_name(hw->backend),
           hw->cores, hw->n_ssd, hw->n_ssd == 1 ? "" : "s");
    printf("iteration: %.3f s steady (first %.3f s): %.1f tokens/s, %.2f model GFLOP/s%s\n", r->iter_s,
           r->first_iter_s, r->tokens_per_s, r->model_flops_per_s / 1e9, r->devices > 1 ? " per device" : "");
    printf("compute thread: computing %.3f s, slowed by AdamW and I/O beside it %.3f s, waiting %.3f s (on the SSD %.3f s, "
           "the optimizer %.3f s, the link %.3f s",
           r->compute_s, r->contention_s, r->wait_s, r->wait_on[SIM_SSD], r->wait_on[SIM_OPTIMIZER],
           r->wait_on[SIM_LINK]);
    if (r->devices > 1) printf(", the interconnect %.3f s", r->wait_on[SIM_INTERCONNECT]);
    if (r->ranks > 1) printf(", the other ranks %.3f s", r->wait_on[SIM_INTERCONNECT]);
    printf(")\n");
    printf("critical path:");
    for (int k = 0; k < SIM_RESOURCE_COUNT; k++)
        if (r->critical[k] > 0) printf(" %s %.3f s", sim_resource_name((sim_resource)k), r->critical[k]);
    printf("; bottleneck: %s\n", sim_resource_name(r->bottleneck));
    printf("utilization: compute %.0f%%, optimizer worker %.0f%% (AdamW %.0f%%)", pct(r->compute_busy),
           pct(r->optimizer_busy), pct(r->adamw_busy));
    for (int p = 0; p < r->n_paths; p++)
        printf(", ssd[%d] %.0f%% (reading %.0f%%, writing %.0f%%)", p, pct(r->path[p].busy), pct(r->path[p].read_busy),
               pct(r->path[p].write_busy));
    if (hw->backend == HW_BACKEND_GPU) printf(", link %.0f%%", pct(r->link_busy));
    if (r->devices > 1) printf(", interconnect %.0f%%", pct(r->interconnect_busy));
    if (r->ranks > 1) printf(", collectives in flight %.0f%%", pct(r->interconnect_busy));
    printf("\n");
    if (r->ranks > 1)
        printf("ranks per iteration: rank 0 sends %s and receives %s (all-gathers of weights, reduce-scatters of "
               "gradients, sums)\n", st_format_bytes((double)r->comm_sent, a, sizeof a),
               st_format_bytes((double)r->comm_received, b, sizeof b));
    if (hw->backend == HW_BACKEND_GPU) {
        printf("link per iteration: %s to the device, %s back", st_format_bytes((double)r->link_to_device, a, sizeof a),
               st_format_bytes((double)r->link_from_device, b, sizeof b));
        if (r->devices > 1)
            printf("; interconnect %s per device", st_format_bytes(r->interconnect_bytes, a, sizeof a));
        printf("\n");
    }
    if (r->total_read || r->total_written) {
        printf("SSD per iteration:");
        int first = 1;
        for (int k = 0; k < STORE_KIND_COUNT; k++) {
            if (!r->bytes_read[k] && !r->bytes_written[k]) continue;
            printf("%s %s %s read / %s written", first ? "" : ",", store_kind_name((store_kind)k),
                   st_format_bytes((double)r->bytes_read[k], a, sizeof a),
                   st_format_bytes((double)r->bytes_written[k], b, sizeof b));
            first = 0;
        }
        printf("; total %s read, %s written\n", st_format_bytes((double)r->total_read, a, sizeof a),
               st_format_bytes((double)r->total_written, b, sizeof b));
    } else {
        printf("SSD per iteration: nothing (all state in memory)\n");
    }
    char d[32], h[32], all[32];
    st_format_bytes((double)r->memory.device, d, sizeof d);
    st_format_bytes((double)r->memory.host, h, sizeof h);
    if (hw->backend == HW_BACKEND_CPU)   /* the executor's buffers, as `strata train` announces them */
        printf("memory: device working set %s, host %s; %s of buffers, in the one RAM of the CPU backend\n", d, h,
               st_format_bytes((double)(r->memory.device + r->memory.host), all, sizeof all));
    else
        printf("memory: device working set %s, host %s (device and host memory)\n", d, h);
    if (hw->backend != HW_BACKEND_CPU)
        printf("roofline: %.3f s (%s-bound: compute %.3f s, optimizer %.3f s, I/O %.3f s, link %.3f s, interconnect "
               "%.3f s); the prediction runs at %.0f%% of the bound's speed\n",
               rf->bound_s, sim_resource_name(rf->limit), rf->compute_s, rf->optimizer_s, rf->io_s, rf->link_s,
               rf->interconnect_s, r->iter_s > 0 ? pct(rf->bound_s / r->iter_s) : 0);
    else if (rf->limit == SIM_SSD)
        printf("roofline: %.3f s (%s-bound: compute %.3f s, optimizer %.3f s, I/O %.3f s); the prediction runs at "
               "%.0f%% of the bound's speed\n",
               rf->bound_s, sim_resource_name(rf->limit), rf->compute_s, rf->optimizer_s, rf->io_s,
               r->iter_s > 0 ? pct(rf->bound_s / r->iter_s) : 0);
    else if (rf->limit == SIM_INTERCONNECT)
        printf("roofline: %.3f s (bound by the collectives: compute %.3f s, optimizer %.3f s, I/O %.3f s, collectives "
               "%.3f s); the prediction runs at %.0f%% of the bound's speed\n",
               rf->bound_s, rf->compute_s, rf->optimizer_s, rf->io_s, rf->interconnect_s,
               r->iter_s > 0 ? pct(rf->bound_s / r->iter_s) : 0);
    else
        printf("roofline: %.3f s (compute-bound: compute %.3f s + optimizer %.3f s on the same cores; I/O %.3f s%s); the "
               "prediction runs at %.0f%% of the bound's speed\n",
               rf->bound_s, rf->compute_s, rf->optimizer_s, rf->io_s, r->ranks > 1 ? ", collectives below" : "",
               r->iter_s > 0 ? pct(rf->bound_s / r->iter_s) : 0);
}

static void print_json(const char *hw_path, const hw_desc *hw, const sim_config *c, const char *where,
                       const sim_result *r, const sim_roofline *rf) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "hw", hw_path);
    cJSON_AddStringToObject(o, "hw_name", hw->name);
    cJSON_AddStringToObject(o, "backend", hw_backend_name(hw->backend));
    cJSON_AddNumberToObject(o, "params", (double)gpt_num_real_params(&c->model));
    cJSON_AddStringToObject(o, "schedule", c->schedule == SCHED_VERTICAL ? "vertical" : "horizontal");
    cJSON_AddNumberToObject(o, "devices", r->devices);
    cJSON_AddNumberToObject(o, "ranks", r->ranks);
    cJSON_AddNumberToObject(o, "nodes", r->nodes);
    cJSON_AddNumberToObject(o, "ranks_per_node", r->ranks_per_node);
    cJSON_AddNumberToObject(o, "global_batch", (double)r->devices * r->ranks * c->B * c->micro_batches);
    cJSON_AddNumberToObject(o, "micro_batch", c->B);
    cJSON_AddNumberToObject(o, "seq", c->T);
    cJSON_AddNumberToObject(o, "grad_accum", c->micro_batches);
    cJSON_AddNumberToObject(o, "alpha", c->alpha);
    cJSON_AddStringToObject(o, "offload", where);
    cJSON_AddStringToObject(o, "optimizer_io", opt_io_order_name(c->opt_io));
    cJSON_AddNumberToObject(o, "grad_buffers", layout_grad_buffers(c->grad_buffers));
    cJSON_AddNumberToObject(o, "iter_s", r->iter_s);
    cJSON_AddNumberToObject(o, "first_iter_s", r->first_iter_s);
    cJSON_AddNumberToObject(o, "tokens_per_s", r->tokens_per_s);
    cJSON_AddNumberToObject(o, "model_flops_per_s", r->model_flops_per_s);
    cJSON_AddNumberToObject(o, "tokens_per_s_node", r->tokens_per_s * r->devices);
    cJSON_AddNumberToObject(o, "compute_s", r->compute_s);
    cJSON_AddNumberToObject(o, "contention_s", r->contention_s);
    cJSON_AddNumberToObject(o, "wait_s", r->wait_s);
    cJSON *cp = cJSON_AddObjectToObject(o, "critical_path");
    for (int k = 0; k < SIM_RESOURCE_COUNT; k++) cJSON_AddNumberToObject(cp, sim_resource_name((sim_resource)k), r->critical[k]);
    cJSON_AddStringToObject(o, "bottleneck", sim_resource_name(r->bottleneck));
    cJSON *u = cJSON_AddObjectToObject(o, "utilization");
    cJSON_AddNumberToObject(u, "compute", r->compute_busy);
    cJSON_AddNumberToObject(u, "optimizer", r->optimizer_busy);
    cJSON_AddNumberToObject(u, "adamw", r->adamw_busy);
    cJSON_AddNumberToObject(u, "link", r->link_busy);
    cJSON_AddNumberToObject(u, "interconnect", r->interconnect_busy);
    cJSON *paths = cJSON_AddArrayToObject(u, "ssd");
    for (int p = 0; p < r->n_paths; p++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "busy", r->path[p].busy);
        cJSON_AddNumberToObject(e, "read", r->path[p].read_busy);
        cJSON_AddNumberToObject(e, "write", r->path[p].write_busy);
        cJSON_AddItemToArray(paths, e);
    }
    cJSON *rd = cJSON_AddObjectToObject(o, "bytes_read"), *wr = cJSON_AddObjectToObject(o, "bytes_written");
    for (int k = 0; k < STORE_KIND_COUNT; k++) {
        if (r->bytes_read[k]) cJSON_AddNumberToObject(rd, store_kind_name((store_kind)k), (double)r->bytes_read[k]);
        if (r->bytes_written[k]) cJSON_AddNumberToObject(wr, store_kind_name((store_kind)k), (double)r->bytes_written[k]);
    }
    cJSON_AddNumberToObject(o, "total_read", (double)r->total_read);
    cJSON_AddNumberToObject(o, "total_written", (double)r->total_written);
    cJSON_AddNumberToObject(o, "link_to_device", (double)r->link_to_device);
    cJSON_AddNumberToObject(o, "link_from_device", (double)r->link_from_device);
    cJSON_AddNumberToObject(o, "interconnect_bytes", r->interconnect_bytes);
    cJSON_AddNumberToObject(o, "comm_sent", (double)r->comm_sent);
    cJSON_AddNumberToObject(o, "comm_received", (double)r->comm_received);
    cJSON_AddNumberToObject(o, "tokens_per_s_all", r->tokens_per_s * r->devices * r->ranks);
    cJSON *m = cJSON_AddObjectToObject(o, "memory");
    cJSON_AddNumberToObject(m, "device", (double)r->memory.device);
    cJSON_AddNumberToObject(m, "host", (double)r->memory.host);
    cJSON_AddNumberToObject(m, "unit_weights", (double)r->memory.unit_weights);
    cJSON_AddNumberToObject(m, "activations", (double)r->memory.activations);
    cJSON_AddNumberToObject(m, "optimizer_state", (double)r->memory.optimizer_state);
    cJSON_AddNumberToObject(m, "compute_weights", (double)r->memory.compute_weights);
    cJSON_AddNumberToObject(m, "checkpoints", (double)r->memory.checkpoints);
    cJSON_AddNumberToObject(m, "gradients", (double)r->memory.gradients);
    cJSON_AddNumberToObject(m, "staging", (double)r->memory.staging);
    cJSON *b = cJSON_AddObjectToObject(o, "roofline");
    cJSON_AddNumberToObject(b, "bound_s", rf->bound_s);
    cJSON_AddNumberToObject(b, "compute_s", rf->compute_s);
    cJSON_AddNumberToObject(b, "optimizer_s", rf->optimizer_s);
    cJSON_AddNumberToObject(b, "io_s", rf->io_s);
    cJSON_AddNumberToObject(b, "link_s", rf->link_s);
    cJSON_AddNumberToObject(b, "interconnect_s", rf->interconnect_s);
    cJSON_AddStringToObject(b, "limit", sim_resource_name(rf->limit));
    char *text = cJSON_Print(o);
    if (text) printf("%s\n", text);
    free(text);
    cJSON_Delete(o);
}

/* need and have as text for messages, in bytes when they round alike. */
static void need_have(uint64_t need_b, uint64_t have_b, char *need, char *have, size_t n) {
    st_format_bytes((double)need_b, need, n);
    st_format_bytes((double)have_b, have, n);
    if (!strcmp(need, have)) {
        snprintf(need, n, "%llu bytes", (unsigned long long)need_b);
        snprintf(have, n, "%llu bytes", (unsigned long long)have_b);
    }
}

/* --offload auto: the placement with the least SSD traffic per iteration
 * that fits the machine's memory (layout_least_traffic_placement, the
 * executor's rule); 0 when none fits. */
typedef struct machine_fit {
    const hw_desc *hw;
    const sim_config *c;
} machine_fit;

static int fits_machine(const run_layout *l, void *ctx) {
    const machine_fit *m = ctx;
    sim_config t = *m->c;
    t.place = l->p.place;
    int fd, fh;
    sim_memory_need(m->hw, &t, NULL, &fd, &fh);
    return fd && fh;
}

static int choose_placement(const hw_desc *hw, sim_config *c, st_error *err, st_status *st) {
    layout_params p = sim_layout_params(c);
    /* the traffic of the lists the simulator replays (a GPU's defer the
     * steps in memory too, and park their gradients) */
    p.defer_in_memory = sim_list_params(hw, c).defer_in_memory;
    machine_fit m = {hw, c};
    placement chosen;
    st_error e = {0};
    *st = layout_least_traffic_placement(&p, hw->n_ssd > 0 ? PLACEMENT_COUNT : 1, fits_machine, &m, &chosen, &e);
    if (*st == ST_ENOENT) {
        *st = ST_OK;
        return 0;
    }
    if (*st != ST_OK) {
        *err = e;
        return 0;
    }
    c->place = chosen;
    return 1;
}

int cmd_simulate(int argc, char **argv) {
    simulate_opts o = {.offload = "none", .schedule = "vertical", .precision = "fp32", .shape = {.seq = 256},
                       .micro_batch = 8, .iterations = 3, .clip = 1.0};
    cli_parsed flags;
    int parsed = cli_parse_flags(&simulate_spec, argc, argv, &o, &flags);
    if (parsed != CLI_PARSED) return parsed;
    const char *hw_path = o.hw, *trace_path = o.trace;
    long B = o.micro_batch, M = o.grad_accum, G = o.global_batch, devices = o.devices, ranks = o.ranks;
    st_error err = {0};
    if (!hw_path) return cli_usage_error("simulate", "--hw FILE is required (write one with 'strata probe')");
    if (M && G) return cli_usage_error("simulate", "give either --grad-accum or --global-batch, not both");
    sim_config c = sim_default_config();
    int auto_placement;
    if (cli_parse_schedule(o.schedule, &c.schedule, &err) != ST_OK || gpt_precision_parse(o.precision, &c.precision, &err) != ST_OK ||
        cli_parse_offload(o.offload, 1, &c.place, &auto_placement, &err) != ST_OK || cli_model_config(&o.shape, &c.model, &err) != ST_OK ||
        (o.optimizer_io && opt_io_order_parse(o.optimizer_io, &c.opt_io, &err) != ST_OK))
        return cli_usage_error("simulate", "%s", err.msg);
    c.grad_buffers = (int)o.grad_buffers;
    if (c.opt_io == OPT_IO_ALTERNATING)
        return cli_usage_error("simulate", "--optimizer-io alternating is a way to measure the two orders in one run; "
                               "simulate phased and interleaved each");

    hw_desc hw;
    if (cli_load_hw(hw_path, &hw, &err) != ST_OK) return cli_fail(&err);
    if (devices > 1 && hw.backend != HW_BACKEND_GPU)
        return cli_usage_error("simulate", "--devices %ld: data parallelism is modelled on a gpu backend only (%s is a cpu "
                               "description)", devices, hw_path);
    if (ranks && hw.backend == HW_BACKEND_GPU)
        return cli_usage_error("simulate", "--ranks %ld: ranks are modelled on a cpu backend (%s is a gpu description: "
                               "--devices)", ranks, hw_path);
    c.ranks = (int)ranks;
    int nodes = 1, per_node = 1;   /* CPU ranks: a node holds per_node ranks' memory */
    if (hw.backend != HW_BACKEND_GPU) {   /* the ranks must sit on the description's nodes */
        c.ranks = sim_ranks(&hw, &c);   /* resolved: each rank's layout (and --offload auto's candidates) */
        if (sim_ranks_split(&hw, c.ranks, &nodes, &per_node, &err) != ST_OK)
            return cli_usage_error("simulate", "%s", err.msg);
    }
    const long n = hw.backend != HW_BACKEND_GPU ? sim_ranks(&hw, &c) : devices ? devices : hw.devices_per_node;
    if (G) {   /* the global batch over all devices, in micro-batches of B */
        if (G % (n * B))
            return cli_usage_error("simulate", "--global-batch %ld is not a multiple of %ld %s%s x --micro-batch %ld",
                                   G, n, hw.backend == HW_BACKEND_GPU ? "device" : "rank", n == 1 ? "" : "s", B);
        M = G / (n * B);
        if (M > 1 << 16) return cli_usage_error("simulate", "--global-batch %ld makes %ld micro-batches (at most 65536)", G, M);
    }
    if (!M) M = 1;
    if ((long long)B * M * o.shape.seq > INT_MAX) return cli_usage_error("simulate", "--micro-batch x --grad-accum x --seq is too large");
    c.B = (int)B;
    c.T = (int)o.shape.seq;
    c.micro_batches = (int)M;
    c.devices = (int)devices;
    c.alpha = o.alpha;
    c.clipping = o.clip > 0;
    c.iterations = (int)o.iterations;

    /* memory first: a configuration that cannot run is not simulated */
    char need[32], have[32];
    layout_memory mem;
    int fd, fh;
    if (c.T <= c.model.n_ctx && auto_placement) {
        st_status st;
        if (!choose_placement(&hw, &c, &err, &st)) {
            if (st != ST_OK) return cli_fail(&err);
            sim_config all = c;   /* the least memory: everything on the SSD (when there is one) */
            /* with several ranks gradients stay in memory (the executor's rule; strata/offload.h) */
            all.place = placement_at(hw.n_ssd > 0 ? PLACEMENT_COUNT - 1 : 0);
            if (c.ranks > 1) all.place.grads = 0;
            sim_memory_need(&hw, &all, &mem, &fd, &fh);
            if (!fd) {
                need_have(mem.device, hw.device_bytes, need, have, sizeof need);
                return cli_error("%s: memory.device_bytes %s is too small: one block's working set at micro-batch %d x %d "
                                 "needs %s", hw_path, have, c.B, c.T, need);
            }
            need_have((mem.host + (hw.backend == HW_BACKEND_CPU ? mem.device : 0)) * (uint64_t)per_node, hw.host_bytes,
                      need, have, sizeof need);
            return cli_error("%s: memory.host_bytes %s is too small for any placement: the least need is %s%s%s", hw_path,
                             have, need, hw.n_ssd > 0 ? " (everything on the SSD" : " (the description has no SSD",
                             hw.n_ssd > 0 && c.ranks > 1 ? " but the gradients, which several ranks keep in memory)"
                                                         : ")");
        }
    }
    char where[128];
    placement_name(c.place, where, sizeof where);
    if (auto_placement) strncat(where, " (auto)", sizeof where - strlen(where) - 1);
    sim_memory_need(&hw, &c, &mem, &fd, &fh);
    if (c.T <= c.model.n_ctx && !fd) {
        need_have(mem.device, hw.device_bytes, need, have, sizeof need);
        return cli_error("%s: memory.device_bytes %s is too small: one block's working set at micro-batch %d x %d needs %s",
                         hw_path, have, c.B, c.T, need);
    }
    if (c.T <= c.model.n_ctx && !fh) {
        need_have((mem.host + (hw.backend == HW_BACKEND_CPU ? mem.device : 0)) * (uint64_t)per_node, hw.host_bytes, need,
                  have, sizeof need);
        return cli_error("%s: memory.host_bytes %s is too small: this placement needs %s%s%s; place more state on the SSD "
                         "(--offload)",
                         hw_path, have, need, hw.backend == HW_BACKEND_CPU ? " with the working set" : "",
                         per_node > 1 ? " (a node's ranks together)" : "");
    }

    trace *tr = NULL;
    if (trace_path && trace_open(&tr, trace_path, &err) != ST_OK) return cli_fail(&err);
    c.trace = tr;
    sim_result r;
    sim_roofline rf;
    st_status s = sim_run(&hw, &c, &r, &err);
    if (s == ST_OK) s = sim_roofline_bound(&hw, &c, &rf, &err);
    st_status ts = trace_close(tr, s == ST_OK ? &err : NULL);
    if (s == ST_OK) s = ts;
    if (s != ST_OK) return cli_fail(&err);
    if (o.json) print_json(hw_path, &hw, &c, where, &r, &rf);
    else print_text(hw_path, &hw, &c, where, &r, &rf);
    if (trace_path && !o.json) printf("trace: %s (open in https://ui.perfetto.dev)\n", trace_path);
    return 0;
}
