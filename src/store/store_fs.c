/* store_fs.c - the file-system helpers the store's parts share: names of
 * files in a store directory, reading a small file whole, running a batch of
 * requests on the store's engine. They call nothing else in the store, so
 * every other part may use them (see the order in store_internal.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store_internal.h"

void store_path_join(char *out, size_t cap, const char *dir, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
}

st_status store_read_whole_file(const char *name, unsigned char **out, size_t *n, st_error *err) {
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return st_fail_errno(err, errno, "open %s", name);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int en = errno;
        close(fd);
        return st_fail_errno(err, en, "stat %s", name);
    }
    size_t size = (size_t)st.st_size, got = 0;
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) {
        close(fd);
        return st_fail(err, ST_ENOMEM, "reading %s: out of memory", name);
    }
    while (got < size) {
        ssize_t r = pread(fd, buf + got, size - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int en = r < 0 ? errno : EIO;
            free(buf);
            close(fd);
            return st_fail_errno(err, en, "read %s", name);
        }
        got += (size_t)r;
    }
    close(fd);
    *out = buf;
    *n = size;
    return ST_OK;
}

st_status store_run_batch(store *s, io_request *reqs, size_t n, st_error *err) {
    io_ticket t;
    io_ticket_init(&t);
    st_status st = io_submit(s->engine, reqs, n, &t, err);
    return st != ST_OK ? st : io_ticket_wait(&t, err);
}
