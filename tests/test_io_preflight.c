/* test_io_preflight.c - path checks before a long job (missing, unwritable,
 * no O_DIRECT, not enough space, shared file systems), and buffered I/O on
 * a file system without O_DIRECT. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "strata/io.h"

typedef struct fixture {
    char dir[512];
    char nodirect[600];     /* a directory whose file system lacks O_DIRECT, or "" */
    int mounted;            /* nodirect is a ramfs this test mounted */
    char how[128];
} fixture;

static int direct_works(const char *dir) {
    char name[700];
    snprintf(name, sizeof name, "%s/probe", dir);
    int fd = open(name, O_RDWR | O_CREAT | O_DIRECT, 0600);
    if (fd >= 0) close(fd);
    unlink(name);
    return fd >= 0;
}

/* tmpfs lacked O_DIRECT until Linux 6.6; newer kernels have it, so fall back
 * to a ramfs mount (root only), which still lacks it. */
static void find_nodirect_dir(fixture *f) {
    char shm[] = "/dev/shm/strata-preflight-XXXXXX";
    if (mkdtemp(shm)) {
        if (!direct_works(shm)) {
            snprintf(f->nodirect, sizeof f->nodirect, "%s", shm);
            snprintf(f->how, sizeof f->how, "tmpfs (/dev/shm)");
            return;
        }
        rmdir(shm);
    }
    snprintf(f->nodirect, sizeof f->nodirect, "%s/ramfs", f->dir);
    mkdir(f->nodirect, 0755);
    if (mount("ramfs", f->nodirect, "ramfs", 0, NULL) == 0 && !direct_works(f->nodirect)) {
        f->mounted = 1;
        snprintf(f->how, sizeof f->how, "a ramfs mount (tmpfs has O_DIRECT on this kernel)");
        return;
    }
    rmdir(f->nodirect);
    f->nodirect[0] = '\0';
}

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "%s/tmp-io-preflight-XXXXXX", STRATA_BINARY_DIR);
    if (!mkdtemp(f->dir)) return -1;
    chmod(f->dir, 0755);   /* the unwritable-path check runs as another user */
    find_nodirect_dir(f);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    if (f->nodirect[0]) {
        char name[700];
        snprintf(name, sizeof name, "%s/x.bin", f->nodirect);
        unlink(name);
        if (f->mounted) umount(f->nodirect);
        rmdir(f->nodirect);
    }
    char sub[600];
    snprintf(sub, sizeof sub, "%s/sub", f->dir);
    rmdir(sub);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void test_good_path_passes(void **state) {
    fixture *f = *state;
    io_preflight_path p = {.dir = f->dir, .need_bytes = 1 << 20};
    st_error err = {0};
    char warn[256];
    assert_int_equal(io_preflight(&p, 1, 0, warn, sizeof warn, &err), ST_OK);
    assert_int_equal(p.direct_ok, 1);
    assert_true(p.free_bytes > (1u << 20));
    assert_string_equal(warn, "");
}

static void test_missing_path(void **state) {
    fixture *f = *state;
    char missing[700];
    snprintf(missing, sizeof missing, "%s/does-not-exist", f->dir);
    io_preflight_path p[2] = {{.dir = f->dir}, {.dir = missing}};
    st_error err = {0};
    assert_int_equal(io_preflight(p, 2, 0, NULL, 0, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, missing));
    assert_non_null(strstr(err.msg, "does not exist"));
}

static void test_not_enough_space_says_how_much(void **state) {
    fixture *f = *state;
    io_preflight_path p = {.dir = f->dir, .need_bytes = 1ull << 62};
    st_error err = {0};
    assert_int_equal(io_preflight(&p, 1, 0, NULL, 0, &err), ST_ENOSPC);
    assert_non_null(strstr(err.msg, f->dir));
    assert_non_null(strstr(err.msg, "is short by"));
    assert_non_null(strstr(err.msg, "the job needs 4096.0 PiB"));
}

/* Two directories on one file system: each need fits alone, the sum does not. */
static void test_paths_sharing_a_file_system_add_up(void **state) {
    fixture *f = *state;
    char sub[600];
    snprintf(sub, sizeof sub, "%s/sub", f->dir);
    mkdir(sub, 0755);
    io_preflight_path probe = {.dir = f->dir};
    st_error err = {0};
    assert_int_equal(io_preflight(&probe, 1, 0, NULL, 0, &err), ST_OK);
    uint64_t each = probe.free_bytes / 3 * 2;   /* 2/3 each: 4/3 together */
    io_preflight_path p[2] = {{.dir = f->dir, .need_bytes = each}, {.dir = sub, .need_bytes = each}};
    assert_int_equal(io_preflight(&p[0], 1, 0, NULL, 0, &err), ST_OK);
    assert_int_equal(io_preflight(p, 2, 0, NULL, 0, &err), ST_ENOSPC);
    assert_non_null(strstr(err.msg, "the 2 paths on it"));
}

static void test_unwritable_path(void **state) {
    fixture *f = *state;
    char ro[600];
    snprintf(ro, sizeof ro, "%s/sub", f->dir);
    mkdir(ro, 0555);
    chmod(ro, 0555);
    if (geteuid() != 0) {
        io_preflight_path p = {.dir = ro};
        st_error err = {0};
        assert_int_equal(io_preflight(&p, 1, 0, NULL, 0, &err), ST_EIO);
        assert_non_null(strstr(err.msg, "is not writable"));
        return;
    }
    /* Root writes anywhere: check from a child running as nobody. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct passwd *nobody = getpwnam("nobody");
        uid_t uid = nobody ? nobody->pw_uid : 65534;
        if (setgid(uid) != 0 || setuid(uid) != 0) _exit(3);
        io_preflight_path p = {.dir = ro};
        st_error err = {0};
        st_status s = io_preflight(&p, 1, 0, NULL, 0, &err);
        _exit(s == ST_EIO && strstr(err.msg, "is not writable") ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    chmod(ro, 0755);
}

static void test_no_direct_io(void **state) {
    fixture *f = *state;
    if (!f->nodirect[0]) {
        print_message("no file system without O_DIRECT available (tmpfs has it on this kernel, and ramfs "
                      "cannot be mounted without root): not exercised\n");
        skip();
    }
    print_message("file system without O_DIRECT: %s\n", f->how);
    io_preflight_path p = {.dir = f->nodirect};   /* ramfs reports no free space */
    st_error err = {0};
    assert_int_equal(io_preflight(&p, 1, 0, NULL, 0, &err), ST_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, f->nodirect));
    assert_non_null(strstr(err.msg, "does not support O_DIRECT"));
    char warn[512];
    assert_int_equal(io_preflight(&p, 1, 1, warn, sizeof warn, &err), ST_OK);
    assert_non_null(strstr(warn, "using buffered I/O"));

    /* The engine refuses O_DIRECT there with the same advice, and works buffered. */
    io_engine *eng;
    assert_int_equal(io_engine_create(NULL, &eng, &err), ST_OK);
    int pd, pb;
    assert_int_equal(io_engine_add_path(eng, f->nodirect, NULL, &pd, &err), ST_OK);
    io_file *file = NULL;
    assert_int_equal(io_file_open(eng, pd, "x.bin", IO_FILE_CREATE, &file, &err), ST_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "does not support direct I/O"));
    io_path_options opt = {.buffered = 1};
    assert_int_equal(io_engine_add_path(eng, f->nodirect, &opt, &pb, &err), ST_OK);
    assert_int_equal(io_path_alignment(eng, pb), 1);
    assert_int_equal(io_file_open(eng, pb, "x.bin", IO_FILE_CREATE, &file, &err), ST_OK);
    static const size_t sizes[] = {1, 4095, 4097, 100003};
    for (size_t i = 0; i < 4; i++) {
        unsigned char *src = malloc(sizes[i]), *dst = malloc(sizes[i]);
        for (size_t k = 0; k < sizes[i]; k++) src[k] = (unsigned char)(k * 31 + i);
        io_request w = {.op = IO_OP_WRITE, .file = file, .buf = src, .len = sizes[i], .offset = 7 + i};
        assert_int_equal(io_run(eng, &w, &err), ST_OK);
        io_request r = {.op = IO_OP_READ, .file = file, .buf = dst, .len = sizes[i], .offset = 7 + i};
        assert_int_equal(io_run(eng, &r, &err), ST_OK);
        assert_memory_equal(src, dst, sizes[i]);
        free(src);
        free(dst);
    }
    io_file_close(file);
    io_engine_destroy(eng);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_good_path_passes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_enough_space_says_how_much, setup, teardown),
        cmocka_unit_test_setup_teardown(test_paths_sharing_a_file_system_add_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unwritable_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_direct_io, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
