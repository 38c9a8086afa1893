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
#include "strata/fs.h"

void store_path_join(char *out, size_t cap, const char *dir, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
}

st_status store_read_whole_file(const char *name, unsigned char **out, size_t *n, st_error *err) {
    return st_read_file(name, 0, (char **)out, n, err);
}

st_status store_run_batch(store *s, io_request *reqs, size_t n, st_error *err) {
    io_ticket t;
    io_ticket_init(&t);
    st_status st = io_submit(s->engine, reqs, n, &t, err);
    return st != ST_OK ? st : io_ticket_wait(&t, err);
}
