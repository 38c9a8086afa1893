/* cmd_probe.c - `strata probe`: measures this machine (compute, AdamW, the
 * store directories) and writes a hardware description (strata/hw.h) for
 * `strata simulate`. Progress on stderr, a summary on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "strata/probe.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: strata probe [--store DIR[,DIR...]] [--out FILE] [--size BYTES] [--name NAME]\n"
            "                    [--model NAME] [--micro-batch B] [--seq T] [--reps N]\n"
            "\n"
            "Measures this machine and writes a hardware description (JSON) for\n"
            "'strata simulate': sgemm at a GPT block's shapes, the LM head, memory-bound\n"
            "passes and the attention (from a block's forward and backward), AdamW on one\n"
            "thread as the executor's optimizer runs it, how much compute and AdamW slow\n"
            "each other down on shared cores, and O_DIRECT read and write bandwidth of each\n"
            "store directory, alone and both at once. About 10 s with the defaults.\n"
            "\n"
            "  --store DIR[,DIR...]  store directories to measure, one per drive (default: none)\n"
            "  --out FILE            where to write the description (default hw.json)\n"
            "  --size BYTES          test file per directory (default 256M; K, M, G suffixes)\n"
            "  --name NAME           the description's name (default probe-<host name>)\n"
            "  --model NAME          the shape compute is measured at (default gpt2-124m)\n"
            "  --micro-batch B       sequences per micro-batch at that shape (default 4)\n"
            "  --seq T               tokens per sequence (default 256)\n"
            "  --reps N              timed repetitions per measurement, median (default 3)\n"
            "  --update FILE         measure only the store directories again, keep the rest of FILE\n"
            "                        (a disk's rates drift; re-measure them before a run you compare)\n");
}

static void progress(void *arg, const char *line) {
    (void)arg;
    fprintf(stderr, "%s\n", line);
}

int cmd_probe(int argc, char **argv) {
    hw_probe_config pc = hw_probe_defaults();
    const char *out = "hw.json", *store_arg = NULL, *update = NULL;
    long B = pc.B, T = pc.T, reps = pc.reps;
    st_error err = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) return cli_usage_error("probe", "unknown flag or missing value: %s", a);
        const char *v = argv[++i];
        st_status s = ST_OK;
        if (!strcmp(a, "--store")) store_arg = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--size")) s = cli_parse_size(a, v, &pc.ssd_bytes, &err);
        else if (!strcmp(a, "--name")) pc.name = v;
        else if (!strcmp(a, "--model")) pc.model = v;
        else if (!strcmp(a, "--micro-batch")) s = cli_parse_int(a, v, 1, 1 << 16, &B, &err);
        else if (!strcmp(a, "--seq")) s = cli_parse_int(a, v, 1, 1 << 20, &T, &err);
        else if (!strcmp(a, "--reps")) s = cli_parse_int(a, v, 1, 32, &reps, &err);
        else if (!strcmp(a, "--update")) update = v;
        else return cli_usage_error("probe", "unknown flag: %s", a);
        if (s != ST_OK) return cli_usage_error("probe", "%s", err.msg);
    }
    if (pc.ssd_bytes < 8192 || pc.ssd_bytes % 4096)
        return cli_usage_error("probe", "--size must be a multiple of 4096 and at least 8K");
    if (pc.name && (!pc.name[0] || strlen(pc.name) >= 128)) return cli_usage_error("probe", "--name must be 1 to 127 characters");
    pc.B = (int)B;
    pc.T = (int)T;
    pc.reps = (int)reps;
    const char *dirs[HW_MAX_SSD];
    char *list = store_arg ? strdup(store_arg) : NULL;
    if (store_arg && !list) return cli_error("out of memory");
    for (char *save = NULL, *tok = list ? strtok_r(list, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save)) {
        if (pc.n_ssd == HW_MAX_SSD) {
            free(list);
            return cli_usage_error("probe", "at most %d store directories", HW_MAX_SSD);
        }
        dirs[pc.n_ssd++] = tok;
    }
    if (store_arg && pc.n_ssd == 0) {
        free(list);
        return cli_usage_error("probe", "--store lists no directory");
    }
    pc.ssd_dirs = dirs;
    pc.progress = progress;
    hw_desc hw, base;
    st_status s = ST_OK;
    if (update) {
        if (!store_arg) {
            free(list);
            return cli_usage_error("probe", "--update re-measures the store directories: give them with --store");
        }
        s = hw_load_json(update, &base, &err);
        pc.base = &base;
    }
    if (s == ST_OK) s = hw_probe(&pc, &hw, &err);
    if (s == ST_OK) s = hw_save_json(out, &hw, &err);
    free(list);
    if (s != ST_OK) return cli_fail(&err);

    char mem[32];
    printf("%s: %s\n", out, hw.name);
    printf("compute: %s, %d cores; sgemm %.3g GFLOP/s at %s's block shapes (%d x %d), head %.3g, attention %.3g; "
           "memory-bound passes %.3g GB/s\n",
           hw_backend_name(hw.backend), hw.cores, hw.matmul_gflops, hw.probe.model, hw.probe.B, hw.probe.T,
           hw.head_matmul_gflops, hw.attention_gflops, hw.other_gbps);
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
    for (int p = 0; p < hw.n_ssd; p++)
        printf("ssd[%d] %s: read %.3f GB/s, write %.3f GB/s, both at once %.3f + %.3f GB/s\n", p, hw.ssd[p].path,
               hw.ssd[p].read_gbps, hw.ssd[p].write_gbps, hw.ssd[p].mixed_read_gbps, hw.ssd[p].mixed_write_gbps);
    if (hw.n_ssd == 0) printf("ssd: none measured (--store DIR to add the store's drives)\n");
    printf("memory: %s (device and host are the same memory on the CPU backend)\n",
           st_format_bytes((double)hw.host_bytes, mem, sizeof mem));
    return 0;
}
