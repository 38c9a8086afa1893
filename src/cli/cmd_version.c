/* cmd_version.c - `strata version`. */
#include <stdio.h>

#include "cli/cli.h"
#include "cli/cli_flags.h"
#include "strata/backend.h"

#define STRATA_VERSION "0.1.0"

static const cli_spec version_spec = {
    .command = "version",
    .usage = "usage: strata version",
    .about = "Prints the version and the build configuration: which kernels this build runs,\n"
             "and which of OpenBLAS's kernel sets the matrix products run on this CPU.",
};

int cmd_version(int argc, char **argv) {
    cli_parsed flags;
    int parsed = cli_parse_flags(&version_spec, argc, argv, NULL, &flags);   /* no flags: no options */
    if (parsed != CLI_PARSED) return parsed;
    printf("strata %s\n", STRATA_VERSION);
#ifdef __AVX2__
    printf("kernels: AVX2/FMA\n");
#else
    printf("kernels: portable C\n");
#endif
    printf("matrix products: OpenBLAS, %s kernels\n", cpu_blas_kernels());
    return 0;
}
