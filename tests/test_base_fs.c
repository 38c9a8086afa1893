/* test_base_fs.c - atomic file replacement (strata/fs.h): the content after a
 * commit, an abort that leaves the old file and no temporary behind, failures
 * that name the path; directory sync; path comparison. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

#include "strata/fs.h"

typedef struct fixture {
    char dir[64];
    char path[PATH_MAX];
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/strata_test_fs_XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    snprintf(f->path, sizeof f->path, "%s/out.json", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "chmod -R u+w %s; rm -rf %s", f->dir, f->dir);
    int rc = system(cmd);
    free(f);
    return rc == 0 ? 0 : -1;
}

/* The whole file at path as a string (NULL if it cannot be read). */
static char *slurp(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, fp);
    buf[n] = 0;
    fclose(fp);
    return buf;
}

static void assert_content(const char *path, const char *want) {
    char *got = slurp(path);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

/* Entries in dir other than . and .. */
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void test_write_replaces_content(void **state) {
    fixture *f = *state;
    st_error err = {0};
    assert_int_equal(st_write_file_atomic(f->path, "first\n", 6, &err), ST_OK);
    assert_content(f->path, "first\n");
    assert_int_equal(st_write_file_atomic(f->path, "second, longer\n", 15, &err), ST_OK);
    assert_content(f->path, "second, longer\n");
    assert_int_equal(st_write_file_atomic(f->path, "", 0, &err), ST_OK);
    assert_content(f->path, "");
    assert_int_equal(count_entries(f->dir), 1);   /* no temporary left */
}

static void test_streamed_write_with_header_last(void **state) {
    fixture *f = *state;
    st_error err = {0};
    st_atomic_file af;
    assert_int_equal(st_atomic_open(&af, f->path, 0, &err), ST_OK);
    assert_int_equal(write(af.fd, "....body", 8), 8);
    assert_int_equal(pwrite(af.fd, "HEAD", 4, 0), 4);   /* filled in once known */
    assert_int_equal(access(f->path, F_OK), -1);         /* nothing under the name until commit */
    assert_int_equal(st_atomic_commit(&af, &err), ST_OK);
    assert_content(f->path, "HEADbody");
}

static void test_stream_commit(void **state) {
    fixture *f = *state;
    st_error err = {0};
    st_atomic_file af;
    FILE *out;
    assert_int_equal(st_atomic_open_stream(&af, f->path, &out, &err), ST_OK);
    for (int i = 0; i < 3000; i++) fprintf(out, "%d,", i % 10);
    fputc('\n', out);
    assert_int_equal(st_atomic_commit(&af, &err), ST_OK);
    char *got = slurp(f->path);
    assert_non_null(got);
    assert_int_equal(strlen(got), 6001);
    assert_true(!strncmp(got, "0,1,2,", 6) && got[6000] == '\n');
    free(got);
    assert_int_equal(count_entries(f->dir), 1);
}

static void test_abort_keeps_old_file(void **state) {
    fixture *f = *state;
    st_error err = {0};
    assert_int_equal(st_write_file_atomic(f->path, "old", 3, &err), ST_OK);
    st_atomic_file af;
    FILE *out;
    assert_int_equal(st_atomic_open_stream(&af, f->path, &out, &err), ST_OK);
    fputs("half of the new", out);
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", f->path);
    assert_int_equal(access(tmp, F_OK), 0);   /* written beside the target */
    st_atomic_abort(&af);
    st_atomic_abort(&af);                      /* a second abort is a no-op */
    assert_content(f->path, "old");
    assert_int_equal(access(tmp, F_OK), -1);
    assert_int_equal(count_entries(f->dir), 1);
    st_atomic_file never = {0};
    st_atomic_abort(&never);                   /* nor does a never-opened one do anything */
}

static void test_per_process_temporary(void **state) {
    fixture *f = *state;
    st_error err = {0};
    st_atomic_file af;
    assert_int_equal(st_atomic_open(&af, f->path, ST_ATOMIC_TMP_PER_PROCESS, &err), ST_OK);
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", f->path, (long)getpid());
    assert_string_equal(af.tmp, tmp);
    assert_int_equal(access(tmp, F_OK), 0);
    assert_int_equal(write(af.fd, "x", 1), 1);
    assert_int_equal(st_atomic_commit(&af, &err), ST_OK);
    assert_null(af.tmp);
    assert_content(f->path, "x");
    assert_int_equal(access(tmp, F_OK), -1);
}

static void test_missing_directory_names_path(void **state) {
    fixture *f = *state;
    st_error err = {0};
    char nowhere[PATH_MAX];
    snprintf(nowhere, sizeof nowhere, "%s/missing/out.json", f->dir);
    assert_int_equal(st_write_file_atomic(nowhere, "x", 1, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, nowhere));
    /* A path under a regular file cannot be created either. */
    char under_file[PATH_MAX + 16];
    snprintf(under_file, sizeof under_file, "%s/out.json", f->path);
    assert_int_equal(st_write_file_atomic(f->path, "x", 1, &err), ST_OK);
    err = (st_error){0};
    assert_int_not_equal(st_write_file_atomic(under_file, "y", 1, &err), ST_OK);
    assert_non_null(strstr(err.msg, under_file));
    assert_content(f->path, "x");
}

static void test_unwritable_directory_names_path(void **state) {
    fixture *f = *state;
    st_error err = {0};
    assert_int_equal(st_write_file_atomic(f->path, "old", 3, &err), ST_OK);
    assert_int_equal(chmod(f->dir, 0555), 0);
    if (access(f->dir, W_OK) == 0) {   /* root writes anywhere */
        chmod(f->dir, 0755);
        skip();
    }
    st_status s = st_write_file_atomic(f->path, "new", 3, &err);
    chmod(f->dir, 0755);
    assert_int_not_equal(s, ST_OK);
    assert_non_null(strstr(err.msg, f->path));
    assert_content(f->path, "old");
    assert_int_equal(count_entries(f->dir), 1);
}

/* A commit that fails at the rename (the target is a directory, which works
 * as root too) reports the path and leaves no temporary. */
static void test_failed_rename_removes_temporary(void **state) {
    fixture *f = *state;
    st_error err = {0};
    assert_int_equal(mkdir(f->path, 0755), 0);
    char inside[PATH_MAX + 16];
    snprintf(inside, sizeof inside, "%s/keep", f->path);
    assert_int_equal(st_write_file_atomic(inside, "k", 1, &err), ST_OK);   /* not empty: rename cannot replace it */
    assert_int_not_equal(st_write_file_atomic(f->path, "new", 3, &err), ST_OK);
    assert_non_null(strstr(err.msg, f->path));
    assert_non_null(strstr(err.msg, "rename"));
    assert_content(inside, "k");
    assert_int_equal(count_entries(f->dir), 1);
}

static void test_fsync_dir(void **state) {
    fixture *f = *state;
    st_error err = {0};
    assert_int_equal(st_fsync_dir(f->dir, &err), ST_OK);
    assert_int_equal(st_fsync_parent_dir(f->path, &err), ST_OK);
    assert_int_equal(st_fsync_parent_dir("bare-name", &err), ST_OK);   /* the working directory */
    char nowhere[PATH_MAX];
    snprintf(nowhere, sizeof nowhere, "%s/missing", f->dir);
    assert_int_equal(st_fsync_dir(nowhere, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, nowhere));
}

static void test_same_path(void **state) {
    fixture *f = *state;
    char sub[PATH_MAX], dotted[PATH_MAX], link[PATH_MAX], other[PATH_MAX];
    snprintf(sub, sizeof sub, "%s/a", f->dir);
    snprintf(dotted, sizeof dotted, "%s/./a/../a/", f->dir);
    snprintf(link, sizeof link, "%s/link", f->dir);
    snprintf(other, sizeof other, "%s/b", f->dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    assert_int_equal(mkdir(other, 0755), 0);
    assert_int_equal(symlink(sub, link), 0);
    assert_true(st_same_path(sub, dotted));
    assert_true(st_same_path(sub, link));
    assert_false(st_same_path(sub, other));
    assert_false(st_same_path(f->path, f->path));   /* does not exist: not known to be the same */
    const char *x[] = {sub, other}, *y[] = {link, other}, *swapped[] = {other, link};
    assert_true(st_same_paths(x, 2, y, 2));
    assert_false(st_same_paths(x, 2, swapped, 2));
    assert_false(st_same_paths(x, 2, y, 1));
    assert_true(st_same_paths(x, 0, y, 0));
}

/* One exclusive holder, named by its PID; readers share and conflict with a
 * writer only; a missing file means no writer; a released lock is free.
 * (flock conflicts between two open files of one process too, so one
 * process plays both sides.) */
static void test_lock(void **state) {
    fixture *f = *state;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/x.lock", f->dir);
    st_error err = {0};
    int reader, writer, second;
    long holder = -1;
    assert_int_equal(st_lock_take(path, 0, &reader, &holder, &err), ST_OK);   /* no file: no writer */
    assert_int_equal(reader, -1);
    assert_int_equal(access(path, F_OK), -1);                                 /* and nothing created */
    assert_int_equal(st_lock_take(path, 1, &writer, &holder, &err), ST_OK);
    assert_true(writer >= 0);
    char want[32];
    snprintf(want, sizeof want, "%ld\n", (long)getpid());
    assert_content(path, want);
    assert_int_equal(st_lock_take(path, 1, &second, &holder, &err), ST_EEXIST);
    assert_int_equal(second, -1);
    assert_int_equal(holder, (long)getpid());
    char named[48];
    snprintf(named, sizeof named, "process %ld", (long)getpid());
    assert_non_null(strstr(err.msg, named));
    assert_int_equal(st_lock_take(path, 0, &reader, &holder, &err), ST_EEXIST);
    st_lock_release(&writer);
    assert_int_equal(writer, -1);
    assert_int_equal(st_lock_take(path, 0, &reader, &holder, &err), ST_OK);
    assert_int_equal(st_lock_take(path, 0, &second, &holder, &err), ST_OK);   /* readers share */
    assert_int_equal(st_lock_take(path, 1, &writer, &holder, &err), ST_EEXIST);
    st_lock_release(&reader);
    st_lock_release(&second);
    assert_int_equal(st_lock_take(path, 1, &writer, &holder, &err), ST_OK);
    st_lock_release(&writer);
    st_lock_release(&writer);   /* twice: a no-op */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_write_replaces_content, setup, teardown),
        cmocka_unit_test_setup_teardown(test_streamed_write_with_header_last, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort_keeps_old_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_per_process_temporary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_directory_names_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unwritable_directory_names_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_rename_removes_temporary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fsync_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
