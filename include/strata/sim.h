/*
 * strata/sim.h - the simulator: replays the task lists the executor runs
 * (strata/schedule.h) against a hardware description (strata/hw.h) and a
 * model configuration, and predicts the iteration time, the utilization of
 * each resource, the bytes moved per kind of state, the peak memory per
 * tier and the critical path. Also the roofline bound of DESIGN.md.
 *
 * The model (what src/schedule/offload.c does, in time rather than bytes):
 *
 *   - One compute thread runs the list in order. A compute task costs its
 *     work at the hardware's rates: matrix products (block, head and
 *     attention shapes separately, the first two by rows when the hardware
 *     has tables) in GFLOP/s, the memory-bound rest in GB/s, plus a fixed
 *     overhead per task (sim_task_work says what each task does). Widening a unit's bf16
 *     weights after each load (mixed precision), zeroing a unit's gradients
 *     before its first term and summing their squares after the last are
 *     compute-thread work too.
 *   - Loads (weights, checkpoints, gradients) read the SSD when that state
 *     lives there, one prefetch ahead per kind. As the executor does: when
 *     a weight or checkpoint load completes, the next load of that kind is
 *     read ahead if its inputs are final at that moment (its dependencies
 *     are behind the compute thread; for weights, no optimizer job of the
 *     unit is pending), else it is read when reached; the next gradient
 *     load is looked at after every task. With prefetch_eager, the next
 *     load is read ahead as soon as its inputs become final. A read ahead
 *     of something still being written starts when the write ends. The
 *     compute thread blocks on a load only for what has not arrived. A
 *     weight load first waits for every optimizer job of its unit queued
 *     before it; a checkpoint or gradient load for the write that saved it.
 *   - Saves are written behind: compute does not wait for them.
 *   - Optimizer tasks go, in list order, to one worker. A job streams its
 *     share in segments (sim_config.optimizer_segment elements): it reads
 *     master weights and moments when they are on the SSD, runs AdamW, and
 *     writes them back plus the new compute weights when those are on the
 *     SSD, in the order sim_config.opt_io names. Phased (the default): all
 *     its reads, AdamW beside them but for the last segment of each group
 *     of LAYOUT_OPT_SLOTS, then all its writes (the executor alternates
 *     groups of reads and writes; the model merges them, which moves the
 *     same bytes at the same rates). Interleaved: read-ahead and
 *     write-behind: the first segment's read, then the rest of the I/O
 *     beside AdamW, then the last segment's writes.
 *   - Each SSD path serves its share of every transfer (tensors are striped
 *     over all paths in proportion to sim_config.stripe, equal by default).
 *     Transfers on a path share it equally; while reads and writes both run
 *     there, reads get mixed_read_gbps and writes mixed_write_gbps in all.
 *   - CPU backend: compute and AdamW share the cores; while both run,
 *     compute takes hw.compute_slowdown times as long and AdamW
 *     hw.optimizer_slowdown times. While any drive moves bytes, compute
 *     takes hw.compute_beside_io times as long as well (the transfers'
 *     completions take a core from compute's threads now and then, and
 *     they wait for each other), and while compute runs, every transfer
 *     takes hw.io_beside_compute times as long (the I/O thread and the
 *     completions wait for a core): strata probe measures both.
 *   - The store's CPU work (hw.io_cpu_s_per_gb per GB to or from an SSD:
 *     its checksums and the kernel's part of a transfer) is the host's. An
 *     optimizer job's reads are summed on the I/O thread as they arrive,
 *     hidden under the transfer and AdamW's steps (not the worker's time);
 *     its writes on the worker before each is queued: a phase's first
 *     write's between the steps and the writes, the rest beside the writes
 *     already queued (interleaved: beside AdamW, in the stream). On a CPU
 *     backend compute's thread does a
 *     save's (the executor sums before it queues the write; the model lets
 *     the write start at once, so the two overlap) and pays for a load's
 *     once it has arrived; a GPU computes beside both.
 *   - GPU backend (hw.backend "gpu"): compute runs on the device; AdamW
 *     runs on the host's cores beside it, neither slowing the other. The
 *     device holds one unit's compute weights (and the next one's, read
 *     ahead), the gradient accumulators of the unit being computed (and of
 *     the one leaving) and one block's activations (sim_memory_need); so
 *     every checkpoint leaves it: the lists are built with checkpoint save
 *     and load tasks whatever the placement (they reach the SSD only when
 *     place.acts). Weight loads cross the host-device link to the device,
 *     checkpoint saves cross it back and loads forward again. A unit's
 *     gradients stay on the device while its gradient tasks follow one
 *     another; when the next gradient task is another unit's (vertical: once
 *     the unit is complete; horizontal: after every micro-batch) they leave
 *     for the host, where they are accumulated and stepped: the unit's
 *     optimizer jobs and gradient saves wait for that transfer.
 *   - Data parallel (GPU backend, devices = hw.devices_per_node > 1, or
 *     sim_config.devices): ZeRO-3 style, as ZeRO-Infinity runs it (the footing
 *     GreedySnake's multi-GPU runs are compared on). Every device runs the same
 *     list on its own B x M sequences (a global batch of devices x B x M); the
 *     state on the host and the SSD is sharded, not replicated: each device
 *     loads, and the host steps, a 1/devices share of every unit. So a weight
 *     load reads the unit once from the node's SSDs (as for one device), moves
 *     1/devices of it over each device's own link and all-gathers the rest over
 *     the interconnect; a unit's gradients leaving the device are reduce-
 *     scattered over the interconnect and each device sends its 1/devices shard
 *     to the host; the optimizer's SSD traffic and AdamW work are the node's,
 *     once. Checkpoints are each device's own: their SSD traffic adds up over
 *     the devices on the shared paths. A ring collective of S bytes takes
 *     (devices - 1) / devices x S / hw.interconnect_gbps (reduce-scatter and
 *     all-gather each; an all-reduce is the two, 2 (devices - 1) / devices x S:
 *     here its second half is the all-gather of the stepped weights at their
 *     next load). The devices run in lock step (they are identical), so the
 *     simulation follows one device with the node's SSD paths and AdamW, its
 *     own link and its share of the interconnect; tokens_per_s and
 *     model_flops_per_s are per device.
 *   - Data parallel on a CPU backend (ranks = sim_config.ranks, or the
 *     description's cluster: nodes x ranks_per_node, each rank a process of
 *     `mpirun -np ranks strata train`): every rank runs its own list, built
 *     with sched_params.ranks (each LOAD_WEIGHTS brings the rank's shard,
 *     from its store or memory, and a GATHER_WEIGHTS all-gathers the unit;
 *     a unit's complete gradient, horizontal's per micro-batch, is
 *     reduce-scattered by a REDUCE_GRADS), on
 *     its micro_batches of the global batch and its shard of the state (the
 *     executor's layout with layout_params.ranks). The ranks are identical
 *     and in lock step, so the simulation follows rank 0 (the largest
 *     shards) on its share of the node (hw_rank_share: 1 / ranks_per_node
 *     of the compute rates and of each drive). A collective moves what
 *     strata/comm.h's table says rank 0 sends and receives: the part from
 *     and to ranks on its node over shared memory (cluster.shm_gbps, shared
 *     by the node's ranks: the rank's copies at shm_gbps / ranks_per_node),
 *     the rest over the network (cluster.network_gbps / ranks_per_node, the
 *     larger of what it sends and receives), both at once, after a fixed
 *     latency (network_latency_s when the ranks span nodes, else
 *     shm_latency_s); a reduce-scatter then sums the pieces of its shard
 *     and adds the sum into the rank's accumulator (memory-bound, at
 *     other_gbps). Collectives in flight share these
 *     rates. As the executor runs them: a gather starts at its task, or
 *     ahead of it, after a task ends, when it is the next collective of the
 *     list, the unit's load has its inputs final and its shard is at hand
 *     (read, when the unit's weights are on the SSD; its steps done, when in
 *     memory); compute waits for it at the gather, then widens the unit. A
 *     reduce-scatter starts at its task (waiting first for the oldest when
 *     LAYOUT_REDUCE_SLOTS are in flight); only the unit's optimizer steps,
 *     GRAD_NORM and the end of the iteration wait for it. GRAD_NORM and the
 *     end of each iteration sum doubles over the ranks (1 and 2): their
 *     latency, on the compute thread.
 *
 * Everything else (queue limits, buffer pools) is free. The run
 * simulates the first list and then `iterations` steady lists
 * back to back (work left running by one list carries into the next), and
 * reports the last one. Deterministic: the same inputs give the same result
 * bit for bit.
 *
 *     sim_config sc = sim_default_config();
 *     sc.model = cfg; sc.B = 4; sc.T = 256; sc.micro_batches = 8;
 *     sc.schedule = SCHED_VERTICAL; sc.alpha = 0.25;
 *     sc.place.weights = sc.place.optim = 1;
 *     sim_result r;
 *     if (sim_run(&hw, &sc, &r, &err) != ST_OK) ...
 *     printf("%.2f s per iteration, bound by %s\n", r.iter_s, sim_resource_name(r.bottleneck));
 */
#ifndef STRATA_SIM_H
#define STRATA_SIM_H

#include "strata/hw.h"
#include "strata/layout.h"
#include "strata/model.h"
#include "strata/offload.h"
#include "strata/schedule.h"
#include "strata/store.h"
#include "strata/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sim_config {
    gpt_config model;
    int B, T;                  /* micro-batch: sequences, tokens per sequence */
    int micro_batches;         /* M: micro-batches per iteration (gradient accumulation) */
    gpt_precision precision;   /* mixed: bf16 compute weights (2 bytes), else 4 */
    sched_kind schedule;
    double alpha;              /* share of each streaming unit's optimizer step deferred to the next forward
                                  (sched_deferred_share) */
    int clipping;              /* global-norm clipping (vertical then defers every step) */
    placement place;           /* which kinds of state live on the SSD */
    int iterations;            /* steady iterations after the first (default 3; the last is reported) */
    size_t optimizer_segment;  /* elements the optimizer streams at a time (default LAYOUT_SEGMENT_DEFAULT) */
    opt_io_order opt_io;       /* how an optimizer job orders its SSD reads and writes: phased (the
                                  executor's default) or interleaved (strata/layout.h) */
    int grad_buffers;          /* block gradient buffers when gradients live on the SSD (strata/layout.h;
                                  0: LAYOUT_GRAD_BLOCK_BUFFERS) */
    double stripe[HW_MAX_SSD]; /* relative share of each SSD path in a transfer; all 0: equal */
    int prefetch_eager;        /* read ahead as soon as inputs are final (0: the executor's policy) */
    int devices;               /* data-parallel devices (GPU backend); 0: hw.devices_per_node (1 on a CPU backend) */
    int ranks;                 /* data-parallel ranks (CPU backend: mpirun -np ranks strata train); 0: the
                                  description's cluster, nodes x ranks_per_node (1 without one). micro_batches is
                                  then each rank's, the global batch ranks x B x micro_batches */
    trace *trace;              /* optional: the simulated timeline (lanes compute, optimizer, each
                                  SSD path, the link), times from the start of the run */
} sim_config;

sim_config sim_default_config(void);

/* The resources a configuration can be bound by. */
typedef enum sim_resource {
    SIM_COMPUTE,       /* the compute device (cores on a CPU backend) */
    SIM_CONTENTION,    /* compute slowed by AdamW on the same cores, and by the drives' transfers */
    SIM_OPTIMIZER,     /* the optimizer worker's AdamW */
    SIM_SSD,           /* SSD reads and writes */
    SIM_LINK,          /* host <-> device */
    SIM_INTERCONNECT,  /* device <-> device (data parallel collectives) */
    SIM_RESOURCE_COUNT
} sim_resource;
const char *sim_resource_name(sim_resource r);

typedef struct sim_path_stats {
    double read_busy, write_busy, busy;   /* fraction of the iteration with reads / writes / either in flight */
    double bytes_read, bytes_written;     /* this path's share of the iteration's traffic */
} sim_path_stats;

typedef struct sim_result {
    double iter_s;             /* steady iteration, compute thread start to end */
    double first_iter_s;       /* the first (no deferred work coming in) */
    double tokens_per_s;       /* B * T * M / iter_s: per device */
    double model_flops_per_s;  /* gpt_train_flops / iter_s (no recomputation counted): per device */
    int devices;               /* data-parallel devices simulated (the node does devices x tokens_per_s) */
    int ranks, nodes, ranks_per_node;   /* CPU ranks simulated (1, 1, 1 without): tokens_per_s is per rank */
    /* CPU ranks, per iteration, rank 0's (the largest shards): what its collectives hand to MPI and post to
       receive, the table in strata/comm.h (the gathers and reduce-scatters of the list, and the step's sums) */
    uint64_t comm_sent, comm_received;
    /* the compute thread's iteration, which sums to iter_s: computing at
     * full speed, computing slowed by AdamW (and the drives' transfers) beside it, blocked */
    double compute_s, contention_s, wait_s;
    /* what the blocked time waited for (the critical path's other links) */
    double wait_on[SIM_RESOURCE_COUNT];
    /* the critical path by resource: compute_s, contention_s and each wait,
     * charged to what held it up; bottleneck is the largest */
    double critical[SIM_RESOURCE_COUNT];
    sim_resource bottleneck;
    /* utilization over the iteration: fraction of time busy */
    double compute_busy, optimizer_busy, adamw_busy, link_busy, interconnect_busy;
    int n_paths;
    sim_path_stats path[HW_MAX_SSD];
    /* per iteration, by store kind (STORE_WEIGHTS, STORE_MASTER, ...) */
    uint64_t bytes_read[STORE_KIND_COUNT], bytes_written[STORE_KIND_COUNT];
    uint64_t total_read, total_written;
    uint64_t link_bytes;       /* over one device's host-device link, both ways (to + from) */
    uint64_t link_to_device, link_from_device;
    double interconnect_bytes; /* what one device's collectives move: (devices - 1) / devices of their sizes */
    /* work per iteration at full speed */
    double work_compute_s, work_adamw_s;
    /* memory per tier (sim_memory_need): on a CPU backend the executor's buffer plan, what `strata train`
       allocates up front (not the process's peak resident memory, which adds code and libraries) */
    layout_memory memory;
    int fits_device, fits_host;   /* within hw.device_bytes / hw.host_bytes */
} sim_result;

/* The memory a configuration needs per tier on hw, and whether it fits.
 * CPU backend: the executor's own accounting (offload_memory_need); both
 * tiers are the same RAM, so device + host must fit host_bytes. GPU backend,
 * per device: unit_weights is two units' compute weights (the one computing,
 * the next one arriving) and two units' fp32 gradient accumulators (the one
 * accumulating, the one leaving); activations is one block's activations
 * and scratch (the kernels' layout), the gradient flowing down for every
 * micro-batch alive at once (M in vertical, 1 in horizontal) and the
 * checkpoint buffers in flight. On the host, for the node: the state placed
 * there (optimizer state and gradients once: sharded; the checkpoints of
 * every device), and the I/O staging. */
void sim_memory_need(const hw_desc *hw, const sim_config *cfg, layout_memory *out, int *fits_device, int *fits_host);
/* The parameters of the executor's lists the simulator replays for cfg on
 * hw (on a GPU every checkpoint leaves the device, and alpha defers the
 * steps in memory too: AdamW on the host runs beside the device). */
sched_params sim_list_params(const hw_desc *hw, const sim_config *cfg);

/* The data-parallel ranks a configuration runs on hw: cfg->ranks, else the
 * description's cluster (nodes x ranks_per_node); 1 on a gpu backend. And
 * how they sit on the nodes: one per node while there are at most as many
 * ranks as nodes, else ranks / nodes on each (ST_EINVAL when that does not
 * divide). */
int sim_ranks(const hw_desc *hw, const sim_config *cfg);
st_status sim_ranks_split(const hw_desc *hw, int ranks, int *nodes, int *per_node, st_error *err);

/* Builds the executor's lists (sched_build: first, then steady) and runs them. */
st_status sim_run(const hw_desc *hw, const sim_config *cfg, sim_result *out, st_error *err);

/* Runs given lists back to back (lists[0] first; the last is reported):
 * for hand-made lists, or to replay exactly what an executor ran. */
st_status sim_run_lists(const hw_desc *hw, const sim_config *cfg, const sched_list *const *lists, int n_lists,
                        sim_result *out, st_error *err);

/* What a task does, and its time on the compute thread at full speed. */
typedef struct sim_work {
    double matmul_flops;      /* block-shaped matrix products */
    double head_flops;        /* the LM head's products */
    double attention_flops;   /* causal attention's products (executed, not the full square) */
    double other_bytes;       /* memory-bound passes */
    double widen_bytes;       /* a unit's bf16 weights widened to f32 (at hw.widen_gbps) */
    double rows;              /* rows of the products (B x T; the head's chunk is at most 1024 of them) */
    int tasks;                /* compute tasks in it, each paying hw.task_overhead_s */
    int block;                /* a block's forward or backward: its time is scaled by hw.block_factor */
} sim_work;
/* Task i of list l. Includes the extras the executor does around it:
 * bf16 widening after a weight load, gradient zeroing before a unit's
 * first gradient task of the list and the sum of squares after its last. */
sim_work sim_task_work(const sim_config *cfg, const sched_list *l, int i);
double sim_work_seconds(const hw_desc *hw, const sim_work *w);

/* The executor's layout of a configuration (strata/layout.h): the simulator
 * charges exactly the executor's parts, segments, buffers and bytes. */
layout_params sim_layout_params(const sim_config *cfg);
st_status sim_layout(const sim_config *cfg, run_layout *out, st_error *err);

/* Bytes one task moves to or from the SSD (0 when its state is in memory):
 * the layout's layout_task_traffic, with checkpoints times cfg->devices
 * (each device's own, on the node's shared paths). */
void sim_task_bytes(const run_layout *l, const sim_config *cfg, const sched_task *t, uint64_t read[STORE_KIND_COUNT],
                    uint64_t written[STORE_KIND_COUNT]);

/* The roofline bound of DESIGN.md for one iteration (the steady list):
 * the larger of compute (plus the optimizer's CPU time on a CPU backend,
 * where they share the cores; beside it on a GPU backend) and I/O (bytes
 * read / read bandwidth + bytes written / write bandwidth, over the paths
 * as the stripe spreads them); on a GPU backend also the link (the busier
 * direction's bytes / host_device_gbps) and the interconnect. */
typedef struct sim_roofline {
    double compute_s, optimizer_s, io_s;
    double link_s, interconnect_s;   /* 0 on a CPU backend */
    double bound_s;
    sim_resource limit;   /* SIM_COMPUTE, SIM_OPTIMIZER, SIM_SSD, SIM_LINK or SIM_INTERCONNECT */
    uint64_t ssd_read, ssd_written;  /* the SSD bytes behind io_s */
} sim_roofline;
st_status sim_roofline_bound(const hw_desc *hw, const sim_config *cfg, sim_roofline *out, st_error *err);
/* The same for a given list. */
st_status sim_roofline_list(const hw_desc *hw, const sim_config *cfg, const sched_list *l, sim_roofline *out,
                            st_error *err);

/* The executor configuration a sim_config describes (for offload_memory_need). */
offload_config sim_offload_config(const sim_config *cfg);

#ifdef __cplusplus
}
#endif
#endif
