/* test_store_faults.c - every injected fault reaches the caller as an error
 * and the committed state stays intact and readable: failed writes, reads,
 * data syncs and manifest writes, short transfers, a flipped byte on disk,
 * and a full file system (a loop-mounted ext4 image, or injected ENOSPC where
 * mounting is not possible). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "strata/checksum.h"
#include "strata/store.h"

#define CHUNK (64 * 1024)
#define NT 4
#define TBYTES (5 * CHUNK + 1234)

typedef struct small_fs {
    char image[700], mnt[700];
    int mounted;
} small_fs;

typedef struct fixture {
    char root[512];
    char dirs[2][600];
    const char *paths[2];
    io_engine *eng;
    store *s;
    unsigned char *buf, *back;
    small_fs fs;           /* mounted by the full-disk test, unmounted by teardown */
} fixture;

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static void fill(unsigned char *p, uint64_t n, uint64_t seed) {
    st_rng r;
    st_rng_seed(&r, seed);
    for (uint64_t i = 0; i < n; i++) p[i] = (unsigned char)(st_rng_next(&r) >> 24);
}

static store_key key(int i) { return (store_key){STORE_MASTER, i, 0}; }

static st_status reopen(fixture *f, store_open_mode mode, st_error *err) {
    store_close(f->s);
    f->s = NULL;
    store_config cfg = store_default_config();
    cfg.paths = f->paths;
    cfg.n_paths = 2;
    cfg.mode = mode;
    cfg.chunk_bytes = CHUNK;
    cfg.engine = f->eng;
    return store_open(&cfg, &f->s, NULL, 0, err);
}

/* Writes generation `gen` of every tensor (contents depend on i and gen). */
static st_status write_all(fixture *f, uint64_t gen, st_error *err) {
    for (int i = 0; i < NT; i++) {
        fill(f->buf, TBYTES, gen * 100 + (uint64_t)i);
        st_status st = store_write(f->s, key(i), f->buf, store_padded_bytes(TBYTES), err);
        if (st != ST_OK) return st;
    }
    return ST_OK;
}

/* Every tensor holds generation `gen`, and every chunk's checksum is good. */
static void expect_generation(fixture *f, uint64_t gen) {
    st_error err = {0};
    for (int i = 0; i < NT; i++) {
        fill(f->buf, TBYTES, gen * 100 + (uint64_t)i);
        st_status st = store_read(f->s, key(i), f->back, store_padded_bytes(TBYTES), &err);
        if (st != ST_OK) print_error("%s\n", err.msg);
        assert_int_equal(st, ST_OK);
        assert_memory_equal(f->buf, f->back, TBYTES);
    }
    uint64_t bad = 1;
    assert_int_equal(store_scrub(f->s, &bad, &err), ST_OK);
    assert_int_equal(bad, 0);
}

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->root, sizeof f->root, "%s/tmp-store-faults-XXXXXX", STRATA_BINARY_DIR);
    if (!mkdtemp(f->root)) return -1;
    for (int i = 0; i < 2; i++) {
        snprintf(f->dirs[i], sizeof f->dirs[i], "%s/p%d", f->root, i);
        mkdir(f->dirs[i], 0755);
        f->paths[i] = f->dirs[i];
    }
    st_error err = {0};
    io_engine_config ec = io_engine_default_config();
    ec.chunk_bytes = CHUNK;
    if (io_engine_create(&ec, &f->eng, &err) != ST_OK) return -1;
    f->buf = st_alloc_aligned(4096, store_padded_bytes(TBYTES));
    f->back = st_alloc_aligned(4096, store_padded_bytes(TBYTES));
    *state = f;
    if (reopen(f, STORE_CREATE, &err) != ST_OK) return -1;
    for (int i = 0; i < NT; i++)
        if (store_create_tensor(f->s, key(i), TBYTES, STORE_TIER_SSD, 0, &err) != ST_OK) return -1;
    /* Generation 1 committed: the state every fault must leave intact. */
    if (write_all(f, 1, &err) != ST_OK || store_commit(f->s, &err) != ST_OK) return -1;
    return 0;
}

static void unmount_small(small_fs *fs);

static int teardown(void **state) {
    fixture *f = *state;
    if (f->fs.mnt[0]) unmount_small(&f->fs);
    store_close(f->s);
    io_engine_destroy(f->eng);
    st_free_aligned(f->buf);
    st_free_aligned(f->back);
    nftw(f->root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static void test_failed_write_blocks_commit_until_rewritten(void **state) {
    fixture *f = *state;
    st_error err = {0};
    io_fault fault = {.ops = IO_FAULT_WRITE, .fail_at = 9, .fail_count = 1, .fail_errno = EIO};
    io_engine_set_fault(f->eng, &fault);
    st_status st = write_all(f, 2, &err);   /* 6 chunks per tensor: the 9th is tensor 1's third */
    io_engine_set_fault(f->eng, NULL);
    assert_int_equal(st, ST_EIO);
    assert_non_null(strstr(err.msg, "strata-store.data"));
    assert_non_null(strstr(err.msg, "at offset"));
    assert_non_null(strstr(err.msg, "injected"));
    /* Tensor 1 reads as its committed version; tensor 0 as its new one. */
    fill(f->buf, TBYTES, 101);
    assert_int_equal(store_read(f->s, key(1), f->back, store_padded_bytes(TBYTES), &err), ST_OK);
    assert_memory_equal(f->buf, f->back, TBYTES);
    /* No commit of a state with a failed write in it. */
    assert_int_equal(store_commit(f->s, &err), ST_EIO);
    assert_non_null(strstr(err.msg, "master[1]"));
    assert_int_equal(store_generation(f->s), 1);
    assert_int_equal(reopen(f, STORE_OPEN_EXISTING, &err), ST_OK);
    expect_generation(f, 1);
    /* Writing everything again makes the commit possible. */
    assert_int_equal(write_all(f, 2, &err), ST_OK);
    assert_int_equal(store_commit(f->s, &err), ST_OK);
    assert_int_equal(reopen(f, STORE_OPEN_EXISTING, &err), ST_OK);
    assert_int_equal(store_generation(f->s), 2);
    expect_generation(f, 2);
}

static void test_failed_data_sync_fails_commit(void **state) {
    fixture *f = *state;
    st_error err = {0};
    assert_int_equal(write_all(f, 2, &err), ST_OK);
    io_fault fault = {.ops = IO_FAULT_SYNC, .fail_at = 1, .fail_count = 1, .fail_errno = EIO};
    io_engine_set_fault(f->eng, &fault);
    assert_int_equal(store_commit(f->s, &err), ST_EIO);
    uint64_t failed;
    io_engine_fault_stats(f->eng, &failed, NULL);
    io_engine_set_fault(f->eng, NULL);
    assert_int_equal(failed, 1);
    assert_non_null(strstr(err.msg, "sync"));
    /* A failed fdatasync proves nothing on retry: the data must be rewritten. */
    assert_int_equal(store_commit(f->s, &err), ST_EIO);
    assert_non_null(strstr(err.msg, "write it again"));
    expect_generation(f, 1);
    assert_int_equal(reopen(f, STORE_OPEN_EXISTING, &err), ST_OK);
    expect_generation(f, 1);
}

/* The manifest write, and its sync, fail: the old manifest stays. */
static void test_failed_manifest_write_keeps_old_manifest(void **state) {
    fixture *f = *state;
    st_error err = {0};
    assert_int_equal(write_all(f, 2, &err), ST_OK);
    int errnos[2] = {ENOSPC, EIO};
    unsigned ops[2] = {IO_FAULT_WRITE, IO_FAULT_SYNC};
    uint64_t at[2] = {1, 3};   /* syncs: two data files, then the manifest */
    for (int k = 0; k < 2; k++) {
        io_fault fault = {.ops = ops[k], .fail_at = at[k], .fail_count = 1, .fail_errno = errnos[k]};
        io_engine_set_fault(f->eng, &fault);
        st_status st = store_commit(f->s, &err);
        uint64_t failed;
        io_engine_fault_stats(f->eng, &failed, NULL);
        io_engine_set_fault(f->eng, NULL);
        assert_int_equal(failed, 1);
        assert_int_equal(st, k == 0 ? ST_ENOSPC : ST_EIO);
        assert_non_null(strstr(err.msg, "strata-store.manifest.tmp"));
        char tmp[700];
        snprintf(tmp, sizeof tmp, "%s/strata-store.manifest.tmp", f->dirs[0]);
        assert_int_equal(access(tmp, F_OK), -1);
        assert_int_equal(store_generation(f->s), 1);
    }
    /* The data syncs succeeded, so the commit can simply be retried. */
    assert_int_equal(store_commit(f->s, &err), ST_OK);
    assert_int_equal(reopen(f, STORE_OPEN_EXISTING, &err), ST_OK);
    assert_int_equal(store_generation(f->s), 2);
    expect_generation(f, 2);
}

/* A host-tier tensor whose write-out fails at commit is still right in
 * memory: the commit fails, and the next one writes it out again. */
static void test_failed_host_flush_is_retried(void **state) {
    fixture *f = *state;
    st_error err = {0};
    store_key h = {STORE_ADAM_V, 0, 0};
    store_close(f->s);
    f->s = NULL;
    store_config cfg = store_default_config();
    cfg.paths = f->paths;
    cfg.n_paths = 2;
    cfg.chunk_bytes = CHUNK;
    cfg.engine = f->eng;
    cfg.host_budget_bytes = 1u << 20;
    assert_int_equal(store_open(&cfg, &f->s, NULL, 0, &err), ST_OK);
    assert_int_equal(store_create_tensor(f->s, h, TBYTES, STORE_TIER_HOST, 0, &err), ST_OK);
    fill(f->buf, TBYTES, 77);
    assert_int_equal(store_write(f->s, h, f->buf, store_padded_bytes(TBYTES), &err), ST_OK);
    io_fault fault = {.ops = IO_FAULT_WRITE, .fail_at = 2, .fail_count = 1, .fail_errno = EIO};
    io_engine_set_fault(f->eng, &fault);
    assert_int_equal(store_commit(f->s, &err), ST_EIO);
    io_engine_set_fault(f->eng, NULL);
    assert_int_equal(store_generation(f->s), 1);
    assert_int_equal(store_commit(f->s, &err), ST_OK);
    store_close(f->s);
    f->s = NULL;
    assert_int_equal(store_open(&cfg, &f->s, NULL, 0, &err), ST_OK);
    assert_int_equal(store_generation(f->s), 2);
    assert_memory_equal(store_host_data(f->s, h), f->buf, TBYTES);
    expect_generation(f, 1);
}

static void test_failed_read_is_reported_and_harmless(void **state) {
    fixture *f = *state;
    st_error err = {0};
    io_fault fault = {.ops = IO_FAULT_READ, .fail_at = 2, .fail_count = 0, .fail_errno = EIO};
    io_engine_set_fault(f->eng, &fault);
    assert_int_equal(store_read(f->s, key(0), f->back, store_padded_bytes(TBYTES), &err), ST_EIO);
    uint64_t bad;
    assert_int_equal(store_scrub(f->s, &bad, &err), ST_EIO);   /* a dead disk: scrub says so */
    io_engine_set_fault(f->eng, NULL);
    assert_non_null(strstr(err.msg, "read"));
    expect_generation(f, 1);
}

static void test_short_transfers_everywhere(void **state) {
    fixture *f = *state;
    st_error err = {0};
    io_fault fault = {.ops = IO_FAULT_READ | IO_FAULT_WRITE, .short_every = 2};
    io_engine_set_fault(f->eng, &fault);
    assert_int_equal(write_all(f, 2, &err), ST_OK);
    assert_int_equal(store_commit(f->s, &err), ST_OK);
    expect_generation(f, 2);
    uint64_t shortened;
    io_engine_fault_stats(f->eng, NULL, &shortened);
    io_engine_set_fault(f->eng, NULL);
    assert_true(shortened > 10);
    assert_int_equal(reopen(f, STORE_OPEN_EXISTING, &err), ST_OK);
    expect_generation(f, 2);
}

/* One flipped byte on disk: the read fails naming the tensor and the chunk
 * holding the byte; scrub counts one bad chunk; with checks off the read
 * returns the damaged bytes. */
static void test_flipped_byte_is_detected(void **state) {
    fixture *f = *state;
    st_error err = {0};
    uint64_t victim = 3 * CHUNK + 777;
    int path;
    char file[1024];
    uint64_t foff;
    assert_int_equal(store_locate(f->s, key(2), victim, &path, file, sizeof file, &foff, &err), ST_OK);
    int fd = open(file, O_RDWR);
    assert_true(fd >= 0);
    unsigned char byte;
    assert_int_equal(pread(fd, &byte, 1, (off_t)foff), 1);
    byte ^= 0x04;
    assert_int_equal(pwrite(fd, &byte, 1, (off_t)foff), 1);
    assert_int_equal(fsync(fd), 0);
    close(fd);

    assert_int_equal(store_read(f->s, key(2), f->back, store_padded_bytes(TBYTES), &err), ST_ECORRUPT);
    assert_non_null(strstr(err.msg, "master[2]"));
    char want[64];
    snprintf(want, sizeof want, "at offset %d ", 3 * CHUNK);   /* the chunk holding the byte */
    assert_non_null(strstr(err.msg, want));
    assert_non_null(strstr(err.msg, f->dirs[path]));
    uint64_t bad = 0;
    assert_int_equal(store_scrub(f->s, &bad, &err), ST_ECORRUPT);
    assert_int_equal(bad, 1);
    store_counters c;
    store_get_counters(f->s, &c);
    assert_int_equal(c.checksum_failures, 2);
    /* The switch: unchecked reads hand back the damage. */
    store_set_verify(f->s, 0);
    assert_int_equal(store_read(f->s, key(2), f->back, store_padded_bytes(TBYTES), &err), ST_OK);
    fill(f->buf, TBYTES, 102);
    assert_int_equal(f->back[victim], f->buf[victim] ^ 0x04);
    store_set_verify(f->s, 1);
    /* The other tensors are fine; rewriting the damaged one heals it. */
    assert_int_equal(store_read(f->s, key(1), f->back, store_padded_bytes(TBYTES), &err), ST_OK);
    assert_int_equal(store_write(f->s, key(2), f->buf, store_padded_bytes(TBYTES), &err), ST_OK);
    assert_int_equal(store_commit(f->s, &err), ST_OK);
    expect_generation(f, 1);
}

/* A torn or damaged manifest is refused with a clear error, not misread. */
static void test_damaged_manifest_is_refused(void **state) {
    fixture *f = *state;
    st_error err = {0};
    store_close(f->s);
    f->s = NULL;
    char name[700];
    snprintf(name, sizeof name, "%s/strata-store.manifest", f->dirs[0]);
    int fd = open(name, O_RDWR);
    assert_true(fd >= 0);
    unsigned char b;
    assert_int_equal(pread(fd, &b, 1, 70), 1);
    b ^= 1;
    assert_int_equal(pwrite(fd, &b, 1, 70), 1);
    close(fd);
    assert_int_equal(reopen(f, STORE_OPEN_EXISTING, &err), ST_ECORRUPT);
    assert_non_null(strstr(err.msg, "manifest checksum mismatch"));
    fd = open(name, O_RDWR);
    b ^= 1;
    assert_int_equal(pwrite(fd, &b, 1, 70), 1);
    close(fd);
    assert_int_equal(reopen(f, STORE_OPEN_EXISTING, &err), ST_OK);
    expect_generation(f, 1);
}

/* A manifest whose checksum is right but whose fields are hostile (a crafted
 * file, or a bug in a writer) is refused, not trusted: a size whose chunk
 * count wraps, a region whose end wraps past 2^64, a tensor count no body can
 * hold. Each would otherwise crash, hang, or hand out overlapping regions. */
static void put_le(unsigned char *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void test_hostile_manifest_is_refused(void **state) {
    fixture *f = *state;
    st_error err = {0};
    store_close(f->s);
    f->s = NULL;
    char name[700];
    snprintf(name, sizeof name, "%s/strata-store.manifest", f->dirs[0]);
    unsigned char orig[8192];
    int fd = open(name, O_RDWR);
    assert_true(fd >= 0);
    ssize_t n = pread(fd, orig, sizeof orig, 0);
    assert_true(n >= 4096);
    uint64_t body = get_le(orig + 32, 8);
    /* 2 paths, no metadata, TBYTES = 6 chunks: 40 + 16 + 24 bytes a tensor. */
    const size_t rec = 80, last = 64 + 8 + (NT - 1) * rec;
    assert_int_equal(get_le(orig + 44, 4), NT);
    for (int c = 0; c < 3; c++) {
        unsigned char b[8192];
        memcpy(b, orig, (size_t)n);
        if (c == 0) {
            put_le(b + last + 24, UINT64_MAX - 100, 8);   /* size: (bytes + chunk - 1) wraps to 0 chunks */
            put_le(b + last + 32, 0, 4);
            put_le(b + last + 40, UINT64_MAX, 8);
            put_le(b + last + 48, UINT64_MAX, 8);
        } else if (c == 1) {
            put_le(b + last + 40, (uint64_t)0 - 4096, 8);   /* offset + length wraps below the file size */
        } else {
            put_le(b + 44, 0x7fffffff, 4);   /* tensor count */
        }
        put_le(b + 64 + body, st_crc32c(0, b, 64 + body), 4);
        assert_int_equal(pwrite(fd, b, (size_t)n, 0), n);
        st_status st = reopen(f, STORE_OPEN_EXISTING, &err);
        if (st != ST_ECORRUPT) print_error("case %d: %s\n", c, err.msg);
        assert_int_equal(st, ST_ECORRUPT);
    }
    assert_int_equal(pwrite(fd, orig, (size_t)n, 0), n);
    close(fd);
    assert_int_equal(reopen(f, STORE_OPEN_EXISTING, &err), ST_OK);
    expect_generation(f, 1);
}

/* A tensor's region grows the data files; the new size must be durable
 * (fdatasync) before a manifest names the region, even if the tensor is
 * never written, or a power loss leaves a manifest pointing past the end of
 * a file and a store that no longer opens. */
static void test_grown_data_files_are_synced_at_commit(void **state) {
    fixture *f = *state;
    st_error err = {0};
    int p1 = -1;
    for (int i = 0; i < io_engine_path_count(f->eng); i++)
        if (!strcmp(io_path_dir(f->eng, i), f->dirs[1])) p1 = i;
    assert_true(p1 >= 0);
    io_path_counters before, after;
    io_engine_path_counters(f->eng, p1, &before);
    assert_int_equal(store_create_tensor(f->s, key(NT), 16u << 20, STORE_TIER_SSD, 0, &err), ST_OK);
    assert_int_equal(store_commit(f->s, &err), ST_OK);
    io_engine_path_counters(f->eng, p1, &after);
    /* Path 1 holds only its data file: any sync there is that file's. */
    assert_true(after.syncs > before.syncs);
    assert_int_equal(reopen(f, STORE_OPEN_EXISTING, &err), ST_OK);
    assert_true(store_has_tensor(f->s, key(NT)));
    expect_generation(f, 1);
}

/* The host budget is checked before the tensor's memory is allocated: a
 * tensor far over budget is refused as such, without the allocation. */
static void test_host_budget_checked_before_allocating(void **state) {
    fixture *f = *state;
    st_error err = {0};
    /* The fixture's store has no host budget at all. 1 TiB: an allocation
     * that would fail (or abort under a sanitizer) if it were attempted. */
    assert_int_equal(store_create_tensor(f->s, key(NT), 1ull << 40, STORE_TIER_HOST, 0, &err), ST_ENOMEM);
    assert_non_null(strstr(err.msg, "host budget"));
    assert_false(store_has_tensor(f->s, key(NT)));
}

/* ---- a full file system -------------------------------------------------------- */


static int run_quiet(const char *cmd) {
    char full[2200];
    snprintf(full, sizeof full, "%s >/dev/null 2>&1", cmd);
    return system(full);
}

static int mount_small_ext4(small_fs *fs, const char *root) {
    snprintf(fs->image, sizeof fs->image, "%s/small.img", root);
    snprintf(fs->mnt, sizeof fs->mnt, "%s/small", root);
    mkdir(fs->mnt, 0755);
    char cmd[2048];
    if (geteuid() != 0) return 0;
    snprintf(cmd, sizeof cmd, "truncate -s 24M %s && mkfs.ext4 -q -F -m 0 %s", fs->image, fs->image);
    if (run_quiet(cmd) != 0) return 0;
    snprintf(cmd, sizeof cmd, "mount -o loop %s %s", fs->image, fs->mnt);
    if (run_quiet(cmd) != 0) return 0;
    fs->mounted = 1;
    return 1;
}

static void unmount_small(small_fs *fs) {
    char cmd[1024];
    if (fs->mounted) {
        snprintf(cmd, sizeof cmd, "umount %s", fs->mnt);
        run_quiet(cmd);
        fs->mounted = 0;
    }
    unlink(fs->image);
    rmdir(fs->mnt);
}

/* Fills the file system with one file until nothing is left. */
static void fill_up(const char *dir) {
    char name[800];
    snprintf(name, sizeof name, "%s/filler", dir);
    int fd = open(name, O_RDWR | O_CREAT, 0644);
    assert_true(fd >= 0);
    off_t at = 0;
    for (off_t step = 1 << 20; step >= 4096; step /= 2)
        while (fallocate(fd, 0, at, step) == 0) at += step;
    fsync(fd);
    close(fd);
}

static void test_full_file_system(void **state) {
    fixture *f = *state;
    st_error err = {0};
    small_fs *fs = &f->fs;
    if (mount_small_ext4(fs, f->root)) {
        print_message("ENOSPC: a real full file system (24 MiB ext4 image, loop-mounted)\n");
        store_config cfg = store_default_config();
        const char *p[1] = {fs->mnt};
        cfg.paths = p;
        cfg.n_paths = 1;
        cfg.mode = STORE_CREATE;
        cfg.chunk_bytes = CHUNK;
        cfg.engine = f->eng;
        store *s;
        assert_int_equal(store_open(&cfg, &s, NULL, 0, &err), ST_OK);
        /* Headroom for the commit below, given back once the disk is full. */
        char headroom[800];
        snprintf(headroom, sizeof headroom, "%s/headroom", fs->mnt);
        int hfd = open(headroom, O_RDWR | O_CREAT, 0644);
        assert_true(hfd >= 0);
        assert_int_equal(fallocate(hfd, 0, 0, 256 * 1024), 0);
        close(hfd);
        /* Tensors until the disk is full: the one that does not fit fails
         * at creation, with the path in the message. */
        int made = 0;
        st_status st = ST_OK;
        while ((st = store_create_tensor(s, key(made), TBYTES, STORE_TIER_SSD, 0, &err)) == ST_OK) {
            fill(f->buf, TBYTES, (uint64_t)made);
            assert_int_equal(store_write(s, key(made), f->buf, store_padded_bytes(TBYTES), &err), ST_OK);
            made++;
            assert_true(made < 1000);
        }
        assert_int_equal(st, ST_ENOSPC);
        assert_int_equal(err.sys_errno, ENOSPC);
        assert_non_null(strstr(err.msg, fs->mnt));
        assert_non_null(strstr(err.msg, "master["));
        assert_true(made > 3);
        assert_int_equal(unlink(headroom), 0);
        assert_int_equal(store_commit(s, &err), ST_OK);
        /* Now fill the last blocks (after the write, which drops the kept
         * commit before the last and frees its manifest's block): the next
         * commit cannot write its manifest. */
        fill(f->buf, TBYTES, 999);
        assert_int_equal(store_write(s, key(0), f->buf, store_padded_bytes(TBYTES), &err), ST_OK);
        fill_up(fs->mnt);
        assert_int_equal(store_commit(s, &err), ST_ENOSPC);
        assert_non_null(strstr(err.msg, "strata-store.manifest"));
        store_close(s);
        /* Reopen on the still-full disk: the last commit, complete. */
        cfg.mode = STORE_OPEN_EXISTING;
        assert_int_equal(store_open(&cfg, &s, NULL, 0, &err), ST_OK);
        assert_int_equal(store_generation(s), 1);
        for (int i = 0; i < made; i++) {
            fill(f->buf, TBYTES, (uint64_t)i);
            assert_int_equal(store_read(s, key(i), f->back, store_padded_bytes(TBYTES), &err), ST_OK);
            assert_memory_equal(f->buf, f->back, TBYTES);
        }
        uint64_t bad = 1;
        assert_int_equal(store_scrub(s, &bad, &err), ST_OK);
        assert_int_equal(bad, 0);
        store_close(s);
        return;
    }
    print_message("ENOSPC: injected (no root, or loop mounts unavailable): every write fails with ENOSPC\n");
    assert_int_equal(write_all(f, 2, &err), ST_OK);
    io_fault fault = {.ops = IO_FAULT_WRITE, .fail_at = 1, .fail_count = 0, .fail_errno = ENOSPC};
    io_engine_set_fault(f->eng, &fault);
    assert_int_equal(store_commit(f->s, &err), ST_ENOSPC);
    assert_int_equal(store_write(f->s, key(0), f->buf, store_padded_bytes(TBYTES), &err), ST_ENOSPC);
    io_engine_set_fault(f->eng, NULL);
    assert_int_equal(reopen(f, STORE_OPEN_EXISTING, &err), ST_OK);
    expect_generation(f, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_failed_write_blocks_commit_until_rewritten, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_data_sync_fails_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_manifest_write_keeps_old_manifest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_host_flush_is_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_read_is_reported_and_harmless, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_transfers_everywhere, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flipped_byte_is_detected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_manifest_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_manifest_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grown_data_files_are_synced_at_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_budget_checked_before_allocating, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_file_system, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
