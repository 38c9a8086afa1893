/*
 * strata/fs.h - file-system helpers every layer shares: replacing a file
 * atomically, syncing a directory, comparing paths.
 *
 * An atomic write never leaves a half-written file under the final name: the
 * bytes go to a temporary file beside the target (same directory, so the
 * rename cannot cross file systems), which is fsynced, renamed over the
 * target, and then the directory is fsynced so that the rename itself
 * survives a power cut. A reader sees the old file or the new one, never a
 * mix; a failure before the rename leaves the old file untouched and removes
 * the temporary.
 *
 * Large files are streamed:
 *
 *     st_atomic_file f;
 *     if (st_atomic_open(&f, path, 0, err) != ST_OK) return ...;
 *     ... write(f.fd, ...), pwrite(f.fd, ...) ...
 *     if (failed) { st_atomic_abort(&f); return ...; }
 *     return st_atomic_commit(&f, err);
 *
 * formatted text through st_atomic_open_stream's FILE *, and a buffer in one
 * call: st_write_file_atomic(path, data, n, err).
 * Errors name the target and, where it matters, the temporary file.
 */
#ifndef STRATA_FS_H
#define STRATA_FS_H

#include <stdio.h>

#include "strata/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A file being written for an atomic replacement of `path`. Between open and
 * commit/abort, write to fd (write, pwrite: the header of a file may be
 * filled in last), or to the stdio stream of st_atomic_open_stream. */
typedef struct st_atomic_file {
    int fd;          /* the temporary file, open for writing */
    FILE *stream;    /* st_atomic_open_stream's; commit flushes and closes it */
    char *path;      /* the target */
    char *tmp;       /* the temporary beside it; NULL once committed or aborted */
} st_atomic_file;

/* Name the temporary "<path>.tmp.<pid>" instead of "<path>.tmp": for files
 * that two processes might write at once. The plain name lets a later run
 * find and remove a crashed writer's leftover by name. */
#define ST_ATOMIC_TMP_PER_PROCESS 1u

/* Creates the temporary file (mode 0644, truncated if a leftover exists).
 * On failure f holds nothing to release. */
st_status st_atomic_open(st_atomic_file *f, const char *path, unsigned flags, st_error *err);
/* st_atomic_open for formatted writers: *out is a stdio stream over f's
 * temporary file, which belongs to f (commit or abort closes it). */
st_status st_atomic_open_stream(st_atomic_file *f, const char *path, FILE **out, st_error *err);
/* Flushes, fsyncs and closes the temporary file, renames it over the target
 * and fsyncs the directory. Releases f whatever happens; on a failure before
 * the rename the target is untouched and the temporary removed. A stream
 * whose writes failed (ferror) fails the commit. */
st_status st_atomic_commit(st_atomic_file *f, st_error *err);
/* Drops the temporary file and releases f. A no-op on an f that was
 * committed, aborted, or zero-initialized and never opened. */
void st_atomic_abort(st_atomic_file *f);

/* The whole of a file, into a malloc'd buffer (*out, NUL-terminated beyond
 * its *n bytes, so text parses in place). A file larger than max_bytes
 * (0: no limit) is ST_EINVAL naming it and its size, before anything is
 * allocated: for files that are small by nature (configs, indexes) and
 * may be anything. Errors name the file. */
st_status st_read_file(const char *path, size_t max_bytes, char **out, size_t *n, st_error *err);

/* The whole of a buffer, atomically (open, write, commit). */
st_status st_write_file_atomic(const char *path, const void *data, size_t n, st_error *err);

/* fsync of a directory: makes the creation, rename or removal of a file in
 * it durable. */
st_status st_fsync_dir(const char *dir, st_error *err);
/* st_fsync_dir of the directory holding path ("." for a bare name). */
st_status st_fsync_parent_dir(const char *path, st_error *err);

/* Creates a directory and its missing parents (mkdir -p); ST_EINVAL when
 * path exists and is not a directory. */
st_status st_mkdir_p(const char *path, st_error *err);

/* An advisory lock on a file (flock), held until st_lock_release or the
 * process ends (a crash releases it). Exclusive: one writer; the file is
 * created if missing and holds the holder's PID, so that a refused process
 * can name it. Shared: readers, which conflict with a writer only; a
 * missing file means no writer and nothing is created (*lock = -1, ST_OK).
 * Held by another process in a conflicting mode: ST_EEXIST, and *holder its
 * PID when it wrote one (0 when unknown). */
st_status st_lock_take(const char *path, int exclusive, int *lock, long *holder, st_error *err);
void st_lock_release(int *lock);

/* 1 when a and b both exist and name the same file after resolving links,
 * "." and ".." (realpath); else 0. */
int st_same_path(const char *a, const char *b);
/* 1 when both lists have n entries and a[i] and b[i] are the same path for
 * every i (same order); else 0. */
int st_same_paths(const char *const *a, int na, const char *const *b, int nb);

#ifdef __cplusplus
}
#endif
#endif
