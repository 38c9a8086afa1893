/* io_preflight.c - checks storage paths before a long job: existence,
 * write permission, O_DIRECT support and free space. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "io/io_internal.h"

/* Writes and reads back one aligned block with O_DIRECT in a scratch file:
 * some file systems accept the O_DIRECT flag at open and fail the I/O. */
static st_status probe_path(io_preflight_path *pp, int index, st_error *err) {
    char name[PATH_MAX];
    snprintf(name, sizeof name, "%s/.strata-preflight-%ld-%d", pp->dir, (long)getpid(), index);
    int fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        int en = errno;
        if (en == ENOSPC || en == EDQUOT) return st_fail_errno(err, en, "storage path %s has no room for a file", pp->dir);
        return st_fail(err, ST_EIO, "storage path %s is not writable: %s", pp->dir, strerror(en));
    }
    close(fd);
    pp->direct_ok = 0;
    pp->alignment = IO_DIRECT_ALIGN;
    fd = open(name, O_RDWR | O_DIRECT | O_CLOEXEC);
    if (fd >= 0) {
        void *buf = st_alloc_aligned(IO_DIRECT_ALIGN, IO_DIRECT_ALIGN);
        if (buf) {
            memset(buf, 0x5a, IO_DIRECT_ALIGN);
            if (pwrite(fd, buf, IO_DIRECT_ALIGN, 0) == (ssize_t)IO_DIRECT_ALIGN) {
                memset(buf, 0, IO_DIRECT_ALIGN);
                pp->direct_ok = pread(fd, buf, IO_DIRECT_ALIGN, 0) == (ssize_t)IO_DIRECT_ALIGN &&
                                ((unsigned char *)buf)[IO_DIRECT_ALIGN - 1] == 0x5a;
            } else if (errno == ENOSPC || errno == EDQUOT) {
                /* A full disk, not a missing feature: the open accepted
                 * O_DIRECT, and the space check below judges the rest. */
                pp->direct_ok = 1;
            }
            st_free_aligned(buf);
        }
        close(fd);
    }
    unlink(name);
    return ST_OK;
}

st_status io_preflight(io_preflight_path *paths, int n, int allow_buffered, char *warning, size_t warning_cap,
                       st_error *err) {
    if (warning && warning_cap) warning[0] = '\0';
    dev_t *devs = calloc((size_t)(n > 0 ? n : 1), sizeof *devs);
    if (!devs) return st_fail(err, ST_ENOMEM, "preflight: out of memory");
    st_status s = ST_OK;
    for (int i = 0; i < n && s == ST_OK; i++) {
        io_preflight_path *pp = &paths[i];
        struct stat st;
        if (stat(pp->dir, &st) != 0) {
            s = st_fail_errno(err, errno, "storage path %s", pp->dir);
            if (s == ST_ENOENT) s = st_fail(err, ST_ENOENT, "storage path %s does not exist", pp->dir);
            break;
        }
        if (!S_ISDIR(st.st_mode)) {
            s = st_fail(err, ST_EINVAL, "storage path %s is not a directory", pp->dir);
            break;
        }
        devs[i] = st.st_dev;
        struct statvfs vfs;
        if (statvfs(pp->dir, &vfs) != 0) {
            s = st_fail_errno(err, errno, "statvfs %s", pp->dir);
            break;
        }
        pp->free_bytes = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
        s = probe_path(pp, i, err);
        if (s != ST_OK) break;
        if (!pp->direct_ok) {
            if (!allow_buffered) {
                s = st_fail(err, ST_EUNSUPPORTED,
                            "storage path %s does not support O_DIRECT (tmpfs and some network file systems do not): "
                            "use a directory on a local disk, or allow buffered I/O (slower, fills the page cache)",
                            pp->dir);
                break;
            }
            if (warning && warning_cap) {
                size_t used = strlen(warning);
                snprintf(warning + used, warning_cap - used, "%sstorage path %s does not support O_DIRECT: using buffered I/O",
                         used ? "; " : "", pp->dir);
            }
        }
    }
    /* Free space, per file system: paths that share one share its space. */
    for (int i = 0; i < n && s == ST_OK; i++) {
        int first = 1;
        for (int j = 0; j < i; j++) first &= devs[j] != devs[i];
        if (!first) continue;
        uint64_t need = 0;
        int sharing = 0;
        for (int j = i; j < n; j++)
            if (devs[j] == devs[i]) {
                need += paths[j].need_bytes;
                sharing++;
            }
        if (need > paths[i].free_bytes) {
            char a[32], b[32], c[32];
            st_format_bytes((double)paths[i].free_bytes, a, sizeof a);
            st_format_bytes((double)need, b, sizeof b);
            st_format_bytes((double)(need - paths[i].free_bytes), c, sizeof c);
            if (sharing > 1)
                s = st_fail(err, ST_ENOSPC,
                            "storage path %s is short by %s: its file system has %s free, and the %d paths on it "
                            "need %s together",
                            paths[i].dir, c, a, sharing, b);
            else
                s = st_fail(err, ST_ENOSPC, "storage path %s is short by %s: it has %s free, the job needs %s",
                            paths[i].dir, c, a, b);
        }
    }
    free(devs);
    return s;
}
