/* cmd_probe.c - `strata probe`: measures this machine (compute, AdamW, the
 * store directories) and writes a hardware description (strata/hw.h) for
 * `strata simulate`. Progress on stderr, a summary on stdout. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "cli/cli.h"
#include "cli/cli_flags.h"
#include "strata/comm.h"
#include "strata/probe.h"

typedef struct probe_opts {
    const char *store, *out, *name, *model, *update;
    uint64_t size;
    long micro_batch, seq, reps, trial_steps, trial_layers;
} probe_opts;

#define O(field) offsetof(probe_opts, field)
static const cli_flag probe_flags[] = {
    CLI_STRING("store", O(store), "DIR[,DIR...]", "store directories to measure, one per drive (default: none)"),
    CLI_STRING("out", O(out), "FILE", "where to write the description (default hw.json)"),
    CLI_SIZE("size", O(size), "BYTES", "test file per directory (default 256M; K, M, G suffixes)"),
    CLI_STRING("name", O(name), "NAME", "the description's name (default probe-<host name>)"),
    CLI_STRING("model", O(model), "NAME", "the shape compute is measured at (default gpt2-124m)"),
    CLI_INT("micro-batch", O(micro_batch), 1, 1 << 16, "B", "sequences per micro-batch at that shape (default 4)"),
    CLI_SEQ_FLAG(O(seq)),
    CLI_INT("reps", O(reps), 1, 32, "N", "timed repetitions per measurement, median (default 3)"),
    CLI_INT("trial-steps", O(trial_steps), 0, 1000, "N",
            "steps of each trial run of the executor, the first untimed (default 8;\n"
            "0: no trial: the kernels' rates and the test file's pass stand)"),
    CLI_INT("trial-layers", O(trial_layers), 1, 1 << 16, "N",
            "blocks of the model the trial runs (default 4; in memory also up to 6x as many)"),
    CLI_STRING("update", O(update), "FILE",
               "measure only the store directories again (and compute beside the first),\n"
               "keep the rest of FILE, and write the result back to FILE (or to --out if given)\n"
               "(a disk's rates drift; re-measure them before a run you compare)"),
};

static const cli_spec probe_spec = {
    .command = "probe",
    .usage = "usage: strata probe [--store DIR[,DIR...]] [--out FILE] [--size BYTES] [--name NAME]\n"
             "                    [--model NAME] [--micro-batch B] [--seq T] [--reps N]\n"
             "                    [--trial-steps N] [--trial-layers N] [--update FILE]",
    .about = "Measures this machine and writes a hardware description (JSON) for\n"
             "'strata simulate': sgemm at a GPT block's shapes, the LM head, memory-bound\n"
             "passes, a block's bf16 weights widened to f32, and the attention (from a\n"
             "block's forward and backward), AdamW on one thread as the executor's\n"
             "optimizer runs it (on state from memory), how much compute and AdamW slow\n"
             "each other down on shared cores, the store's checksum on one core, and\n"
             "O_DIRECT read and write bandwidth of each store directory: the test file\n"
             "cycled through in the optimizer's 18 MiB phases, each read and then\n"
             "overwritten in place (a cycle untimed, the next timed, with the CPU time it\n"
             "took), and reads and writes both at once; how much compute and the first\n"
             "directory's drive slow each other down. Then a trial: the executor itself\n"
             "on the model's first blocks at that shape, with all state in memory, and\n"
             "again on up to 6x as many blocks, twice (a third time when the two differ\n"
             "by more than 10%; how much longer the whole model's blocks' tasks take\n"
             "than the kernels' rates predict, from the two slices: the blocks' factor),\n"
             "and with the blocks' optimizer state on the store directories (each\n"
             "drive's read and write rates, as the store moved its bytes beside\n"
             "compute). About 155 s with the defaults and one store directory, 140 of\n"
             "them the trial (--trial-steps 0 leaves it out); 80-90 s at gpt2-350m,\n"
             "1 x 64.\n"
             "Under mpirun with 2 or more ranks (mpirun -np N strata probe ...), also the\n"
             "ranks' all-gather and reduce-scatter (the cluster fields: nodes, ranks per\n"
             "node, the rate between them, the latency of a collective); the rest is\n"
             "measured by rank 0 alone, after that, and rank 0 writes the file.",
    .flags = probe_flags,
    .n_flags = CLI_COUNT(probe_flags),
};

static void progress(void *arg, const char *line) {
    (void)arg;
    fprintf(stderr, "%s\n", line);
}

/* Every rank's end, after rank 0 has measured (or failed): a barrier that
 * the others wait in asleep (comm_barrier_idle: a spinning wait, MPI's own
 * finalize included, would take a core from rank 0's measurements). */
static int end_probe(comm *cm, int rc) {
    st_error err = {0};
    if (comm_size(cm) > 1 && comm_barrier_idle(cm, 0.01, &err) != ST_OK && rc == 0) rc = cli_fail(&err);
    comm_close(cm);
    return rc;
}

/* glibc serves an allocation from a fresh mapping when it is at least the
 * mmap threshold, 128 KiB at first, but raises the threshold to the size of
 * every mapped block freed, up to 32 MiB: once a process has freed large
 * buffers, the next ones below that size can come from the heap, from 4 KiB
 * pages already touched, on which st_alloc_io's MADV_HUGEPAGE no longer
 * takes. The probe frees its in-memory trials' buffers (gigabytes) and then
 * runs the executor again on the drives: so served, that trial measured the
 * drive 1.5-1.7x slower than with the threshold fixed, and slower than runs
 * see it (docs/BENCHMARKS.md, "The probe's trial on the drives after its
 * in-memory trials"). Fixed at 2 MiB, every buffer of 2 MiB and more is a
 * fresh mapping, as in a run's process, which allocates its buffers once.
 * Only here: fixed in every command, 2 of 6 in-memory runs of gpt2-350m
 * were slow, against none of 9 with glibc's default (not shown to be the
 * cause). A setting of the process's one allocator, made where the
 * command starts. */
static void prefer_fresh_large_mappings(void) {
#ifdef __GLIBC__
    (void)mallopt(M_MMAP_THRESHOLD, 2 << 20);
#endif
}

int cmd_probe(int argc, char **argv) {
    prefer_fresh_large_mappings();
    hw_probe_config pc = hw_probe_defaults();
    probe_opts o = {.out = "hw.json", .size = pc.ssd_bytes, .name = pc.name, .model = pc.model, .micro_batch = pc.B,
                    .seq = pc.T, .reps = pc.reps, .trial_steps = pc.trial_steps, .trial_layers = pc.trial_layers};
    cli_parsed flags;
    int parsed = cli_parse_flags(&probe_spec, argc, argv, &o, &flags);
    if (parsed != CLI_PARSED) return parsed;
    const char *store_arg = o.store, *update = o.update;
    /* --update FILE updates FILE, unless --out says where the result goes */
    const char *out = update && !cli_flag_given(&probe_spec, &flags, "out") ? update : o.out;
    st_error err = {0};
    pc.ssd_bytes = o.size;
    pc.name = o.name;
    pc.model = o.model;
    if (pc.ssd_bytes < 8192 || pc.ssd_bytes % 4096)
        return cli_usage_error("probe", "--size must be a multiple of 4096 and at least 8K");
    if (pc.name && (!pc.name[0] || strlen(pc.name) >= 128)) return cli_usage_error("probe", "--name must be 1 to 127 characters");
    pc.B = (int)o.micro_batch;
    pc.T = (int)o.seq;
    pc.reps = (int)o.reps;
    pc.trial_steps = (int)o.trial_steps;
    pc.trial_layers = (int)o.trial_layers;
    if (pc.trial_steps == 1) return cli_usage_error("probe", "--trial-steps must be 0 (no trial) or at least 2");
    store_dirs dirs;
    if (store_arg) {
        if (store_dirs_parse(store_arg, &dirs, &err) != ST_OK) return cli_usage_error("probe", "--store: %s", err.msg);
        if (dirs.n > HW_MAX_SSD) return cli_usage_error("probe", "--store: at most %d directories", HW_MAX_SSD);
        pc.n_ssd = dirs.n;
    }
    pc.ssd_dirs = dirs.paths;
    pc.progress = progress;
    /* under mpirun: the ranks measure what they exchange first, all together; then rank 0 alone the rest,
       while the others wait without spinning on the cores it measures (end_probe) */
    comm *cm = NULL;
    if (comm_open(&cm, &err) != ST_OK) return cli_fail(&err);
    hw_desc ranks;
    memset(&ranks, 0, sizeof ranks);
    if (comm_size(cm) > 1) {
        if (comm_rank(cm) == 0) fprintf(stderr, "ranks: %d, measuring their all-gather and reduce-scatter\n", comm_size(cm));
        st_status rs = hw_probe_ranks(cm, (size_t)16 << 20, pc.reps, &ranks, &err);
        if (rs != ST_OK) {
            if (comm_rank(cm) == 0) cli_fail(&err);
            comm_close(cm);
            return 1;
        }
        if (comm_rank(cm) != 0) return end_probe(cm, 0);
    }
    hw_desc hw, base;
    st_status s = ST_OK;
    if (update) {
        if (!store_arg)
            return end_probe(cm, cli_usage_error("probe", "--update re-measures the store directories: give them "
                                                          "with --store"));
        s = cli_load_hw(update, &base, &err);
        pc.base = &base;
    }
    if (s == ST_OK) s = hw_probe(&pc, &hw, &err);
    if (s == ST_OK && comm_size(cm) > 1) {
        hw.nodes = ranks.nodes;
        hw.ranks_per_node = ranks.ranks_per_node;
        if (ranks.shm_gbps > 0) hw.shm_gbps = ranks.shm_gbps, hw.shm_latency_s = ranks.shm_latency_s;
        if (ranks.network_gbps > 0) hw.network_gbps = ranks.network_gbps, hw.network_latency_s = ranks.network_latency_s;
        hw.probe.ranks_allgather_gbps = ranks.probe.ranks_allgather_gbps;
        hw.probe.ranks_reduce_scatter_gbps = ranks.probe.ranks_reduce_scatter_gbps;
    }
    if (s == ST_OK) s = hw_save_json(out, &hw, &err);
    if (s != ST_OK) return end_probe(cm, cli_fail(&err));
    const int rc = end_probe(cm, 0);
    if (rc != 0) return rc;

    char mem[32];
    printf("%s: %s\n", out, hw.name);
    printf("compute: %s, %d cores; sgemm %.3g GFLOP/s at %s's block shapes (%d x %d), head %.3g, attention %.3g; "
           "memory-bound passes %.3g GB/s, a block's weights widened %.3g GB/s\n",
           hw_backend_name(hw.backend), hw.cores, hw.matmul_gflops, hw.probe.model, hw.probe.B, hw.probe.T,
           hw.head_matmul_gflops, hw.attention_gflops, hw.other_gbps, hw.widen_gbps > 0 ? hw.widen_gbps : hw.other_gbps);
    printf("sgemm by rows:");
    for (int i = 0; i < hw.n_matmul_rows; i++)
        printf(" %.0f: %.3g", hw.matmul_by_rows[i].rows, hw.matmul_by_rows[i].gflops);
    printf(" GFLOP/s; head by rows:");
    for (int i = 0; i < hw.n_head_rows; i++) printf(" %.0f: %.3g", hw.head_by_rows[i].rows, hw.head_by_rows[i].gflops);
    printf(" GFLOP/s; %.0f us per compute task\n", hw.task_overhead_s * 1e6);
    printf("block: forward %.4f s, backward (with recompute) %.4f s; head %.4f s\n", hw.probe.block_forward_s,
           hw.probe.block_backward_s, hw.probe.head_s);
    printf("optimizer: AdamW %.0f M parameters/s on %d thread; side by side, compute %.2fx and AdamW %.2fx slower\n",
           hw.adamw_params_per_s / 1e6, hw.adamw_threads, hw.compute_slowdown, hw.optimizer_slowdown);
    if (hw.compute_beside_io > 0 || hw.io_beside_compute > 0)
        printf("beside the drives' transfers: compute %.2fx slower; the transfers beside compute %.2fx slower\n",
               hw.compute_beside_io > 0 ? hw.compute_beside_io : 1, hw.io_beside_compute > 0 ? hw.io_beside_compute : 1);
    for (int p = 0; p < hw.n_ssd; p++) {
        const hw_ssd *d = &hw.ssd[p];
        printf("ssd[%d] %s: read %.3f GB/s, write %.3f GB/s, both at once %.3f + %.3f GB/s", p, d->path, d->read_gbps,
               d->write_gbps, d->mixed_read_gbps, d->mixed_write_gbps);
        if (d->bench_read_gbps > 0)
            printf(" (read and write: the trial run; the test file's cycle: %.3f, %.3f)", d->bench_read_gbps,
                   d->bench_write_gbps);
        printf("\n");
    }
    if (hw.n_ssd == 0) printf("ssd: none measured (--store DIR to add the store's drives)\n");
    if (hw.probe.trial_layers > 0) {
        printf("trial: the executor on %d block%s of %s: compute thread %.3f s a step, %.3f s predicted from the "
               "kernels",
               hw.probe.trial_layers, hw.probe.trial_layers == 1 ? "" : "s", hw.probe.model, hw.probe.trial_work_s,
               hw.probe.trial_predicted_work_s);
        if (hw.probe.trial_long_layers > 0)
            printf("; on %d blocks %.3f s", hw.probe.trial_long_layers, hw.probe.trial_long_work_s);
        printf(": the blocks' tasks %.3fx the rates'%s\n", hw.block_factor > 0 ? hw.block_factor : 1.0,
               hw.probe.trial_ssd_step_s > 0 ? "; the disks' rates are from its run with the optimizer's state on them"
                                             : "");
    }
    printf("store I/O: %.3f CPU s per GB moved (checksums at %.3g GB/s on one core, %.3f s per GB in the kernel)\n",
           hw.io_cpu_s_per_gb, hw.probe.checksum_gbps, hw.probe.io_kernel_s_per_gb);
    printf("memory: %s (device and host are the same memory on the CPU backend)\n",
           st_format_bytes((double)hw.host_bytes, mem, sizeof mem));
    if (hw.nodes * hw.ranks_per_node > 1)
        printf("ranks: %d on %d node%s; each rank received %.3g GB/s in an all-gather, %.3g GB/s in a reduce-scatter "
               "(its sum included); %s %.3g GB/s per node, %.0f us per collective\n",
               hw.nodes * hw.ranks_per_node, hw.nodes, hw.nodes == 1 ? "" : "s", hw.probe.ranks_allgather_gbps,
               hw.probe.ranks_reduce_scatter_gbps, hw.nodes == 1 ? "shared memory" : "network",
               hw.nodes == 1 ? hw.shm_gbps : hw.network_gbps,
               1e6 * (hw.nodes == 1 ? hw.shm_latency_s : hw.network_latency_s));
    return 0;
}
