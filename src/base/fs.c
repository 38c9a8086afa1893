/* fs.c - atomic file replacement, directory sync, path comparison (see
 * strata/fs.h). */
#define _GNU_SOURCE
#include "strata/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

st_status st_fsync_dir(const char *dir, st_error *err) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return st_fail_errno(err, errno, "%s: cannot open the directory to sync it", dir);
    int rc = fsync(fd);
    int en = errno;
    close(fd);
    if (rc != 0) return st_fail_errno(err, en, "%s: cannot sync the directory", dir);
    return ST_OK;
}

st_status st_fsync_parent_dir(const char *path, st_error *err) {
    const char *slash = strrchr(path, '/');
    if (!slash) return st_fsync_dir(".", err);
    if (slash == path) return st_fsync_dir("/", err);
    char *dir = strndup(path, (size_t)(slash - path));
    if (!dir) return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    st_status s = st_fsync_dir(dir, err);
    free(dir);
    return s;
}

st_status st_mkdir_p(const char *path, st_error *err) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return st_fail(err, ST_EINVAL, "%.64s...: path too long", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return st_fail_errno(err, errno, "%s: cannot create", buf);
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return st_fail_errno(err, errno, "%s: cannot create", buf);
    struct stat sb;
    if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode)) return st_fail(err, ST_EINVAL, "%s: not a directory", buf);
    return ST_OK;
}

static void release(st_atomic_file *f) {
    free(f->path);
    free(f->tmp);
    *f = (st_atomic_file){.fd = -1};
}

st_status st_atomic_open(st_atomic_file *f, const char *path, unsigned flags, st_error *err) {
    *f = (st_atomic_file){.fd = -1};
    size_t cap = strlen(path) + 32;
    f->path = strdup(path);
    f->tmp = malloc(cap);
    if (!f->path || !f->tmp) {
        release(f);
        return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    }
    if (flags & ST_ATOMIC_TMP_PER_PROCESS) snprintf(f->tmp, cap, "%s.tmp.%ld", path, (long)getpid());
    else snprintf(f->tmp, cap, "%s.tmp", path);
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        st_status s = st_fail_errno(err, errno, "%s: cannot create %s", path, f->tmp);
        release(f);
        return s;
    }
    return ST_OK;
}

st_status st_atomic_open_stream(st_atomic_file *f, const char *path, FILE **out, st_error *err) {
    st_status s = st_atomic_open(f, path, 0, err);
    if (s != ST_OK) return s;
    if (!(f->stream = fdopen(f->fd, "w"))) {
        s = st_fail_errno(err, errno, "%s: cannot open a stream on %s", path, f->tmp);
        st_atomic_abort(f);
        return s;
    }
    *out = f->stream;
    return ST_OK;
}

/* Closes the temporary file (the stream owns fd once there is one). */
static int close_tmp(st_atomic_file *f) {
    int rc = f->stream ? fclose(f->stream) : close(f->fd);
    f->stream = NULL;
    f->fd = -1;
    return rc;
}

void st_atomic_abort(st_atomic_file *f) {
    if (!f || !f->tmp) return;
    if (f->fd >= 0) close_tmp(f);
    unlink(f->tmp);
    release(f);
}

st_status st_atomic_commit(st_atomic_file *f, st_error *err) {
    st_status s = ST_OK;
    if (f->stream) {
        /* An earlier failed write shows only in the error flag, with no errno. */
        errno = 0;
        if (fflush(f->stream) != 0 || ferror(f->stream))
            s = st_fail_errno(err, errno ? errno : EIO, "%s: writing %s failed", f->path, f->tmp);
    }
    if (s == ST_OK && fsync(f->fd) != 0) s = st_fail_errno(err, errno, "%s: fsync of %s failed", f->path, f->tmp);
    if (close_tmp(f) != 0 && s == ST_OK) s = st_fail_errno(err, errno, "%s: closing %s failed", f->path, f->tmp);
    if (s == ST_OK && rename(f->tmp, f->path) != 0)
        s = st_fail_errno(err, errno, "%s: cannot rename %s over it", f->path, f->tmp);
    if (s != ST_OK) {
        st_atomic_abort(f);   /* the target is untouched: leave no debris beside it */
        return s;
    }
    s = st_fsync_parent_dir(f->path, err);
    release(f);
    return s;
}

st_status st_read_file(const char *path, size_t max_bytes, char **out, size_t *n, st_error *err) {
    *out = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return st_fail_errno(err, errno, "%s", path);
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int en = errno;
        close(fd);
        return st_fail_errno(err, en, "%s: stat", path);
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return st_fail(err, ST_EINVAL, "%s: is a directory, not a file", path);
    }
    size_t size = (size_t)sb.st_size, got = 0;
    if (max_bytes && size > max_bytes) {
        close(fd);
        return st_fail(err, ST_EINVAL, "%s: %zu bytes, more than the %zu such a file can be", path, size, max_bytes);
    }
    char *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return st_fail(err, ST_ENOMEM, "%s: out of memory for %zu bytes", path, size);
    }
    while (got < size) {
        ssize_t r = pread(fd, buf + got, size - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int en = r < 0 ? errno : EIO;
            free(buf);
            close(fd);
            return r < 0 ? st_fail_errno(err, en, "%s: read", path)
                         : st_fail(err, ST_EIO, "%s: ends at byte %zu of %zu (changed while read?)", path, got, size);
        }
        got += (size_t)r;
    }
    close(fd);
    buf[size] = 0;
    *out = buf;
    *n = size;
    return ST_OK;
}

st_status st_write_file_atomic(const char *path, const void *data, size_t n, st_error *err) {
    st_atomic_file f;
    st_status s = st_atomic_open(&f, path, 0, err);
    if (s != ST_OK) return s;
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(f.fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            s = st_fail_errno(err, w < 0 ? errno : EIO, "%s: writing %s failed", path, f.tmp);
            st_atomic_abort(&f);
            return s;
        }
        p += w;
        n -= (size_t)w;
    }
    return st_atomic_commit(&f, err);
}

int st_same_path(const char *a, const char *b) {
    char x[PATH_MAX], y[PATH_MAX];
    return realpath(a, x) && realpath(b, y) && strcmp(x, y) == 0;
}

int st_same_paths(const char *const *a, int na, const char *const *b, int nb) {
    if (na != nb) return 0;
    for (int i = 0; i < na; i++)
        if (!st_same_path(a[i], b[i])) return 0;
    return 1;
}

/* ---- advisory locks ------------------------------------------------------------------ */

static long read_holder(int fd) {
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = '\0';
    long pid = strtol(buf, NULL, 10);
    return pid > 0 ? pid : 0;
}

st_status st_lock_take(const char *path, int exclusive, int *lock, long *holder, st_error *err) {
    *lock = -1;
    if (holder) *holder = 0;
    int fd = exclusive ? open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644) : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (!exclusive && errno == ENOENT) return ST_OK;
        return st_fail_errno(err, errno, "%s: cannot open the lock file", path);
    }
    if (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
        const int en = errno;
        const long pid = en == EWOULDBLOCK ? read_holder(fd) : 0;
        close(fd);
        if (en != EWOULDBLOCK) return st_fail_errno(err, en, "%s: cannot lock", path);
        if (holder) *holder = pid;
        return pid ? st_fail(err, ST_EEXIST, "%s is held by process %ld", path, pid)
                   : st_fail(err, ST_EEXIST, "%s is held by another process", path);
    }
    if (exclusive) {
        char pid[32];
        const int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        /* the PID only names the holder in messages: a failure to write it loses nothing */
        if (ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)n, 0) != n) (void)ftruncate(fd, 0);
    }
    *lock = fd;
    return ST_OK;
}

void st_lock_release(int *lock) {
    if (*lock >= 0) close(*lock);   /* closing the last descriptor releases the flock */
    *lock = -1;
}
