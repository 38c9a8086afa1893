/* offload_acts.c - activation checkpoints (offload_internal.h): each
 * act[u][m] in memory, or, for the checkpoint indices on the SSD, in a few
 * buffers whose contents are saved to the store behind compute and read
 * back ahead of their use. */
#include "schedule/offload_internal.h"

static float **slot(const act_pool *ap, int u, int m) { return &ap->slot[(size_t)(u - 1) * ap->M + m]; }

float *acts_at(const act_pool *ap, int u, int m) { return *slot(ap, u, m); }

static store_key act_key(int u, int m) { return (store_key){STORE_ACTIVATIONS, u, m}; }

static uint64_t act_bytes(const act_pool *ap) { return layout_act_bytes(ap->env->lay); }

static st_status wait_write(act_pool *ap, int i, st_error *err) {
    return env_wait_each(ap->env, &ap->wr[i], 1, "wait for checkpoint save", err);
}

/* A read of act[u][m] may start once its save is on the SSD. */
static st_status wait_saved(act_pool *ap, int u, int m, st_error *err) {
    for (int i = 0; i < LAYOUT_ACT_BUFFERS; i++)
        if (ap->wr[i].n && ap->wr[i].unit == u && ap->wr[i].mb == m) return wait_write(ap, i, err);
    return ST_OK;
}

static int buf_index(const act_pool *ap, const float *buf) {
    for (int i = 0; i < LAYOUT_ACT_BUFFERS; i++)
        if (ap->buf[i] && ap->buf[i] == buf) return i;
    return -1;
}

st_status acts_make(act_pool *ap, int u, int m, float **out, st_error *err) {
    float **s = slot(ap, u, m);
    if (!layout_on_ssd(ap->env->lay, PLACE_ACTS, u) || *s) {
        *out = *s;
        return ST_OK;
    }
    if (ap->n_free == 0)
        return st_fail(err, ST_ENOMEM, "activation buffers exhausted at act[%d][%d] (a schedule bug)", u, m);
    int i = ap->free_list[--ap->n_free];
    st_status st = wait_write(ap, i, err);   /* its previous contents may still be going out */
    if (st != ST_OK) return st;
    *s = *out = ap->buf[i];
    return ST_OK;
}

void acts_drop(act_pool *ap, int u, int m) {
    float **s = slot(ap, u, m);
    if (!layout_on_ssd(ap->env->lay, PLACE_ACTS, u) || !*s) return;
    int i = buf_index(ap, *s);
    if (i >= 0) ap->free_list[ap->n_free++] = i;
    *s = NULL;
}

st_status acts_save(act_pool *ap, int u, int m, st_error *err) {
    int i = buf_index(ap, *slot(ap, u, m));
    if (i < 0) return st_fail(err, ST_EINVAL, "act[%d][%d] is not in a checkpoint buffer (a schedule bug)", u, m);
    st_status s = wait_saved(ap, u, m, err);   /* an older save of it, from another buffer */
    if (s == ST_OK) s = wait_write(ap, i, err);
    if (s != ST_OK) return s;
    double t0 = st_now();
    s = store_write_async(ap->env->st, act_key(u, m), ap->buf[i], act_bytes(ap), &ap->wr[i].op[0], err);
    if (s != ST_OK) return s;
    ap->wr[i].n = 1, ap->wr[i].unit = u, ap->wr[i].mb = m;
    env_trace_ssd(ap->env, "start write", act_key(u, m), t0, st_now());
    return ST_OK;
}

/* If a read ahead into buf is in flight, waits for it and sets *ready. */
static st_status wait_read_ahead(act_pool *ap, float *buf, int *ready, st_error *err) {
    *ready = 0;
    int i = buf_index(ap, buf);
    if (i < 0 || !ap->rd[i].n) return ST_OK;
    st_status s = env_wait_each(ap->env, &ap->rd[i], 1, "wait for checkpoint", err);
    *ready = s == ST_OK;
    return s;
}

st_status acts_load(act_pool *ap, int u, int m, st_error *err) {
    float *out = NULL;
    int ready = 0;
    st_status s = acts_make(ap, u, m, &out, err);
    if (s != ST_OK || (s = wait_read_ahead(ap, out, &ready, err)) != ST_OK || ready) return s;
    if ((s = wait_saved(ap, u, m, err)) != ST_OK) return s;
    return env_store_io(ap->env, 0, act_key(u, m), out, act_bytes(ap), err);
}

st_status acts_read_ahead(act_pool *ap, int u, int m, st_error *err) {
    float **sl = slot(ap, u, m);
    if (ap->n_free == 0 || *sl) return ST_OK;
    st_status s = wait_saved(ap, u, m, err);
    if (s != ST_OK) return s;
    int i = ap->free_list[--ap->n_free];
    if ((s = wait_write(ap, i, err)) != ST_OK) {
        ap->free_list[ap->n_free++] = i;
        return s;
    }
    *sl = ap->buf[i];
    s = store_read_async(ap->env->st, act_key(u, m), *sl, act_bytes(ap), &ap->rd[i].op[0], err);
    if (s == ST_OK) ap->rd[i].n = 1;
    else ap->free_list[ap->n_free++] = i, *sl = NULL;
    return s;
}
