/*
 * strata/probe.h - measures this machine into a hardware description
 * (strata/hw.h), the way the executor will use it: what `strata probe` runs.
 *
 *   compute      sgemm at a GPT block's shapes (forward and both backward
 *                products, weighted as a block's forward + recompute +
 *                backward runs them) at 16, 64, 256, ... rows up to the
 *                probe's B x T -> matmul_by_rows, matmul_gflops (at B x T);
 *                a bf16 round trip over a large array -> other_gbps; one
 *                block's bf16 weights widened to f32, as before each of
 *                the unit's tasks in mixed precision (from memory: the
 *                sources rotate through 512 MiB) -> widen_gbps; a
 *                block's forward and backward (gpt_block_forward/backward,
 *                as the executor runs them) at B x T and at 1 x 16 ->
 *                attention_gflops and task_overhead_s, the pair that makes
 *                the simulator's block times at both shapes the measured
 *                ones (what the products and passes do not explain grows
 *                with T for the attention, and is fixed for the overhead);
 *                the head's products at 16 and 64 rows, and the whole head
 *                (gpt_head_forward_backward) at B x T -> head_by_rows,
 *                head_matmul_gflops
 *   optimizer    AdamW on a thread of its own with 1 OpenMP thread, as the
 *                executor's worker runs it, each step on state not touched
 *                since the steps rotated through 512 MiB of it (from
 *                memory, as a unit's state); the median of as many steps as
 *                fill 250 ms, timed before and after the contention below,
 *                the faster -> adamw_params_per_s_per_thread
 *   contention   the block again while AdamW runs beside it -> AdamW's rate
 *                meanwhile, optimizer_slowdown (os), and compute_slowdown =
 *                os / (os - 1): compute's threads fill the cores and wait
 *                for each other, so the one sharing its core with the
 *                worker sets their pace, 1 - 1/os (the block's own timed
 *                slowdown, noisier, -> probe.compute_beside_adamw; it
 *                stands when AdamW hardly slows, os < 1.05)
 *   ssd          each store directory alone through io_bench (strata/io.h),
 *                O_DIRECT: the test file laid down, then cycled through in
 *                the optimizer's phases (3 segments of master weights and
 *                moments, 18 MiB, read then overwritten in place), one
 *                cycle untimed and the next timed -> read_gbps, write_gbps
 *                (bytes over the sum of each direction's phases; where the
 *                trial below measures a path, bench_read/write_gbps), and
 *                the whole machine's busy CPU time meanwhile (/proc/stat:
 *                the kernel's work outside the process too) per GB ->
 *                probe.io_kernel_s_per_gb, with the checksum's cost ->
 *                io_cpu_s_per_gb; then reads and writes at once ->
 *                mixed_read/write_gbps
 *   beside I/O   five rounds of three windows of 0.4 s: the block
 *                (forward and backward) alone, the block while the first
 *                directory's drive reads and writes a test file (--size)
 *                through the I/O engine, and that stream alone ->
 *                compute_beside_io, the block's median time beside the
 *                stream over alone (the transfers' completions take a core
 *                from compute's threads now and then), io_beside_compute,
 *                the stream's median rate alone over beside the block (the
 *                I/O thread and the completions wait for a core); strata
 *                probe --update measures both again with the disk
 *   trial        the executor itself (strata/offload.h) on a slice of the
 *                model (its first trial_layers blocks, the embedding and the
 *                head; fewer when they would take more than a quarter of
 *                memory) at the probe's shape, mixed precision, vertical,
 *                trial_steps steps, the first untimed (the medians of the
 *                others' time and work, so that one stalled step does not
 *                count): with all state in
 *                memory, and again on a longer slice (up to 6x the blocks,
 *                as a quarter of memory allows; probe.trial_long_layers),
 *                twice, a third time when the two differ by more than 10%
 *                (their mean; of three the median: now and then a whole
 *                trial runs far slower than the rest)
 *                -> block_factor, what the blocks' tasks must be scaled by
 *                for the simulator's compute-thread work (its time not
 *                waiting) on the whole model to be what the two slices
 *                extrapolate to: their difference is a block's work, apart
 *                from the fixed part (the head, the embedding), which one
 *                short slice would charge to its few blocks (the
 *                executor's bookkeeping between tasks, and kernels over
 *                many units' weights rather than one's repeated); then with the
 *                optimizer's state of every unit but the embedding in a
 *                store under each directory (the embedding's would make a
 *                slice of a few blocks wait on the drives, where a whole
 *                model computes beside them) -> read_gbps and write_gbps,
 *                the bytes over the seconds its transfers were in flight
 *                (the store's pattern, in bursts beside compute)
 *   memory       physical memory (device = host on the CPU backend), cores
 *   ranks        under mpirun with 2 or more ranks (hw_probe_ranks, every
 *                rank calls it; the rest runs on rank 0 alone while the
 *                others wait): which ranks share a host (-> cluster.nodes,
 *                ranks_per_node), the all-gather of a unit's shards and the
 *                reduce-scatter of its gradient (strata/comm.h, as the
 *                executor runs them) -> the bytes a rank receives per
 *                second in each (probe.ranks_allgather_gbps,
 *                ranks_reduce_scatter_gbps), and from the all-gather the
 *                node's rate: cluster.shm_gbps on one host (ranks_per_node
 *                x a rank's rate), else cluster.network_gbps; a sum of two
 *                doubles over the ranks -> the latency
 *                (cluster.shm_latency_s or network_latency_s)
 *
 * Each timing is the median of a few repetitions (more for short ones);
 * the whole probe takes about 15 s on 2 cores at the default shape
 * (gpt2-124m, 4 x 256) and 256 MiB per path without the trial; with it
 * about 155 s there (8 steps of 4 blocks in memory, 4 of the whole
 * model's 12 in memory twice, 8 of 4 blocks with their optimizer state on
 * the drive), and 80-90 s at gpt2-350m's 1 x 64 with one store directory
 * (22 blocks the longer slice, as a quarter of 24 GiB allows). A busy
 * machine measures itself busy: probe it idle.
 *
 *     hw_probe_config pc = hw_probe_defaults();
 *     pc.ssd_dirs = dirs; pc.n_ssd = 1;
 *     hw_desc hw;
 *     if (hw_probe(&pc, &hw, &err) == ST_OK) hw_save_json("hw.json", &hw, &err);
 */
#ifndef STRATA_PROBE_H
#define STRATA_PROBE_H

#include "strata/hw.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hw_probe_config {
    const char *name;                 /* the description's name; NULL: "probe-<host name>" */
    const char *const *ssd_dirs;      /* store directories to measure (none: no SSD in the description) */
    int n_ssd;
    uint64_t ssd_bytes;               /* test file per directory, a multiple of 4096 */
    const char *model;                /* the shape compute is measured at */
    int B, T;
    int reps;                         /* timed repetitions per measurement (median) */
    uint64_t adamw_elements;          /* the optimizer measurement's size */
    const hw_desc *base;              /* non-NULL: measure the SSD paths only and keep the rest of base
                                         (disks drift; compute does not), but for compute beside the first
                                         path (compute_beside_io, at base's probe shape); with base's trial
                                         record, the trial's SSD run again at its shape */
    int trial_steps;                  /* steps of each trial run of the executor, >= 2 (the first untimed);
                                         0: no trial */
    int trial_layers;                 /* the trial's slice of the model: its first blocks, at most this many */
    /* called before each step with a line saying what is measured (and after
     * the SSD with its result); may be NULL */
    void (*progress)(void *arg, const char *line);
    void *progress_arg;
} hw_probe_config;

/* gpt2-124m at 4 x 256, 3 repetitions, 256 MiB per SSD path, 4M AdamW
 * elements, trial runs of 8 steps on 4 blocks. */
hw_probe_config hw_probe_defaults(void);

st_status hw_probe(const hw_probe_config *cfg, hw_desc *out, st_error *err);

/* The ranks of comm (strata/comm.h), measured into hw's cluster and probe
 * record (above); collective: every rank calls it with the same elements
 * (the all-gathered and reduce-scattered array's length, f32) and reps.
 * On one rank it changes nothing. */
struct comm;
st_status hw_probe_ranks(struct comm *c, size_t elements, int reps, hw_desc *hw, st_error *err);

#ifdef __cplusplus
}
#endif
#endif
