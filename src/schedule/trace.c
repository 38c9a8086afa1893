/* trace.c - Chrome trace event files (strata/trace.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/trace.h"

struct trace {
    FILE *f;
    char path[4096];
    double t0;
    int lanes, events, failed, fail_errno;
    pthread_mutex_t lock;
};

st_status trace_open(trace **out, const char *path, st_error *err) {
    *out = NULL;
    trace *tr = calloc(1, sizeof *tr);
    if (!tr) return st_fail(err, ST_ENOMEM, "out of memory");
    tr->f = fopen(path, "w");
    if (!tr->f) {
        int e = errno;
        free(tr);
        return st_fail_errno(err, e, "%s: cannot create the trace file", path);
    }
    snprintf(tr->path, sizeof tr->path, "%s", path);
    tr->t0 = st_now();
    pthread_mutex_init(&tr->lock, NULL);
    fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", tr->f);
    *out = tr;
    return ST_OK;
}

/* Names come from our own code (task and tensor names): no quotes or
 * backslashes to escape, but be safe anyway. */
static void put_name(FILE *f, const char *s) {
    for (; *s; s++) fputc(*s == '"' || *s == '\\' ? '_' : *s, f);
}

static void event_prefix(trace *tr) {
    if (tr->events++) fputs(",\n", tr->f);
}

int trace_lane(trace *tr, const char *name) {
    if (!tr) return 0;
    pthread_mutex_lock(&tr->lock);
    int id = ++tr->lanes;
    event_prefix(tr);
    fprintf(tr->f, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"args\": {\"name\": \"", id);
    put_name(tr->f, name);
    fputs("\"}}", tr->f);
    event_prefix(tr);
    fprintf(tr->f, "{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"args\": {\"sort_index\": %d}}",
            id, id);
    pthread_mutex_unlock(&tr->lock);
    return id;
}

void trace_span(trace *tr, int lane, const char *name, double start, double end) {
    if (!tr) return;
    pthread_mutex_lock(&tr->lock);
    event_prefix(tr);
    fputs("{\"name\": \"", tr->f);
    put_name(tr->f, name);
    fprintf(tr->f, "\", \"ph\": \"X\", \"pid\": 1, \"tid\": %d, \"ts\": %.1f, \"dur\": %.1f}", lane,
            (start - tr->t0) * 1e6, (end - start) * 1e6);
    if (ferror(tr->f) && !tr->failed) tr->failed = 1, tr->fail_errno = errno;
    pthread_mutex_unlock(&tr->lock);
}

st_status trace_close(trace *tr, st_error *err) {
    if (!tr) return ST_OK;
    fputs("\n]}\n", tr->f);
    int bad = tr->failed || ferror(tr->f);
    int e = tr->fail_errno ? tr->fail_errno : errno;
    if (fclose(tr->f) != 0) bad = 1;
    st_status s = bad ? st_fail_errno(err, e ? e : EIO, "%s: writing the trace failed", tr->path) : ST_OK;
    pthread_mutex_destroy(&tr->lock);
    free(tr);
    return s;
}
