/* cmd_version.c - `strata version`. */
#include <stdio.h>

#include "cli/cli.h"

#define STRATA_VERSION "0.1.0"

int cmd_version(int argc, char **argv) {
    (void)argc;
    (void)argv;
    printf("strata %s\n", STRATA_VERSION);
#ifdef __AVX2__
    printf("kernels: AVX2/FMA\n");
#else
    printf("kernels: portable C\n");
#endif
    return 0;
}
