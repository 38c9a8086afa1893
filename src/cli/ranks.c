/* ranks.c - `strata train` on several ranks (ranks.h). */
#include <stdlib.h>
#include <string.h>

#include "cli/ranks.h"

st_status ranks_agree(comm *c, st_status mine, int *peer_failed, st_error *err) {
    *peer_failed = 0;
    const int n = comm_size(c);
    if (n < 2) return mine;
    int32_t status = (int32_t)mine, *all = malloc(sizeof(int32_t) * (size_t)n);
    if (!all) return mine != ST_OK ? mine : st_fail(err, ST_ENOMEM, "out of memory");
    st_error e = {0};
    st_status s = comm_allgather(c, &status, sizeof status, all, &e);
    int failed = -1;
    for (int r = 0; s == ST_OK && r < n && failed < 0; r++)
        if (all[r] != ST_OK) failed = r;
    free(all);
    if (mine != ST_OK) return mine;
    if (s != ST_OK) return *err = e, s;
    if (failed < 0) return ST_OK;
    *peer_failed = 1;
    return st_fail(err, ST_EIO, "rank %d failed", failed);
}

st_status ranks_step_flags(comm *c, int stop, int commit, int *stop_out, int *commit_out, st_error *err) {
    *stop_out = stop, *commit_out = commit;
    if (comm_size(c) < 2) return ST_OK;
    double v[2] = {stop ? 1.0 : 0.0, comm_rank(c) == 0 && commit ? 1.0 : 0.0};
    st_status s = comm_allreduce_sum_f64(c, v, 2, err);
    *stop_out = v[0] > 0, *commit_out = v[1] > 0;
    return s;
}

/* Rank 0 names the next unit to gather (-1: done). */
static st_status name_unit(comm *c, int32_t *u, st_error *err) { return comm_bcast(c, u, sizeof *u, 0, err); }

st_status ranks_read_unit(void *source, int u, float *out, st_error *err) {
    ranks_unit_source *src = source;
    int32_t named = u;
    st_status s = comm_size(src->c) > 1 ? name_unit(src->c, &named, err) : ST_OK;
    return s == ST_OK ? src->read_unit(src->ctx, u, out, err) : s;
}

st_status ranks_reads_done(comm *c, st_error *err) {
    int32_t done = -1;
    return comm_size(c) > 1 ? name_unit(c, &done, err) : ST_OK;
}

st_status ranks_follow_reads(comm *c, gpt_unit_reader read_unit, void *ctx, float *buf, st_error *err) {
    for (;;) {
        int32_t u;
        st_status s = name_unit(c, &u, err);
        if (s != ST_OK || u < 0) return s;
        if ((s = read_unit(ctx, u, buf, err)) != ST_OK) return s;
    }
}
