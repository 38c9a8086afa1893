/* store_checksum_cost.c - what checking chunk checksums costs on reads from
 * the tensor store: read bandwidth and process CPU time per GiB with the
 * check on and off, in alternating rounds on the same tensors, plus the
 * raw speed of st_crc32c on one core.
 *
 *   cmake --build build --target store_checksum_cost
 *   build/store_checksum_cost DIR [MiB=1024] [ROUNDS=6]
 *
 * DIR must exist; a one-path store is made inside it and removed after. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strata/checksum.h"
#include "strata/store.h"

#define TENSOR_BYTES ((uint64_t)32 << 20)

static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [MiB=1024] [ROUNDS=6]\n", argv[0]);
        return 2;
    }
    uint64_t total = (uint64_t)(argc > 2 ? atoi(argv[2]) : 1024) << 20;
    int rounds = argc > 3 ? atoi(argv[3]) : 6;
    if (total < TENSOR_BYTES || rounds < 1 || rounds > 100) return 2;
    int n_tensors = (int)(total / TENSOR_BYTES);

    /* Raw checksum speed, one core, from cache-resident 1 MiB buffers. */
    size_t n = 1u << 20;
    unsigned char *b = malloc(n);
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 131);
    uint32_t c = 0;
    double t0 = st_now();
    for (int i = 0; i < 2000; i++) c = st_crc32c(c, b, n);
    double hw = 2000.0 * n / (st_now() - t0) / 1e9;
    t0 = st_now();
    for (int i = 0; i < 20; i++) c = st_crc32c_portable(c, b, n);
    double sw = 20.0 * n / (st_now() - t0) / 1e9;
    free(b);
    printf("st_crc32c: %.1f GB/s on one core (%s); table fallback %.2f GB/s [%08x]\n", hw,
           st_crc32c_hardware() ? "SSE4.2 crc32, 3 streams" : "no crc32 instruction", sw, c);

    char root[3900], dir[4000];
    snprintf(root, sizeof root, "%.3800s/strata-checksum-cost-%ld", argv[1], (long)getpid());
    snprintf(dir, sizeof dir, "%s/p0", root);
    if (mkdir(root, 0755) != 0 || mkdir(dir, 0755) != 0) {
        perror(root);
        return 1;
    }
    const char *paths[1] = {dir};
    store_config cfg = store_default_config();
    cfg.paths = paths;
    cfg.n_paths = 1;
    cfg.mode = STORE_CREATE;
    store *s;
    st_error err = {0};
    if (store_open(&cfg, &s, NULL, 0, &err) != ST_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    unsigned char *buf = st_alloc_aligned(4096, TENSOR_BYTES);
    st_rng r;
    st_rng_seed(&r, 3);
    for (uint64_t i = 0; i < TENSOR_BYTES / 8; i++) ((uint64_t *)buf)[i] = st_rng_next(&r);
    double tw = st_now(), cw = cpu_seconds();
    for (int i = 0; i < n_tensors; i++) {
        store_key k = {STORE_MASTER, i, 0};
        if (store_create_tensor(s, k, TENSOR_BYTES, STORE_TIER_SSD, 0, &err) != ST_OK ||
            store_write(s, k, buf, TENSOR_BYTES, &err) != ST_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
    }
    if (store_commit(s, &err) != ST_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    tw = st_now() - tw;
    cw = cpu_seconds() - cw;
    printf("write %d x 32 MiB + commit: %.2f GB/s, %.3f CPU s per GiB (checksums always computed on write)\n",
           n_tensors, (double)total / tw / 1e9, cw / ((double)total / (1u << 30)));

    /* Reads two tensors ahead, like a trainer streaming blocks. */
    store_op ops[3];
    unsigned char *bufs[3];
    for (int i = 0; i < 3; i++) bufs[i] = st_alloc_aligned(4096, TENSOR_BYTES);
    double bw[2][100], cpu[2][100];
    for (int round = 0; round < 2 * rounds; round++) {
        int verify = (round % 2) ^ ((round / 2) % 2);   /* on/off, off/on, ... */
        store_set_verify(s, verify);
        double t = st_now(), cu = cpu_seconds();
        for (int i = 0; i < n_tensors + 2; i++) {
            if (i < n_tensors &&
                store_read_async(s, (store_key){STORE_MASTER, i, 0}, bufs[i % 3], TENSOR_BYTES, &ops[i % 3], &err) != ST_OK) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
            if (i >= 2 && store_op_wait(&ops[(i - 2) % 3], &err) != ST_OK) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
        }
        t = st_now() - t;
        cu = cpu_seconds() - cu;
        bw[verify][round / 2] = (double)total / t / 1e9;
        cpu[verify][round / 2] = cu / ((double)total / (1u << 30));
        printf("round %2d: checks %-3s read %.3f GB/s, %.3f CPU s per GiB\n", round, verify ? "on" : "off",
               bw[verify][round / 2], cpu[verify][round / 2]);
    }
    double bon = st_median(bw[1], rounds), boff = st_median(bw[0], rounds);
    double con = st_median(cpu[1], rounds), coff = st_median(cpu[0], rounds);
    printf("median over %d rounds each: checks on %.3f GB/s, %.3f CPU s/GiB; off %.3f GB/s, %.3f CPU s/GiB\n", rounds, bon,
           con, boff, coff);
    printf("cost of checking: %+.1f%% read bandwidth, %+.3f CPU s per GiB read\n", (bon / boff - 1) * 100, con - coff);
    for (int i = 0; i < 3; i++) st_free_aligned(bufs[i]);
    st_free_aligned(buf);
    store_close(s);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : 1;
}
