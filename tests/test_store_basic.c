/* test_store_basic.c - the tensor store: round trips of awkward sizes on one
 * and three paths, striping by weight, shadow slots, commit and reopen,
 * volatile and host-tier tensors, budgets, the buffer pool, counters. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "strata/checksum.h"
#include "strata/store.h"
#include "store_testutil.h"

static int setup(void **state) { return fixture_setup(state, "tmp-store-basic"); }
static int teardown(void **state) { return fixture_teardown(state); }

static store *open_store(fixture *f, int n_paths, store_open_mode mode, const double *weights, uint64_t chunk) {
    store_config cfg = store_default_config();
    cfg.paths = f->paths;
    cfg.n_paths = n_paths;
    cfg.mode = mode;
    cfg.weights = weights;
    cfg.host_budget_bytes = 64u << 20;
    if (chunk) cfg.chunk_bytes = chunk;
    store *s = NULL;
    st_error err = {0};
    st_status st = store_open(&cfg, &s, NULL, 0, &err);
    if (st != ST_OK) print_error("store_open: %s\n", err.msg);
    assert_int_equal(st, ST_OK);
    return s;
}

static void fill(unsigned char *p, uint64_t n, uint64_t seed) {
    st_rng r;
    st_rng_seed(&r, seed);
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = st_rng_next(&r);
        memcpy(p + i, &v, 8);
    }
    for (; i < n; i++) p[i] = (unsigned char)st_rng_next(&r);
}

static void *abuf(uint64_t bytes) {
    void *p = st_alloc_aligned(4096, (size_t)store_padded_bytes(bytes));
    assert_non_null(p);
    return p;
}

/* Writes a tensor of each awkward size, reads each back, commits, reopens
 * and reads again. */
static void round_trips(fixture *f, int n_paths) {
    static const uint64_t sizes[] = {1, 4095, 4096, 4097, (1u << 20) - 1, (1u << 20) + 1, (3u << 20) + 12345,
                                     (300ull << 20) + 1};
    enum { N = sizeof sizes / sizeof sizes[0] };
    store *s = open_store(f, n_paths, STORE_CREATE, NULL, 0);
    st_error err = {0};
    for (int i = 0; i < N; i++) {
        store_key k = {STORE_MASTER, i, 0};
        assert_int_equal(store_create_tensor(s, k, sizes[i], STORE_TIER_SSD, 0, &err), ST_OK);
        unsigned char *w = abuf(sizes[i]), *r = abuf(sizes[i]);
        fill(w, sizes[i], 100 + (uint64_t)i);
        assert_int_equal(store_write(s, k, w, store_padded_bytes(sizes[i]), &err), ST_OK);
        memset(r, 0, sizes[i]);
        assert_int_equal(store_read(s, k, r, store_padded_bytes(sizes[i]), &err), ST_OK);
        assert_memory_equal(w, r, sizes[i]);
        st_free_aligned(w);
        st_free_aligned(r);
    }
    assert_int_equal(store_commit(s, &err), ST_OK);
    store_counters c;
    store_get_counters(s, &c);
    for (int p = 0; p < n_paths; p++) assert_true(c.bytes_written[STORE_MASTER][p] > 0);   /* every path used */
    store_close(s);

    s = open_store(f, n_paths, STORE_OPEN_EXISTING, NULL, 0);
    assert_int_equal(store_generation(s), 1);
    assert_int_equal(store_tensor_count(s), N);
    for (int i = 0; i < N; i++) {
        store_key k = {STORE_MASTER, i, 0};
        unsigned char *w = abuf(sizes[i]), *r = abuf(sizes[i]);
        fill(w, sizes[i], 100 + (uint64_t)i);
        assert_int_equal(store_read(s, k, r, store_padded_bytes(sizes[i]), &err), ST_OK);
        assert_memory_equal(w, r, sizes[i]);
        st_free_aligned(w);
        st_free_aligned(r);
    }
    uint64_t bad = 99;
    assert_int_equal(store_scrub(s, &bad, &err), ST_OK);
    assert_int_equal(bad, 0);
    store_close(s);
}

static void test_round_trips_one_path(void **state) { round_trips(*state, 1); }
static void test_round_trips_three_paths(void **state) { round_trips(*state, 3); }

/* Weights 3:1:2 put 3/6, 1/6 and 2/6 of a tensor's chunks on the paths, and
 * each chunk lands where store_locate says. */
static void test_striping_follows_weights(void **state) {
    fixture *f = *state;
    double weights[3] = {3, 1, 2};
    store *s = open_store(f, 3, STORE_CREATE, weights, 64 * 1024);
    store_info info;
    store_get_info(s, &info);
    assert_true(info.weights[0] > 0.49 && info.weights[0] < 0.51);
    assert_true(info.weights[1] > 0.16 && info.weights[1] < 0.17);
    st_error err = {0};
    uint64_t n = 600 * 64 * 1024;   /* 600 chunks: 100 periods of 6 */
    store_key k = {STORE_ADAM_M, 0, 0};
    assert_int_equal(store_create_tensor(s, k, n, STORE_TIER_SSD, 0, &err), ST_OK);
    unsigned char *w = abuf(n);
    fill(w, n, 5);
    assert_int_equal(store_write(s, k, w, n, &err), ST_OK);
    store_counters c;
    store_get_counters(s, &c);
    assert_int_equal(c.bytes_written[STORE_ADAM_M][0], n / 6 * 3);
    assert_int_equal(c.bytes_written[STORE_ADAM_M][1], n / 6);
    assert_int_equal(c.bytes_written[STORE_ADAM_M][2], n / 6 * 2);
    /* The bytes are really there: read a few through the data files. */
    for (uint64_t off = 0; off < n; off += 64 * 1024 * 37 + 999) {
        int p;
        char file[1024];
        uint64_t foff;
        assert_int_equal(store_locate(s, k, off, &p, file, sizeof file, &foff, &err), ST_OK);
        assert_non_null(strstr(file, f->dirs[p]));
        int fd = open(file, O_RDONLY);
        assert_true(fd >= 0);
        unsigned char byte;
        assert_int_equal(pread(fd, &byte, 1, (off_t)foff), 1);
        close(fd);
        assert_int_equal(byte, w[off]);
    }
    st_free_aligned(w);
    store_close(s);
}

/* A new version never lands on the committed version's bytes; an
 * uncommitted write is visible to reads but not after a reopen. */
static void test_shadow_versions_and_reopen(void **state) {
    fixture *f = *state;
    store *s = open_store(f, 2, STORE_CREATE, NULL, 64 * 1024);
    st_error err = {0};
    uint64_t n = 300 * 1024 + 7;
    store_key k = {STORE_WEIGHTS, 1, 0};
    assert_int_equal(store_create_tensor(s, k, n, STORE_TIER_SSD, 0, &err), ST_OK);
    unsigned char *v1 = abuf(n), *v2 = abuf(n), *r = abuf(n);
    fill(v1, n, 1);
    fill(v2, n, 2);
    assert_int_equal(store_write(s, k, v1, n + 4096, &err), ST_OK);
    assert_int_equal(store_set_user_meta(s, "step=1", 6, &err), ST_OK);
    assert_int_equal(store_commit(s, &err), ST_OK);
    int p1;
    uint64_t off1;
    assert_int_equal(store_locate(s, k, 0, &p1, NULL, 0, &off1, &err), ST_OK);
    /* v2, twice (both land in the same shadow slot), not committed. */
    assert_int_equal(store_write(s, k, v2, n + 4096, &err), ST_OK);
    assert_int_equal(store_write(s, k, v2, n + 4096, &err), ST_OK);
    int p2;
    uint64_t off2;
    assert_int_equal(store_locate(s, k, 0, &p2, NULL, 0, &off2, &err), ST_OK);
    assert_int_equal(p1, p2);
    assert_int_not_equal(off1, off2);
    assert_int_equal(store_read(s, k, r, n + 4096, &err), ST_OK);
    assert_memory_equal(r, v2, n);
    store_tensor_info info;
    assert_int_equal(store_tensor_info_of(s, k, &info, &err), ST_OK);
    assert_true(info.dirty);
    assert_int_equal(store_set_user_meta(s, "step=2", 6, &err), ST_OK);
    store_close(s);   /* no commit */

    s = open_store(f, 2, STORE_OPEN_EXISTING, NULL, 0);
    assert_int_equal(store_generation(s), 1);
    size_t mn;
    const char *meta = store_user_meta(s, &mn);
    assert_int_equal(mn, 6);
    assert_memory_equal(meta, "step=1", 6);
    assert_int_equal(store_read(s, k, r, n + 4096, &err), ST_OK);
    assert_memory_equal(r, v1, n);
    /* Two more commits: versions alternate between the two slots. */
    assert_int_equal(store_write(s, k, v2, n + 4096, &err), ST_OK);
    assert_int_equal(store_commit(s, &err), ST_OK);
    assert_int_equal(store_write(s, k, v1, n + 4096, &err), ST_OK);
    assert_int_equal(store_commit(s, &err), ST_OK);
    uint64_t off3;
    assert_int_equal(store_locate(s, k, 0, NULL, NULL, 0, &off3, &err), ST_OK);
    assert_int_equal(off3, off1);
    store_close(s);
    s = open_store(f, 2, STORE_OPEN_EXISTING, NULL, 0);
    assert_int_equal(store_generation(s), 3);
    assert_int_equal(store_read(s, k, r, n + 4096, &err), ST_OK);
    assert_memory_equal(r, v1, n);
    store_close(s);
    st_free_aligned(v1);
    st_free_aligned(v2);
    st_free_aligned(r);
}

static store *open_previous(fixture *f, int n_paths, st_status expect) {
    store_config cfg = store_default_config();
    cfg.paths = f->paths;
    cfg.n_paths = n_paths;
    cfg.read_only = 1;
    cfg.previous = 1;
    store *s = NULL;
    st_error err = {0};
    assert_int_equal(store_open(&cfg, &s, NULL, 0, &err), expect);
    return s;
}

static void assert_meta(store *s, const char *want) {
    size_t n;
    const char *meta = store_user_meta(s, &n);
    assert_int_equal(n, strlen(want));
    assert_memory_equal(meta, want, n);
}

static void assert_tensor(store *s, store_key k, const unsigned char *want, uint64_t n, unsigned char *r) {
    st_error err = {0};
    assert_int_equal(store_read(s, k, r, store_padded_bytes(n), &err), ST_OK);
    assert_memory_equal(r, want, n);
}

/* The commit before the last: kept until the store next writes, readable
 * (store_config.previous) and restorable (store_revert_commit) with every
 * tensor as it was: the rewritten, the host-tier, the deleted since; the
 * tensors created since are gone. */
static void test_previous_commit_and_revert(void **state) {
    fixture *f = *state;
    store *s = open_store(f, 2, STORE_CREATE, NULL, 64 * 1024);
    st_error err = {0};
    store_dirs dirs;
    char list[1300];
    snprintf(list, sizeof list, "%s,%s", f->paths[0], f->paths[1]);
    assert_int_equal(store_dirs_parse(list, &dirs, &err), ST_OK);
    const uint64_t n = 200 * 1024 + 3;
    const store_key a = {STORE_MASTER, 0, 0}, h = {STORE_ADAM_M, 0, 0}, d = {STORE_ADAM_V, 0, 0}, nk = {STORE_MASTER, 1, 0};
    unsigned char *v[5], *r = abuf(n);
    for (int i = 0; i < 5; i++) fill(v[i] = abuf(n), n, 10 + (uint64_t)i);
    assert_int_equal(store_create_tensor(s, a, n, STORE_TIER_SSD, 0, &err), ST_OK);
    assert_int_equal(store_create_tensor(s, h, n, STORE_TIER_HOST, 0, &err), ST_OK);
    assert_int_equal(store_create_tensor(s, d, n, STORE_TIER_SSD, 0, &err), ST_OK);
    assert_int_equal(store_write(s, a, v[0], store_padded_bytes(n), &err), ST_OK);
    assert_int_equal(store_write(s, h, v[1], store_padded_bytes(n), &err), ST_OK);
    assert_int_equal(store_write(s, d, v[2], store_padded_bytes(n), &err), ST_OK);
    assert_int_equal(store_set_user_meta(s, "step=1", 6, &err), ST_OK);
    assert_int_equal(store_commit(s, &err), ST_OK);
    /* the next commit rewrites a and h, deletes d, creates nk */
    assert_int_equal(store_write(s, a, v[3], store_padded_bytes(n), &err), ST_OK);
    assert_int_equal(store_write(s, h, v[4], store_padded_bytes(n), &err), ST_OK);
    assert_int_equal(store_delete_tensor(s, d, &err), ST_OK);
    assert_int_equal(store_create_tensor(s, nk, n, STORE_TIER_SSD, 0, &err), ST_OK);
    assert_int_equal(store_write(s, nk, v[4], store_padded_bytes(n), &err), ST_OK);
    assert_int_equal(store_set_user_meta(s, "step=2", 6, &err), ST_OK);
    assert_int_equal(store_commit(s, &err), ST_OK);
    const uint64_t gen = store_generation(s);
    store_close(s);

    /* the commit of step 1, read-only, then as the store's last again */
    for (int reverted = 0; reverted < 2; reverted++) {
        if (reverted) assert_int_equal(store_revert_commit(&dirs, &err), ST_OK);
        s = reverted ? open_store(f, 2, STORE_OPEN_EXISTING, NULL, 0) : open_previous(f, 2, ST_OK);
        assert_int_equal(store_generation(s), gen - 1);
        assert_meta(s, "step=1");
        assert_tensor(s, a, v[0], n, r);
        assert_tensor(s, h, v[1], n, r);
        assert_tensor(s, d, v[2], n, r);
        assert_false(store_has_tensor(s, nk));
        uint64_t bad = 1;
        assert_int_equal(store_scrub(s, &bad, &err), ST_OK);
        assert_int_equal(bad, 0);
        store_close(s);
    }
    store_config rw = store_default_config();
    rw.paths = f->paths;
    rw.n_paths = 2;
    rw.previous = 1;
    assert_int_equal(store_open(&rw, &s, NULL, 0, &err), ST_EINVAL);   /* only read-only */
    assert_int_equal(store_revert_commit(&dirs, &err), ST_ENOENT);   /* one step back only */
    open_previous(f, 2, ST_ENOENT);

    /* a write after a commit drops the commit before: its slots are fair game */
    s = open_store(f, 2, STORE_OPEN_EXISTING, NULL, 0);
    assert_int_equal(store_write(s, a, v[3], store_padded_bytes(n), &err), ST_OK);
    assert_int_equal(store_set_user_meta(s, "step=3", 6, &err), ST_OK);
    assert_int_equal(store_commit(s, &err), ST_OK);
    store_close(s);
    s = open_store(f, 2, STORE_OPEN_EXISTING, NULL, 0);   /* reopened for work, no write yet: still kept */
    store_close(s);
    store_close(open_previous(f, 2, ST_OK));
    s = open_store(f, 2, STORE_OPEN_EXISTING, NULL, 0);
    assert_int_equal(store_write(s, a, v[4], store_padded_bytes(n), &err), ST_OK);
    store_close(s);   /* not committed */
    open_previous(f, 2, ST_ENOENT);
    assert_int_equal(store_revert_commit(&dirs, &err), ST_ENOENT);
    s = open_store(f, 2, STORE_OPEN_EXISTING, NULL, 0);
    assert_meta(s, "step=3");
    assert_tensor(s, a, v[3], n, r);
    store_close(s);
    for (int i = 0; i < 5; i++) st_free_aligned(v[i]);
    st_free_aligned(r);
}

static void test_create_delete_and_space_reuse(void **state) {
    fixture *f = *state;
    store *s = open_store(f, 1, STORE_CREATE, NULL, 64 * 1024);
    st_error err = {0};
    uint64_t n = 256 * 1024;
    unsigned char *b = abuf(n);
    fill(b, n, 3);
    store_key a = {STORE_GRADS, 0, 0}, c = {STORE_GRADS, 1, 0};
    assert_int_equal(store_create_tensor(s, a, n, STORE_TIER_SSD, 0, &err), ST_OK);
    assert_int_equal(store_create_tensor(s, a, n, STORE_TIER_SSD, 0, &err), ST_EEXIST);
    assert_int_equal(store_write(s, a, b, n, &err), ST_OK);
    assert_int_equal(store_commit(s, &err), ST_OK);
    store_info i1;
    store_get_info(s, &i1);
    assert_int_equal(i1.ssd_bytes_used, 2 * n);   /* two slots */
    /* Deleted but committed: its space stays reserved until the next commit. */
    assert_int_equal(store_delete_tensor(s, a, &err), ST_OK);
    assert_false(store_has_tensor(s, a));
    assert_int_equal(store_read(s, a, b, n, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, "grads[0]"));
    store_get_info(s, &i1);
    assert_int_equal(i1.ssd_bytes_used, 2 * n);
    assert_int_equal(store_create_tensor(s, c, n, STORE_TIER_SSD, 0, &err), ST_OK);
    int pa;
    uint64_t offc;
    assert_int_equal(store_write(s, c, b, n, &err), ST_OK);
    assert_int_equal(store_locate(s, c, 0, &pa, NULL, 0, &offc, &err), ST_OK);
    assert_true(offc >= 2 * n);   /* not on a's region */
    store_close(s);
    /* The deletion was not committed: a is back, c never existed. */
    s = open_store(f, 1, STORE_OPEN_EXISTING, NULL, 0);
    assert_true(store_has_tensor(s, a));
    assert_false(store_has_tensor(s, c));
    assert_int_equal(store_delete_tensor(s, a, &err), ST_OK);
    assert_int_equal(store_commit(s, &err), ST_OK);
    store_get_info(s, &i1);
    assert_int_equal(i1.ssd_bytes_used, 0);
    assert_int_equal(store_tensor_count(s), 0);
    store_close(s);
    st_free_aligned(b);
}

static void test_volatile_and_host_tensors(void **state) {
    fixture *f = *state;
    store *s = open_store(f, 2, STORE_CREATE, NULL, 64 * 1024);
    st_error err = {0};
    uint64_t n = 100 * 1024 + 3;
    unsigned char *w = abuf(n), *r = abuf(n);
    fill(w, n, 8);
    store_key act = {STORE_ACTIVATIONS, 2, 7}, host = {STORE_ADAM_V, 2, 0}, hvol = {STORE_GRADS, 2, 0};
    assert_int_equal(store_create_tensor(s, act, n, STORE_TIER_SSD, STORE_VOLATILE, &err), ST_OK);
    assert_int_equal(store_create_tensor(s, host, n, STORE_TIER_HOST, 0, &err), ST_OK);
    assert_int_equal(store_create_tensor(s, hvol, n, STORE_TIER_HOST, STORE_VOLATILE, &err), ST_OK);
    store_info info;
    store_get_info(s, &info);
    assert_int_equal(info.host_bytes_used, 2 * store_padded_bytes(n));
    /* Volatile SSD tensor: one slot, checksummed, not committed. */
    assert_int_equal(store_write(s, act, w, n + 4096, &err), ST_OK);
    assert_int_equal(store_read(s, act, r, n + 4096, &err), ST_OK);
    assert_memory_equal(w, r, n);
    /* Host tensors: copies in memory, or in place. */
    assert_int_equal(store_write(s, host, w, n + 4096, &err), ST_OK);
    unsigned char *hp = store_host_data(s, host);
    assert_non_null(hp);
    assert_memory_equal(hp, w, n);
    hp[5] ^= 0xff;
    assert_int_equal(store_mark_dirty(s, host, &err), ST_OK);
    assert_null(store_host_data(s, act));
    assert_int_equal(store_mark_dirty(s, act, &err), ST_EINVAL);
    store_counters before, after;
    store_get_counters(s, &before);
    assert_int_equal(store_commit(s, &err), ST_OK);
    store_get_counters(s, &after);
    /* The commit wrote the host tensor to disk (padded), and the manifest. */
    uint64_t adam_v = 0;
    for (int p = 0; p < 2; p++) adam_v += after.bytes_written[STORE_ADAM_V][p] - before.bytes_written[STORE_ADAM_V][p];
    assert_int_equal(adam_v, store_padded_bytes(64 * 1024) + store_padded_bytes(n - 64 * 1024));
    assert_true(after.bytes_written[STORE_MANIFEST][0] > before.bytes_written[STORE_MANIFEST][0]);
    store_close(s);

    s = open_store(f, 2, STORE_OPEN_EXISTING, NULL, 0);
    assert_false(store_has_tensor(s, act));
    assert_false(store_has_tensor(s, hvol));
    assert_true(store_has_tensor(s, host));
    hp = store_host_data(s, host);
    assert_non_null(hp);
    w[5] ^= 0xff;
    assert_memory_equal(hp, w, n);
    store_close(s);
    st_free_aligned(w);
    st_free_aligned(r);
}

static void test_budgets_and_bad_arguments(void **state) {
    fixture *f = *state;
    store_config cfg = store_default_config();
    cfg.paths = f->paths;
    cfg.n_paths = 1;
    cfg.mode = STORE_CREATE;
    cfg.chunk_bytes = 64 * 1024;
    cfg.ssd_budget_bytes = 1u << 20;
    cfg.host_budget_bytes = 128 * 1024;
    store *s;
    st_error err = {0};
    assert_int_equal(store_open(&cfg, &s, NULL, 0, &err), ST_OK);
    assert_int_equal(store_create_tensor(s, (store_key){STORE_MASTER, 0, 0}, 400 * 1024, STORE_TIER_SSD, 0, &err), ST_OK);
    assert_int_equal(store_create_tensor(s, (store_key){STORE_MASTER, 1, 0}, 400 * 1024, STORE_TIER_SSD, 0, &err), ST_ENOSPC);
    assert_non_null(strstr(err.msg, "SSD budget"));
    assert_non_null(strstr(err.msg, "master[1]"));
    assert_int_equal(store_create_tensor(s, (store_key){STORE_MASTER, 2, 0}, 200 * 1024, STORE_TIER_HOST, 0, &err), ST_ENOMEM);
    assert_non_null(strstr(err.msg, "host budget"));
    assert_int_equal(store_create_tensor(s, (store_key){STORE_MASTER, 3, 0}, 0, STORE_TIER_SSD, 0, &err), ST_EINVAL);
    assert_int_equal(store_create_tensor(s, (store_key){STORE_MANIFEST, 3, 0}, 10, STORE_TIER_SSD, 0, &err), ST_EINVAL);
    /* Buffers: alignment and size are checked with the tensor named. */
    store_key k = {STORE_MASTER, 0, 0};
    unsigned char *b = abuf(400 * 1024);
    assert_int_equal(store_write(s, k, b + 8, 400 * 1024, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "aligned"));
    assert_int_equal(store_write(s, k, b, 4096, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "needs 409600"));
    assert_int_equal(store_read(s, k, b, 400 * 1024, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, "never written"));
    /* One write or many reads in flight, not both. The write moves 8 MiB:
     * it is still running microseconds after its submission. */
    store_key big = {STORE_MASTER, 4, 0};
    store_close(s);
    cfg.ssd_budget_bytes = 0;
    cfg.mode = STORE_OPEN_EXISTING;
    assert_int_equal(store_open(&cfg, &s, NULL, 0, &err), ST_OK);
    assert_int_equal(store_create_tensor(s, big, 8u << 20, STORE_TIER_SSD, STORE_VOLATILE, &err), ST_OK);
    unsigned char *bb = abuf(8u << 20);
    fill(bb, 8u << 20, 1);
    store_op op, op2;
    assert_int_equal(store_write_async(s, big, bb, 8u << 20, &op, &err), ST_OK);
    assert_int_equal(store_read_async(s, big, bb, 8u << 20, &op2, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "write in flight"));
    assert_int_equal(store_write_async(s, big, bb, 8u << 20, &op2, &err), ST_EINVAL);
    assert_int_equal(store_delete_tensor(s, big, &err), ST_EINVAL);
    assert_int_equal(store_op_wait(&op, &err), ST_OK);
    assert_int_equal(store_read(s, big, bb, 8u << 20, &err), ST_OK);
    st_free_aligned(bb);
    store_close(s);
    st_free_aligned(b);

    /* A second open of the same store is refused while the first holds it. */
    cfg.mode = STORE_OPEN_EXISTING;
    store *s1, *s2;
    assert_int_equal(store_open(&cfg, &s1, NULL, 0, &err), ST_OK);
    assert_int_equal(store_open(&cfg, &s2, NULL, 0, &err), ST_EEXIST);
    assert_non_null(strstr(err.msg, "open in another"));
    store_close(s1);
    cfg.mode = STORE_CREATE;
    assert_int_equal(store_open(&cfg, &s2, NULL, 0, &err), ST_EEXIST);
}

static void test_paths_must_match(void **state) {
    fixture *f = *state;
    store_close(open_store(f, 2, STORE_CREATE, NULL, 0));
    st_error err = {0};
    store *s;
    store_config cfg = store_default_config();
    const char *swapped[2] = {f->paths[1], f->paths[0]};
    cfg.paths = swapped;
    cfg.n_paths = 2;
    assert_int_equal(store_open(&cfg, &s, NULL, 0, &err), ST_ENOENT);   /* no manifest in nvme1 */
    const char *wrong[2] = {f->paths[0], f->paths[2]};
    cfg.paths = wrong;
    assert_int_equal(store_open(&cfg, &s, NULL, 0, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, "not part of the store"));
    cfg.paths = f->paths;
    cfg.n_paths = 1;
    assert_int_equal(store_open(&cfg, &s, NULL, 0, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "spans 2 paths"));
    cfg.n_paths = 3;
    assert_int_equal(store_open(&cfg, &s, NULL, 0, &err), ST_EINVAL);
}

typedef struct pool_waiter {
    store_pool *pool;
    void *got;
    double waited;
} pool_waiter;

static void *pool_wait_thread(void *arg) {
    pool_waiter *w = arg;
    double t0 = st_now();
    w->got = store_pool_acquire(w->pool);
    w->waited = st_now() - t0;
    return NULL;
}

static void test_pool_budget_and_back_pressure(void **state) {
    (void)state;
    store_pool *pool;
    st_error err = {0};
    assert_int_equal(store_pool_create(1000, 4096, NULL, &pool, &err), ST_ENOMEM);
    assert_int_equal(store_pool_create(4u << 20, 1000, NULL, &pool, &err), ST_EINVAL);
    assert_int_equal(store_pool_create((4u << 20) + 5, 1u << 20, NULL, &pool, &err), ST_OK);
    assert_int_equal(store_pool_count(pool), 4);
    assert_true(store_pool_allocated_bytes(pool) <= (4u << 20) + 5);
    void *b[4];
    for (int i = 0; i < 4; i++) {
        b[i] = store_pool_try_acquire(pool);
        assert_non_null(b[i]);
        assert_int_equal((uintptr_t)b[i] % 4096, 0);
    }
    assert_null(store_pool_try_acquire(pool));
    assert_null(store_pool_acquire_timeout(pool, 0.05));
    /* A negative timeout means "do not wait", not an endless EINVAL loop. */
    assert_null(store_pool_acquire_timeout(pool, -0.999999999));
    assert_null(store_pool_acquire_timeout(pool, -2.5));
    assert_int_equal(store_pool_in_use(pool), 4);
    /* A blocked acquirer wakes when a buffer comes back. */
    pool_waiter w = {.pool = pool};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, pool_wait_thread, &w), 0);
    usleep(50 * 1000);
    assert_null(w.got);
    store_pool_release(pool, b[2]);
    pthread_join(th, NULL);
    assert_ptr_equal(w.got, b[2]);
    assert_true(w.waited >= 0.04);
    store_pool_release(pool, b[0]);
    store_pool_release(pool, b[0]);   /* double release is ignored */
    assert_int_equal(store_pool_in_use(pool), 3);
    store_pool_release(pool, w.got);
    store_pool_release(pool, b[1]);
    store_pool_release(pool, b[3]);
    assert_int_equal(store_pool_in_use(pool), 0);
    store_pool_destroy(pool);
}

/* Many async ops in flight from one pool, with the pool as the only memory:
 * reads overlap, data is right, the pool never grows. */
static void test_async_pipeline_with_pool(void **state) {
    fixture *f = *state;
    store_config cfg = store_default_config();
    cfg.paths = f->paths;
    cfg.n_paths = 3;
    cfg.mode = STORE_CREATE;
    cfg.chunk_bytes = 128 * 1024;
    cfg.io.kind = IO_ENGINE_PSYNC;   /* the fallback engine under the store */
    store *s;
    st_error err = {0};
    assert_int_equal(store_open(&cfg, &s, NULL, 0, &err), ST_OK);
    store_pool *pool;
    uint64_t n = (2u << 20) + 100;
    assert_int_equal(store_pool_create(3 * store_padded_bytes(n), store_padded_bytes(n), NULL, &pool, &err), ST_OK);
    enum { T = 12 };
    for (int i = 0; i < T; i++) {
        store_key k = {STORE_WEIGHTS, i, 0};
        assert_int_equal(store_create_tensor(s, k, n, STORE_TIER_SSD, 0, &err), ST_OK);
        void *b = store_pool_acquire(pool);
        fill(b, n, 1000 + (uint64_t)i);
        assert_int_equal(store_write(s, k, b, store_pool_buffer_bytes(pool), &err), ST_OK);
        store_pool_release(pool, b);
    }
    assert_int_equal(store_commit(s, &err), ST_OK);
    /* Prefetch two ahead, like a trainer streaming blocks. */
    store_op ops[T];
    void *bufs[T];
    unsigned char *want = abuf(n);
    for (int i = 0; i < T + 2; i++) {
        if (i < T) {
            bufs[i] = store_pool_acquire(pool);
            assert_int_equal(store_read_async(s, (store_key){STORE_WEIGHTS, i, 0}, bufs[i], store_pool_buffer_bytes(pool),
                                              &ops[i], &err),
                             ST_OK);
        }
        int j = i - 2;
        if (j >= 0) {
            assert_int_equal(store_op_wait(&ops[j], &err), ST_OK);
            fill(want, n, 1000 + (uint64_t)j);
            assert_memory_equal(bufs[j], want, n);
            store_pool_release(pool, bufs[j]);
        }
        assert_true(store_pool_in_use(pool) <= 3);
    }
    st_free_aligned(want);
    store_pool_destroy(pool);
    store_close(s);
}

/* Measured weights: positive, summing to 1, recorded, and kept on reopen. */
static void test_measured_weights(void **state) {
    fixture *f = *state;
    store_config cfg = store_default_config();
    cfg.paths = f->paths;
    cfg.n_paths = 2;
    cfg.mode = STORE_CREATE;
    cfg.measure_bandwidth = 1;
    cfg.measure_bytes = 8u << 20;
    store *s;
    st_error err = {0};
    assert_int_equal(store_open(&cfg, &s, NULL, 0, &err), ST_OK);
    store_info a, b;
    store_get_info(s, &a);
    store_close(s);
    assert_true(a.weights[0] > 0 && a.weights[1] > 0);
    assert_true(a.weights[0] + a.weights[1] > 0.999 && a.weights[0] + a.weights[1] < 1.001);
    char probe[700];
    snprintf(probe, sizeof probe, "%s/strata-store.probe", f->dirs[0]);
    assert_int_equal(access(probe, F_OK), -1);   /* the probe file is gone */
    cfg.mode = STORE_OPEN_EXISTING;
    double other[2] = {1, 30};
    cfg.weights = other;   /* ignored: an existing store keeps its weights */
    assert_int_equal(store_open(&cfg, &s, NULL, 0, &err), ST_OK);
    store_get_info(s, &b);
    store_close(s);
    assert_true(a.weights[0] == b.weights[0] && a.weights[1] == b.weights[1]);
}

static void test_names_and_endurance(void **state) {
    (void)state;
    char buf[64];
    assert_string_equal(store_key_name((store_key){STORE_ACTIVATIONS, 3, 5}, buf, sizeof buf), "activations[3,5]");
    assert_string_equal(store_key_name((store_key){STORE_MASTER, 11, 0}, buf, sizeof buf), "master[11]");
    assert_string_equal(store_kind_name(STORE_ADAM_V), "adam_v");
    /* 1 GB per 1 s step on a 1 PB-rated drive: 10^6 s = 11.57 days. */
    double d = store_endurance_days(1e9, 1.0, 1e15);
    assert_true(d > 11.57 && d < 11.58);
    assert_int_equal(store_padded_bytes(1), 4096);
    assert_int_equal(store_padded_bytes(8192), 8192);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trips_one_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trips_three_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_striping_follows_weights, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shadow_versions_and_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_previous_commit_and_revert, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_delete_and_space_reuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_volatile_and_host_tensors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budgets_and_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_paths_must_match, setup, teardown),
        cmocka_unit_test(test_pool_budget_and_back_pressure),
        cmocka_unit_test_setup_teardown(test_async_pipeline_with_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_measured_weights, setup, teardown),
        cmocka_unit_test(test_names_and_endurance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
