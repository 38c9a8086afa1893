/* store_phases.c - the optimizer's phased streams through the tensor store,
 * without compute: groups of three segments of master weights and both
 * moments read (each kind its own tensor, as the executor keeps them), then
 * written back and waited for, group after group, in several
 * configurations taken in turn, round after round, so that the drive's
 * drift falls on all of them alike:
 *
 *   8M       8 MiB segments (72 MiB a phase), checksums checked
 *   8M-nocrc the same, checksums not checked on reads
 *   8M-1buf  8 MiB segments, every read of a phase into one 8 MiB buffer
 *            (the bytes are garbage: only the destination's size changes)
 *   4M       4 MiB segments (36 MiB a phase)
 *   2M       2 MiB segments (18 MiB a phase): the executor's default
 *
 * Prints each configuration's read and write GB/s (10^9 bytes over the
 * sum of its phases), the median over the rounds.
 *
 *   cmake --build build --target store_phases
 *   build/store_phases DIR [MiB=576] [ROUNDS=4]
 *
 * MiB is each configuration's state (all three kinds), a multiple of 72.
 * DIR must exist; one-path stores are made inside it and removed after. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strata/base.h"
#include "strata/fs.h"
#include "strata/store.h"

#define KINDS 3
#define SEGS_PER_PHASE 3
#define MAX_ROUNDS 50

typedef struct phases_case {
    const char *name;
    uint64_t seg_bytes;
    int check;      /* checksums checked on reads */
    int one_buffer; /* every read of a phase into buffer 0 */
} phases_case;

static const phases_case cases[] = {
    {"8M", 8u << 20, 1, 0}, {"8M-nocrc", 8u << 20, 0, 0}, {"8M-1buf", 8u << 20, 1, 1},
    {"4M", 4u << 20, 1, 0}, {"2M", 2u << 20, 1, 0},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static int fail(const char *what, const st_error *err) {
    fprintf(stderr, "store_phases: %s: %s\n", what, err->msg);
    return 1;
}

/* One pass over the state of case c in s: *read_s and *write_s the sums of
 * its phases. */
static int one_pass(store *s, const phases_case *c, int n_segs, char **buf, double *read_s, double *write_s) {
    st_error err = {0};
    store_op op[KINDS * SEGS_PER_PHASE];
    *read_s = *write_s = 0;
    for (int j0 = 0; j0 < n_segs; j0 += SEGS_PER_PHASE) {
        const double t0 = st_now();
        int n = 0;
        for (int j = j0; j < j0 + SEGS_PER_PHASE; j++)
            for (int k = 0; k < KINDS; k++, n++)
                if (store_read_async(s, (store_key){(store_kind)(STORE_MASTER + k), j, 0}, buf[c->one_buffer ? 0 : n],
                                     c->seg_bytes, &op[n], &err) != ST_OK)
                    return fail("read", &err);
        for (int i = 0; i < n; i++)
            if (store_op_wait(&op[i], &err) != ST_OK) return fail("read", &err);
        const double t1 = st_now();
        n = 0;
        for (int j = j0; j < j0 + SEGS_PER_PHASE; j++)
            for (int k = 0; k < KINDS; k++, n++)
                if (store_write_async(s, (store_key){(store_kind)(STORE_MASTER + k), j, 0}, buf[n], c->seg_bytes,
                                      &op[n], &err) != ST_OK)
                    return fail("write", &err);
        for (int i = 0; i < n; i++)
            if (store_op_wait(&op[i], &err) != ST_OK) return fail("write", &err);
        *read_s += t1 - t0;
        *write_s += st_now() - t1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [MiB=576] [ROUNDS=4]\n", argv[0]);
        return 2;
    }
    const uint64_t total = (uint64_t)(argc > 2 ? atoi(argv[2]) : 576) << 20;
    const int rounds = argc > 3 ? atoi(argv[3]) : 4;
    const uint64_t phase_max = (uint64_t)KINDS * SEGS_PER_PHASE * (8u << 20);
    if (total < phase_max || total % phase_max || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "store_phases: MiB must be a positive multiple of 72, ROUNDS 1 to %d\n", MAX_ROUNDS);
        return 2;
    }
    store *st[N_CASES];
    char dir[N_CASES][4096];
    char *buf[KINDS * SEGS_PER_PHASE];
    for (int i = 0; i < KINDS * SEGS_PER_PHASE; i++) {
        if (!(buf[i] = st_alloc_io(8u << 20))) return 1;
        memset(buf[i], 0x5a + i, 8u << 20);
    }
    st_error err = {0};
    for (int c = 0; c < N_CASES; c++) {
        snprintf(dir[c], sizeof dir[c], "%s/store-phases-%s", argv[1], cases[c].name);
        if (st_mkdir_p(dir[c], &err) != ST_OK) return fail("mkdir", &err);
        const char *paths[1] = {dir[c]};
        store_config sc = store_default_config();
        sc.paths = paths;
        sc.n_paths = 1;
        sc.mode = STORE_CREATE;
        sc.skip_checksums = !cases[c].check;
        if (store_open(&sc, &st[c], NULL, 0, &err) != ST_OK) return fail("open", &err);
        const int n_segs = (int)(total / KINDS / cases[c].seg_bytes);
        for (int j = 0; j < n_segs; j++)
            for (int k = 0; k < KINDS; k++) {
                const store_key key = {(store_kind)(STORE_MASTER + k), j, 0};
                if (store_create_tensor(st[c], key, cases[c].seg_bytes, STORE_TIER_SSD, 0, &err) != ST_OK ||
                    store_write(st[c], key, buf[0], cases[c].seg_bytes, &err) != ST_OK)
                    return fail("create", &err);
            }
    }
    double rd[N_CASES][MAX_ROUNDS], wr[N_CASES][MAX_ROUNDS];
    for (int r = -1; r < rounds; r++)   /* round -1 untimed: every tensor overwritten once by a phase */
        for (int c = 0; c < N_CASES; c++) {
            double read_s, write_s;
            if (one_pass(st[c], &cases[c], (int)(total / KINDS / cases[c].seg_bytes), buf, &read_s, &write_s)) return 1;
            if (r < 0) continue;
            rd[c][r] = (double)total / read_s / 1e9;
            wr[c][r] = (double)total / write_s / 1e9;
        }
    printf("%d MiB of state a configuration, %d rounds, phases of %d segments x %d kinds\n", (int)(total >> 20), rounds,
           SEGS_PER_PHASE, KINDS);
    printf("%-10s %10s %10s\n", "case", "read GB/s", "write GB/s");
    for (int c = 0; c < N_CASES; c++) {
        printf("%-10s %10.3f %10.3f\n", cases[c].name, st_median(rd[c], rounds), st_median(wr[c], rounds));
        store_close(st[c]);
        store_dirs d;
        if (store_dirs_parse(dir[c], &d, &err) != ST_OK || store_remove(&d, &err) != ST_OK) return fail("remove", &err);
        rmdir(dir[c]);
    }
    for (int i = 0; i < KINDS * SEGS_PER_PHASE; i++) st_free_aligned(buf[i]);
    return 0;
}
