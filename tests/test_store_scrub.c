/* test_store_scrub.c - store_scrub_each reports every bad chunk of every
 * committed tensor (and only those): bytes flipped on disk at chunks found
 * with store_locate come back as exactly those chunks, with their tensor
 * offset, path, file and file offset; uncommitted versions, volatile
 * tensors and the padding after a tensor's last byte are not checked. And a
 * read-only open (what `strata fsck` uses) changes nothing on disk, refuses
 * every change, and cannot run beside a process that has the store open. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "strata/store.h"
#include "store_testutil.h"

#define CHUNK 16384u

static int setup(void **state) { return fixture_setup(state, "tmp-store-scrub"); }
static int teardown(void **state) { return fixture_teardown(state); }

static st_status try_open(fixture *f, store_open_mode mode, int read_only, store **s, st_error *err) {
    store_config cfg = store_default_config();
    cfg.paths = f->paths;
    cfg.n_paths = 2;
    cfg.mode = mode;
    cfg.chunk_bytes = CHUNK;
    cfg.host_budget_bytes = read_only ? 0 : 16u << 20;   /* read-only needs none */
    cfg.read_only = read_only;
    return store_open(&cfg, s, NULL, 0, err);
}

static store *open_store(fixture *f, store_open_mode mode, int read_only) {
    store *s = NULL;
    st_error err = {0};
    st_status st = try_open(f, mode, read_only, &s, &err);
    if (st != ST_OK) print_error("store_open: %s\n", err.msg);
    assert_int_equal(st, ST_OK);
    return s;
}

static void *pattern_buf(uint64_t bytes, unsigned seed) {
    unsigned char *p = st_alloc_aligned(4096, (size_t)store_padded_bytes(bytes));
    assert_non_null(p);
    for (uint64_t i = 0; i < bytes; i++) p[i] = (unsigned char)(i * 131u + seed * 17u + (i >> 9));
    return p;
}

/* The committed tensors: A and B on the SSD tier, a one-chunk C, a
 * host-tier D; plus a volatile V and a never-written N. */
static const store_key KA = {STORE_MASTER, 0, 0}, KB = {STORE_ADAM_M, 1, 0}, KC = {STORE_WEIGHTS, -1, 0},
                       KD = {STORE_ADAM_V, 2, 0}, KV = {STORE_GRADS, 0, 0}, KN = {STORE_OTHER, 0, 0};
static const uint64_t SA = 5 * CHUNK + 1000, SB = 3 * CHUNK, SC = 100, SD = 2 * CHUNK + 8, SV = 2 * CHUNK;

static void write_tensor(store *s, store_key k, uint64_t bytes, store_tier tier, unsigned flags, unsigned seed) {
    st_error err = {0};
    assert_int_equal(store_create_tensor(s, k, bytes, tier, flags, &err), ST_OK);
    void *b = pattern_buf(bytes, seed);
    assert_int_equal(store_write(s, k, b, store_padded_bytes(bytes), &err), ST_OK);
    st_free_aligned(b);
}

typedef struct where {
    store_key key;
    uint32_t chunk;
    char file[PATH_MAX];
    uint64_t file_offset;   /* the chunk's first byte */
    int path;
} where;

static void locate(store *s, store_key k, uint32_t chunk, where *w) {
    st_error err = {0};
    w->key = k;
    w->chunk = chunk;
    assert_int_equal(store_locate(s, k, (uint64_t)chunk * CHUNK, &w->path, w->file, sizeof w->file, &w->file_offset, &err),
                     ST_OK);
}

static void flip_byte(const char *file, uint64_t offset) {
    int fd = open(file, O_RDWR);
    assert_true(fd >= 0);
    unsigned char c;
    assert_int_equal(pread(fd, &c, 1, (off_t)offset), 1);
    c ^= 0x5a;
    assert_int_equal(pwrite(fd, &c, 1, (off_t)offset), 1);
    assert_int_equal(fsync(fd), 0);
    close(fd);
}

typedef struct seen {
    store_bad_chunk b[16];
    char file[16][PATH_MAX];
    char msg[16][512];
    int n;
} seen;

static void on_bad(void *ctx, const store_bad_chunk *b) {
    seen *s = ctx;
    assert_true(s->n < 16);
    s->b[s->n] = *b;
    snprintf(s->file[s->n], PATH_MAX, "%s", b->file);
    snprintf(s->msg[s->n], 512, "%s", b->message);
    s->b[s->n].file = s->file[s->n];
    s->b[s->n].message = s->msg[s->n];
    s->n++;
}

static int same_key(store_key a, store_key b) { return a.kind == b.kind && a.block == b.block && a.index == b.index; }

static void test_scrub_each_names_exactly_the_damaged_chunks(void **state) {
    fixture *f = *state;
    st_error err = {0};
    store *s = open_store(f, STORE_CREATE, 0);
    write_tensor(s, KA, SA, STORE_TIER_SSD, 0, 1);
    write_tensor(s, KB, SB, STORE_TIER_SSD, 0, 2);
    write_tensor(s, KC, SC, STORE_TIER_SSD, 0, 3);
    write_tensor(s, KD, SD, STORE_TIER_HOST, 0, 4);
    assert_int_equal(store_create_tensor(s, KN, CHUNK, STORE_TIER_SSD, 0, &err), ST_OK);
    assert_int_equal(store_commit(s, &err), ST_OK);

    /* Clean: every committed chunk read, nothing reported. */
    seen clean = {0};
    store_scrub_result r;
    assert_int_equal(store_scrub_each(s, on_bad, &clean, &r, &err), ST_OK);
    assert_int_equal(clean.n, 0);
    assert_int_equal(r.tensors, 4);
    assert_int_equal(r.chunks, 6 + 3 + 1 + 3);
    assert_int_equal(r.bytes, SA + SB + SC + SD);
    assert_int_equal(r.bad_chunks + r.unreadable_chunks + r.damaged_tensors, 0);

    /* Where the committed chunks to damage lie (before newer versions exist:
     * store_locate names the newest). A's chunk 1 and its short last chunk,
     * B's chunk 2, D's (host tier: on disk since the commit) chunk 1. */
    where bad[4];
    locate(s, KA, 1, &bad[0]);
    locate(s, KA, 5, &bad[1]);
    locate(s, KB, 2, &bad[2]);
    locate(s, KD, 1, &bad[3]);
    where c0, a0;
    locate(s, KC, 0, &c0);
    locate(s, KA, 0, &a0);
    /* Newer, uncommitted versions and a volatile tensor: not scrubbed. */
    void *b = pattern_buf(SA, 9);
    assert_int_equal(store_write(s, KA, b, store_padded_bytes(SA), &err), ST_OK);
    st_free_aligned(b);
    write_tensor(s, KV, SV, STORE_TIER_SSD, STORE_VOLATILE, 5);
    where a0_new, v0;
    locate(s, KA, 0, &a0_new);
    locate(s, KV, 0, &v0);
    assert_true(a0_new.file_offset != a0.file_offset);
    store_close(s);

    flip_byte(bad[0].file, bad[0].file_offset + 7);
    flip_byte(bad[1].file, bad[1].file_offset + 999);   /* the last real byte of A */
    flip_byte(bad[2].file, bad[2].file_offset);
    flip_byte(bad[3].file, bad[3].file_offset + 100);
    flip_byte(c0.file, c0.file_offset + SC + 10);       /* padding after C: not data */
    flip_byte(a0_new.file, a0_new.file_offset + 3);     /* the uncommitted version of A */
    flip_byte(v0.file, v0.file_offset + 3);             /* the volatile tensor's old place */

    s = open_store(f, STORE_OPEN_EXISTING, 1);
    seen got = {0};
    memset(&r, 0xff, sizeof r);
    st_status st = store_scrub_each(s, on_bad, &got, &r, &err);
    assert_int_equal(st, ST_ECORRUPT);
    assert_non_null(strstr(err.msg, "master[0]"));   /* the first: A's chunk 1 */
    assert_non_null(strstr(err.msg, "chunk 1 of 6"));
    assert_int_equal(got.n, 4);
    assert_int_equal(r.tensors, 4);
    assert_int_equal(r.chunks, 13);
    assert_int_equal(r.bad_chunks, 4);
    assert_int_equal(r.unreadable_chunks, 0);
    assert_int_equal(r.damaged_tensors, 3);
    for (int i = 0; i < 4; i++) {
        const store_bad_chunk *g = &got.b[i];
        /* In tensor order (creation), then chunk order. */
        assert_true(same_key(g->key, bad[i].key));
        assert_int_equal(g->chunk, bad[i].chunk);
        assert_int_equal(g->tensor_offset, (uint64_t)bad[i].chunk * CHUNK);
        assert_int_equal(g->path, bad[i].path);
        assert_string_equal(g->file, bad[i].file);
        assert_int_equal(g->file_offset, bad[i].file_offset);
        assert_int_equal(g->status, ST_ECORRUPT);
        assert_true(g->crc_read != g->crc_stored);
        assert_non_null(strstr(g->message, "checksum mismatch"));
    }
    assert_int_equal(got.b[0].n_chunks, 6);
    assert_int_equal(got.b[1].len, 1000);   /* the short last chunk */
    assert_int_equal(got.b[2].len, CHUNK);
    assert_true(got.b[0].path != got.b[2].path);   /* chunks 1 and 2 lie on different paths */

    /* store_scrub counts the same, and names the first. */
    uint64_t n_bad = 0;
    st_error e2 = {0};
    assert_int_equal(store_scrub(s, &n_bad, &e2), ST_ECORRUPT);
    assert_int_equal(n_bad, 4);
    assert_string_equal(e2.msg, err.msg);
    /* Without a callback or result: the same status. */
    assert_int_equal(store_scrub_each(s, NULL, NULL, NULL, &e2), ST_ECORRUPT);

    /* The host-tier tensor reads from its committed slot on disk, read-only;
     * C (only its padding touched) is intact. */
    store_tensor_info ti;
    assert_int_equal(store_tensor_info_of(s, KC, &ti, &err), ST_OK);
    void *rb = st_alloc_aligned(4096, (size_t)store_padded_bytes(SC));
    void *want = pattern_buf(SC, 3);
    assert_int_equal(store_read(s, KC, rb, store_padded_bytes(SC), &err), ST_OK);
    assert_memory_equal(rb, want, SC);
    st_free_aligned(rb);
    st_free_aligned(want);
    rb = st_alloc_aligned(4096, (size_t)store_padded_bytes(SD));
    assert_int_equal(store_read(s, KD, rb, store_padded_bytes(SD), &err), ST_ECORRUPT);
    assert_non_null(strstr(err.msg, "adam_v[2]"));
    st_free_aligned(rb);
    store_close(s);
}

static int file_exists(const char *dir, const char *name) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static int count_entries(const char *dir) {
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1) n = -1;
        pclose(p);
    }
    return n;
}

static void test_read_only_open_changes_nothing(void **state) {
    fixture *f = *state;
    st_error err = {0};
    store *s = open_store(f, STORE_CREATE, 0);
    write_tensor(s, KA, SA, STORE_TIER_SSD, 0, 1);
    assert_int_equal(store_commit(s, &err), ST_OK);

    /* While it is open for work, a read-only open is refused, and says why. */
    store *ro = NULL;
    assert_int_equal(try_open(f, STORE_OPEN_EXISTING, 1, &ro, &err), ST_EEXIST);
    assert_non_null(strstr(err.msg, "in use by another process"));
    store_close(s);

    /* A leftover temporary manifest (a crash inside a commit) stays. */
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/strata-store.manifest.tmp", f->dirs[0]);
    FILE *t = fopen(tmp, "w");
    assert_non_null(t);
    fclose(t);
    struct stat before[2], after[2];
    char data[2][PATH_MAX], manifest[PATH_MAX];
    for (int p = 0; p < 2; p++) {
        snprintf(data[p], sizeof data[p], "%s/strata-store.data", f->dirs[p]);
        assert_int_equal(stat(data[p], &before[p]), 0);
    }
    snprintf(manifest, sizeof manifest, "%s/strata-store.manifest", f->dirs[0]);
    struct stat mb, ma;
    assert_int_equal(stat(manifest, &mb), 0);
    int entries0 = count_entries(f->dirs[0]), entries1 = count_entries(f->dirs[1]);

    ro = open_store(f, STORE_OPEN_EXISTING, 1);
    /* Two read-only opens may run together; a writer may not join them. */
    store *ro2 = open_store(f, STORE_OPEN_EXISTING, 1);
    store *w = NULL;
    assert_int_equal(try_open(f, STORE_OPEN_EXISTING, 0, &w, &err), ST_EEXIST);
    store_close(ro2);
    /* Every change is refused. */
    void *b = pattern_buf(SA, 7);
    assert_int_equal(store_write(ro, KA, b, store_padded_bytes(SA), &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "read-only"));
    assert_int_equal(store_create_tensor(ro, KB, SB, STORE_TIER_SSD, 0, &err), ST_EINVAL);
    assert_int_equal(store_delete_tensor(ro, KA, &err), ST_EINVAL);
    assert_int_equal(store_mark_dirty(ro, KA, &err), ST_EINVAL);
    assert_int_equal(store_commit(ro, &err), ST_EINVAL);
    assert_int_equal(store_generation(ro), 1);
    assert_int_equal(store_scrub_each(ro, NULL, NULL, NULL, &err), ST_OK);
    assert_int_equal(store_read(ro, KA, b, store_padded_bytes(SA), &err), ST_OK);
    st_free_aligned(b);
    store_close(ro);

    assert_true(file_exists(f->dirs[0], "strata-store.manifest.tmp"));
    assert_int_equal(count_entries(f->dirs[0]), entries0);   /* no probe or other file left */
    assert_int_equal(count_entries(f->dirs[1]), entries1);
    for (int p = 0; p < 2; p++) {
        assert_int_equal(stat(data[p], &after[p]), 0);
        assert_int_equal(after[p].st_size, before[p].st_size);
        assert_int_equal(after[p].st_mtim.tv_sec, before[p].st_mtim.tv_sec);
        assert_int_equal(after[p].st_mtim.tv_nsec, before[p].st_mtim.tv_nsec);
    }
    assert_int_equal(stat(manifest, &ma), 0);
    assert_int_equal(ma.st_mtim.tv_nsec, mb.st_mtim.tv_nsec);
    assert_int_equal(ma.st_ino, mb.st_ino);

    /* Read-only cannot create; a missing store is ST_ENOENT. */
    assert_int_equal(try_open(f, STORE_OPEN_OR_CREATE, 1, &ro, &err), ST_EINVAL);
    char empty[700];
    snprintf(empty, sizeof empty, "%s/empty", f->root);
    assert_int_equal(mkdir(empty, 0755), 0);
    store_config cfg = store_default_config();
    const char *ep[1] = {empty};
    cfg.paths = ep;
    cfg.n_paths = 1;
    cfg.mode = STORE_OPEN_EXISTING;
    cfg.read_only = 1;
    assert_int_equal(store_open(&cfg, &ro, NULL, 0, &err), ST_ENOENT);
    assert_int_equal(count_entries(empty), 0);   /* not even a lock file */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_scrub_each_names_exactly_the_damaged_chunks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_only_open_changes_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
