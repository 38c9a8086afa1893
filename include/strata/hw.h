/*
 * strata/hw.h - a machine, described for the simulator and the planner
 * (strata/sim.h): how fast it computes, moves bytes and steps the
 * optimizer, and how much memory each tier has. `strata probe` measures this
 * machine and writes one; a file for a machine Strata does not run on (a
 * node of A100s with several NVMe drives) is written by hand.
 *
 * Units: rates in 10^9 per second (GFLOP/s, GB/s), AdamW in parameters per
 * second, memory in bytes. The JSON file (hw_save_json writes exactly this
 * shape; fields marked optional may be left out):
 *
 *   {
 *     "name": "epyc-2c",
 *     "compute": {
 *       "backend": "cpu",              optional: "cpu" (default) or "gpu"
 *       "matmul_gflops": 128.0,        sgemm at a GPT block's shapes (N x C x 3C, 4C, ...)
 *       "head_matmul_gflops": 120.0,   optional: the LM head's (N x C x vocab); default matmul_gflops
 *       "attention_gflops": 25.0,      optional: causal attention, softmax included; default matmul_gflops
 *       "other_gbps": 9.5,             memory-bound passes: LayerNorm, GELU, residual, cross-entropy
 *       "widen_gbps": 30.0,            optional: a unit's bf16 weights widened to f32 for compute (mixed
 *                                      precision), 2 + 4 bytes an element, over a whole unit's weights, which no
 *                                      cache holds; default other_gbps
 *       "cores": 2,
 *       "task_overhead_s": 0.0003,     optional: fixed time per compute task (parallel regions, launches); default 0
 *       "io_cpu_s_per_gb": 0.12,       optional: host CPU time, on one core, per GB the store moves to or from an
 *                                      SSD (the checksum of every chunk, and the kernel's work for the transfer);
 *                                      default 0
 *       "block_factor": 1.15,          optional: a block's forward and backward tasks as the executor runs them,
 *                                      over what the rates above give for them (its bookkeeping between tasks,
 *                                      and kernels over many units' weights rather than one's repeated: strata
 *                                      probe's trial run of the executor); default 1
 *       "matmul_by_rows": [{"rows": 32, "gflops": 60}, {"rows": 1024, "gflops": 128}],
 *                                      optional: sgemm rate by rows (B x T) of the block's products, rising
 *                                      rows; a task's rate is interpolated in log(rows), clamped at the ends;
 *                                      without it, matmul_gflops at any size
 *       "head_by_rows": [...]          optional: the same for the head's products (rows of a chunk, at most 1024)
 *     },
 *     "host_device_gbps": 0,           optional: host <-> device link; 0: CPU backend (device memory is host memory)
 *     "ssd": [                         one entry per store path; tensors are striped over all of them
 *       {"path": "/nvme0/strata", "read_gbps": 1.2, "write_gbps": 2.5,
 *        "mixed_read_gbps": 0.6, "mixed_write_gbps": 0.5,   mixed: while reads and writes run together;
 *                                                            optional, default half of each alone
 *        "bench_read_gbps": 1.1, "bench_write_gbps": 1.5}   optional, for the record: the probe's own pass
 *     ],                                                       over a test file, where read_gbps and write_gbps
 *                                                              are from its trial run of the executor
 *     "optimizer": {"adamw_params_per_s_per_thread": 6.6e8, "threads": 1},
 *     "contention": {"compute_slowdown": 1.5, "optimizer_slowdown": 1.3, "compute_beside_io": 1.4,
 *                    "io_beside_compute": 1.6},
 *                                      optional, default 1: time factors for compute and for AdamW while
 *                                      both run (on a CPU backend they share the cores), for compute while
 *                                      the drives move bytes (their completions interrupt its threads), and
 *                                      for the drives' transfers while compute runs (the I/O thread and the
 *                                      completions wait for a core)
 *     "memory": {"device_bytes": 25000000000, "host_bytes": 25000000000},
 *     "node": {"devices": 1, "interconnect_gbps": 0},   optional: data-parallel devices (gpu backend) and the
 *                                      bandwidth one device's ring collectives (all-gather, reduce-scatter) reach
 *                                      over their interconnect, per direction (NCCL's "bus bandwidth")
 *     "cluster": {                     optional: data-parallel ranks on a cpu backend (mpirun -np N strata
 *                                      train); the rest of the description is then one node, shared by its ranks
 *       "nodes": 8,                    optional, default 1: nodes, each as the rest of the description says
 *       "ranks_per_node": 2,           optional, default 1: ranks (processes) on each node; they share its cores,
 *                                      memory bandwidth, memory and drives (hw_rank_share: each rank computes at
 *                                      1 / ranks_per_node of the node's rates and gets that share of each drive)
 *       "shm_gbps": 10.0,              between ranks on one node: what the node copies from rank to rank, over
 *                                      all its ranks together; required with ranks_per_node > 1
 *       "shm_latency_s": 1e-5,         optional, default 0: fixed time of a collective among one node's ranks
 *       "network_gbps": 12.5,          between nodes: each node's network bandwidth, per direction (100 Gb/s is
 *                                      12.5); required with nodes > 1
 *       "network_latency_s": 5e-6      optional, default 0: fixed time of a collective that crosses the network
 *     },
 *     "probe": {...},                  optional: what `strata probe` measured, for the record
 *     "note": "..."                    optional: free text, not kept
 *   }
 *
 * Loading validates every field and names the first bad one:
 * "hw.json: ssd[1].read_gbps: must be > 0", "hw.json: missing field
 * compute.matmul_gflops", "hw.json: malformed JSON at line 3, column 7";
 * unknown fields are refused (a misspelt optional field would otherwise be
 * silently replaced by its default).
 *
 *     hw_desc hw;
 *     if (hw_load_json("a100x4.json", &hw, &err) != ST_OK) return fail(&err);
 *     printf("%s: %d SSD paths\n", hw.name, hw.n_ssd);
 */
#ifndef STRATA_HW_H
#define STRATA_HW_H

#include <stddef.h>
#include <stdint.h>

#include "strata/base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HW_MAX_SSD 16
#define HW_MAX_ROWS 8

/* A rate measured at a number of rows (tokens) of a matrix product. */
typedef struct hw_rate_at {
    double rows, gflops;
} hw_rate_at;

typedef enum hw_backend { HW_BACKEND_CPU = 0, HW_BACKEND_GPU = 1 } hw_backend;

typedef struct hw_ssd {
    char path[256];              /* where it was measured, or "" */
    double read_gbps, write_gbps;                /* O_DIRECT, each alone (strata probe: the optimizer's
                                                    phases, read then overwritten in place) */
    double mixed_read_gbps, mixed_write_gbps;    /* both at once; 0: half of each alone */
    double bench_read_gbps, bench_write_gbps;    /* informational (0: absent): the probe's cycle of a test
                                                    file, when read and write come from its trial run */
} hw_ssd;

/* What `strata probe` measured to set the compute rates: a block's forward
 * and backward (recompute + backward, as the executor runs it) and the head
 * at one shape. Informational; all zero when absent. */
typedef struct hw_probe_record {
    char model[32];
    int B, T;
    /* the matrix products' kernel set the compute rates were measured with (strata/backend.h:
       cpu_blas_kernels, OpenBLAS's name for it), or "": another set runs the same products up to 4x
       slower or faster (docs/BENCHMARKS.md, "OpenBLAS's kernels on a CPU it does not know") */
    char blas_kernels[32];
    double block_forward_s, block_backward_s, head_s;
    double adamw_alone_s, adamw_beside_compute_s;   /* per 10^6 parameters, 1 thread */
    double compute_beside_adamw;   /* the block's time beside AdamW looping, over its time alone */
    /* the parts of io_cpu_s_per_gb: CRC32C on one core over memory not in cache, and the CPU time per GB
       in the cycles of the SSD measurement: every processor's busy time (/proc/stat), which holds the
       kernel's work outside the process, or the process's own where that cannot be read */
    double checksum_gbps, io_kernel_s_per_gb;
    /* under mpirun: the bytes a rank received per second in an all-gather of shards and in a
       reduce-scatter (the sum included), with every rank at once (strata/probe.h) */
    double ranks_allgather_gbps, ranks_reduce_scatter_gbps;
    /* the trial run of the executor (strata/probe.h): the slice's blocks, and per step its compute thread's
       work with all state in memory (the time not spent waiting), what the rates without block_factor
       predict for that work, and the step and the work with the optimizer's state on the store directories
       (0: none); then the longer slice in memory, its blocks and its work (0: none), whose difference from
       the first gives a block's work apart from the fixed part (the head, the embedding) */
    int trial_layers, trial_long_layers;
    double trial_work_s, trial_predicted_work_s, trial_ssd_step_s, trial_ssd_work_s, trial_long_work_s;
} hw_probe_record;

typedef struct hw_desc {
    char name[128];
    hw_backend backend;
    double matmul_gflops;
    double head_matmul_gflops;   /* 0 (absent): matmul_gflops */
    double attention_gflops;     /* 0 (absent): matmul_gflops */
    double other_gbps;
    double widen_gbps;           /* 0 (absent): other_gbps */
    int cores;
    double task_overhead_s;      /* per compute task, >= 0 */
    double io_cpu_s_per_gb;      /* host CPU seconds per GB of SSD traffic, >= 0 */
    double block_factor;         /* blocks' tasks as the executor runs them over the rates' time; 0 (absent): 1 */
    int n_matmul_rows, n_head_rows;
    hw_rate_at matmul_by_rows[HW_MAX_ROWS];   /* rows rising; none: matmul_gflops */
    hw_rate_at head_by_rows[HW_MAX_ROWS];     /* none: head_matmul_gflops (or matmul_gflops) */
    double host_device_gbps;     /* 0 on a CPU backend */
    int n_ssd;
    hw_ssd ssd[HW_MAX_SSD];
    double adamw_params_per_s;   /* per thread */
    int adamw_threads;
    double compute_slowdown;     /* >= 1 */
    double optimizer_slowdown;   /* >= 1 */
    double compute_beside_io;    /* compute's time factor while a drive moves bytes; 0 (absent): 1 */
    double io_beside_compute;    /* the drives' transfers' time factor while compute runs; 0 (absent): 1 */
    uint64_t device_bytes, host_bytes;
    int devices_per_node;
    double interconnect_gbps;
    /* "cluster": data-parallel ranks on a cpu backend (1 and 1 when absent) */
    int nodes, ranks_per_node;
    double shm_gbps, shm_latency_s;            /* between a node's ranks: the node's total; per collective */
    double network_gbps, network_latency_s;    /* between nodes: per node and direction; per collective */
    hw_probe_record probe;
} hw_desc;

/* Parses and validates a description; name is what messages call the text
 * (a file name). Never crashes on hostile input. */
st_status hw_parse_json(const char *text, size_t len, const char *name, hw_desc *out, st_error *err);
st_status hw_load_json(const char *path, hw_desc *out, st_error *err);
/* The JSON text (malloc'd, free with free()); hw_parse_json gives back the
 * same description. NULL when out of memory. */
char *hw_to_json(const hw_desc *hw);
/* Writes hw_to_json to path atomically (strata/fs.h: a temporary file,
 * fsynced and renamed over path). */
st_status hw_save_json(const char *path, const hw_desc *hw, st_error *err);
/* The same checks as loading, on a description built in code; name as above. */
st_status hw_check(const hw_desc *hw, const char *name, st_error *err);

/* GFLOP/s of a block's products at `rows` rows (the table, else matmul_gflops),
 * and of the head's (its table, else head_matmul_gflops, else matmul_gflops). */
double hw_matmul_gflops_at(const hw_desc *hw, double rows);
double hw_head_gflops_at(const hw_desc *hw, double rows);

/* Effective AdamW rate of the optimizer worker: per thread x threads. */
double hw_adamw_rate(const hw_desc *hw);

/* The ranks of a cpu description's cluster: nodes x ranks_per_node (1 when absent). */
int hw_ranks(const hw_desc *hw);
/* One rank's share of a cpu node that runs ranks_per_node ranks (what the
 * simulator runs each rank on): the compute rates (matrix products,
 * attention, memory-bound passes) and each SSD path's rates divided by
 * ranks_per_node, since the ranks share the node's cores, memory bandwidth
 * and drives; the AdamW worker keeps its threads while the node's ranks'
 * workers together have a core each (ranks_per_node x optimizer.threads <=
 * cores), else its rate is scaled by cores / (ranks_per_node x threads);
 * memory.host_bytes and device_bytes divided by ranks_per_node. The cluster
 * fields are kept. ranks_per_node 1 gives hw unchanged. */
void hw_rank_share(const hw_desc *hw, int ranks_per_node, hw_desc *out);
const char *hw_backend_name(hw_backend b);

/* Makes read_gbps and write_gbps (what a run's store moved while busy: the
 * probe's trial) path d's rates alone, keeps the test file's as bench_*,
 * and scales each mixed rate by the same factor as its direction (0 or a
 * rate <= 0: d unchanged). The test file measures how much reads and
 * writes at once slow the drive; the store moves its bytes slower than one
 * file's long passes (1.6 against 2.5 GB/s read on this machine's disk),
 * and left unscaled the test file's mixed rates would come out nearly as
 * fast as the store's alone. */
void hw_ssd_use_store_rates(hw_ssd *d, double read_gbps, double write_gbps);

#ifdef __cplusplus
}
#endif
#endif
