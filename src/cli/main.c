/* main.c - `strata <command> [flags]`: dispatch to a subcommand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "strata/backend.h"

/* Each subcommand's entry point, defined in its cmd_<name>.c. */
int cmd_version(int argc, char **argv);
int cmd_encode(int argc, char **argv);
int cmd_decode(int argc, char **argv);
int cmd_prepare(int argc, char **argv);
int cmd_iobench(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_probe(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_fsck(int argc, char **argv);

static const cli_command commands[] = {
    {"train", "train a GPT on a dataset (the main job)", cmd_train},
    {"eval", "mean next-token loss of a model on a token file", cmd_eval},
    {"sample", "generate text from a trained model", cmd_sample},
    {"probe", "measure this machine into a hardware description (JSON)", cmd_probe},
    {"simulate", "predict an offloaded training configuration on a described machine", cmd_simulate},
    {"plan", "choose schedule, micro-batch, placement and alpha for a model on a described machine", cmd_plan},
    {"fsck", "verify a run's tensor store: manifest and every checksum", cmd_fsck},
    {"export", "write the weights of a run's last store commit as a Hugging Face safetensors file", cmd_export},
    {"iobench", "measure storage read/write bandwidth per path (vs fio)", cmd_iobench},
    {"prepare", "tokenize text files into a dataset for training", cmd_prepare},
    {"encode", "text on stdin to GPT-2 token ids", cmd_encode},
    {"decode", "GPT-2 token ids (stdin or a token file) to text", cmd_decode},
    {"version", "print the version and build configuration", cmd_version},
};

/* Settings that a library reads once, as the process starts, so that the
 * process starts itself again with them set (a variable set in this
 * process does not reach them: libc's own constructor, which runs after the
 * executable's preinit functions, sets the environment back to the one the
 * process started with). A setting the user made is kept; if the process
 * cannot start itself again, it runs on as it is.
 *
 * OpenMP threads that wait for the next parallel region spin by default
 * (libgomp: some 300k turns), and on a machine whose cores the optimizer
 * worker and the store's threads share with compute that spinning is time
 * taken from them (docs/BENCHMARKS.md, "OpenMP's wait policy"): passive,
 * unless the user set a policy or a spin count.
 *
 * OpenBLAS picks its kernels by the CPU's model as it loads, and one newer
 * than the library gets its generic SSE3 kernels: OPENBLAS_CORETYPE names
 * the ones the CPU's instructions allow (strata/backend.h,
 * cpu_blas_kernels_better), unless the user named some. */
static void prefer_process_settings(char **argv) {
    int again = 0;
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT") && setenv("OMP_WAIT_POLICY", "PASSIVE", 1) == 0)
        again = 1;
    const char *blas = getenv("OPENBLAS_CORETYPE") ? NULL : cpu_blas_kernels_better();
    if (blas && setenv("OPENBLAS_CORETYPE", blas, 1) == 0) again = 1;
    if (again) execv("/proc/self/exe", argv);   /* returns only when it failed */
}

static void print_usage(FILE *f) {
    fprintf(f, "usage: strata <command> [flags]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'strata <command> --help' for a command's flags.\n");
}

int main(int argc, char **argv) {
    prefer_process_settings(argv);
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        print_usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "strata: unknown command '%s'\n\n", argv[1]);
    print_usage(stderr);
    return 2;
}
