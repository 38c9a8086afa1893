/* offload_env.c - what the executor's parts share (offload_internal.h):
 * store transfers timed for the stats and traced. */
#include <stdio.h>
#include <string.h>

#include "schedule/offload_internal.h"

void env_trace_ssd(exec_env *e, const char *what, store_key k, double t0, double t1) {
    if (!e->tr) return;
    char name[96], kb[48];
    snprintf(name, sizeof name, "%s %s", what, store_key_name(k, kb, sizeof kb));
    for (int p = 0; p < e->n_paths; p++) trace_span(e->tr, e->lane_ssd0 + p, name, t0, t1);
}

void env_comm_done(exec_env *e, const char *what, int u, double t0) {
    const double t1 = st_now();
    e->comm_s += t1 - t0;
    if (!e->tr) return;
    char name[64];
    snprintf(name, sizeof name, "%s u%d", what, u);
    trace_span(e->tr, e->lane_comm, name, t0, t1);
}

st_status env_store_io(exec_env *e, int write, store_key k, void *buf, uint64_t bytes, st_error *err) {
    double t0 = st_now();
    st_status s = write ? store_write(e->st, k, buf, bytes, err) : store_read(e->st, k, buf, bytes, err);
    double t1 = st_now();
    e->io_wait_s += t1 - t0;
    env_trace_ssd(e, write ? "write" : "read", k, t0, t1);
    return s;
}

st_status env_compute_wait(exec_env *e, store_op *op, const char *what, st_error *err) {
    double t0 = st_now();
    st_status s = store_op_wait(op, err);
    double t1 = st_now();
    e->io_wait_s += t1 - t0;
    if (e->tr && t1 - t0 > 1e-4) trace_span(e->tr, e->lane_compute, what, t0, t1);
    return s;
}

st_status env_compute_wait_all(exec_env *e, store_op *ops, int *n, const char *what, st_error *err) {
    st_status s = ST_OK;
    for (int i = 0; i < *n; i++) {
        s = first_error(s, env_compute_wait(e, &ops[i], what, s == ST_OK ? err : NULL));
    }
    *n = 0;
    return s;
}

void env_drain(store_op *ops, int *n) {
    for (int i = 0; i < *n; i++) store_op_wait(&ops[i], NULL);
    *n = 0;
}

st_status env_wait_each(exec_env *e, exec_transfers *x, int n, const char *what, st_error *err) {
    st_status s = ST_OK;
    for (int i = 0; i < n; i++) s = first_error(s, env_compute_wait_all(e, x[i].op, &x[i].n, what, s == ST_OK ? err : NULL));
    return s;
}

void env_drain_each(exec_transfers *x, int n) {
    for (int i = 0; i < n; i++) env_drain(x[i].op, &x[i].n);
}

int env_path_io(const exec_env *e, io_path_counters out[STORE_MAX_PATHS]) {
    memset(out, 0, sizeof(io_path_counters) * STORE_MAX_PATHS);
    if (!e->st) return 0;
    store_counters c;
    store_get_counters(e->st, &c);
    memcpy(out, c.io, sizeof c.io);
    return c.n_paths;
}

void env_traffic(const exec_env *e, uint64_t out[2][STORE_KIND_COUNT]) {
    memset(out, 0, sizeof(uint64_t) * 2 * STORE_KIND_COUNT);
    if (!e->st) return;
    store_counters c;
    store_get_counters(e->st, &c);
    for (int k = 0; k < STORE_KIND_COUNT; k++)
        for (int p = 0; p < STORE_MAX_PATHS; p++) {
            out[0][k] += c.bytes_read[k][p];
            out[1][k] += c.bytes_written[k][p];
        }
}
