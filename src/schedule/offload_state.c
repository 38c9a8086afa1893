/* offload_state.c - the training state kept in memory, and the executor's
 * starting state (offload_internal.h): a fresh initialization, the caller's
 * weights, or a commit (strata/checkpoint.h), written unit by unit into
 * memory and the store, so that no full copy of the model is needed; and
 * the commit of what memory holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/checkpoint.h"
#include "strata/fs.h"
#include "schedule/offload_internal.h"

static const store_kind optim_kinds[3] = {STORE_MASTER, STORE_ADAM_M, STORE_ADAM_V};

float *host_state_of(const host_state *h, int k) { return k == 0 ? h->master : k == 1 ? h->m : h->v; }

/* Where the starting state comes from: a fresh initialization (the unit's
 * fp32 weights, moments at zero) or a commit, which may be this store's
 * own (in_place: its tensors already are the state). */
typedef struct state_source {
    const float *unit;
    ckpt_reader *ckpt;
    int in_place;
} state_source;

/* Elements [lo, hi) of unit u's master weights (k = 0) or moments (1, 2). */
static st_status source_read(const state_source *src, int k, int u, size_t lo, size_t hi, float *out, st_error *err) {
    if (src->ckpt) return ckpt_read_range(src->ckpt, optim_kinds[k], u, lo, hi, out, err);
    if (k == 0) memcpy(out, src->unit + lo, (hi - lo) * sizeof(float));
    else memset(out, 0, (hi - lo) * sizeof(float));
    return ST_OK;
}

/* A persistent tensor of this size: created, or found (a reopened store). */
static st_status ensure_tensor(store *st, store_key k, uint64_t bytes, st_error *err) {
    if (!store_has_tensor(st, k)) return store_create_tensor(st, k, bytes, STORE_TIER_SSD, 0, err);
    store_tensor_info info;
    st_status s = store_tensor_info_of(st, k, &info, err);
    if (s == ST_OK && info.bytes != bytes) {
        char name[64];
        s = st_fail(err, ST_EINVAL,
                    "the store's %s holds %llu bytes where this run keeps %llu: the store holds its state in another "
                    "layout (another schedule, alpha, clipping or precision)",
                    store_key_name(k, name, sizeof name), (unsigned long long)info.bytes, (unsigned long long)bytes);
    }
    return s;
}

/* Unit u's starting state, segment by segment: host copies filled, store
 * tensors created (or checked, in place) and written; compute weights are
 * rebuilt from the master weights wherever they live. The optimizer's
 * first slot is the staging (nothing runs on the worker yet). */
static st_status init_unit(offload_trainer *t, int u, const state_source *src, st_error *err) {
    const run_layout *l = &t->lay;
    host_state *hs = &t->hs;
    store *st = t->env.st;
    const size_t wsz = l->weight_size;
    const int optim_mem = !layout_on_ssd(l, PLACE_OPTIM, u), weights_ssd = layout_on_ssd(l, PLACE_WEIGHTS, u);
    st_status s = ST_OK;
    for (int part = 0; part < 2 && s == ST_OK; part++) {
        size_t plo, phi;
        layout_part_range(l, u, part, &plo, &phi);
        if (plo < phi && layout_on_ssd(l, PLACE_GRADS, u))
            s = store_create_tensor(st, (store_key){STORE_GRADS, u, part}, (phi - plo) * 4, STORE_TIER_SSD,
                                    STORE_VOLATILE, err);
        for (size_t j = 0; j < l->units[u].segs[part] && s == ST_OK; j++) {
            size_t lo, hi;
            layout_segment_range(l, u, part, j, &lo, &hi);
            const size_t len = hi - lo, at = layout_host_index(l, u, lo);   /* in the rank's state arrays */
            float *state[3];
            for (int k = 0; k < 3; k++) state[k] = optim_mem ? host_state_of(hs, k) + at : t->opt.slot[0].buf[k];
            /* in place on the SSD only the master weights are read: for the compute weights */
            const int n_read = optim_mem || !src->in_place ? 3 : 1;
            for (int k = 0; k < n_read && s == ST_OK; k++) s = source_read(src, k, u, lo, hi, state[k], err);
            for (int k = 0; !optim_mem && k < 3 && s == ST_OK; k++) {
                store_key sk = layout_segment_key(optim_kinds[k], u, part, j);
                s = ensure_tensor(st, sk, len * 4, err);
                if (s == ST_OK && !src->in_place)
                    s = env_store_io(&t->env, 1, sk, state[k], store_padded_bytes(len * 4), err);
            }
            if (s != ST_OK) break;
            if (!weights_ssd && hs->w16) gpt_f32_to_bf16(state[0], hs->w16 + at, len);
            if (!weights_ssd && hs->w32 && hs->w32 != hs->master) memcpy(hs->w32 + at, state[0], len * sizeof(float));
            if (weights_ssd) {
                store_key sk = layout_segment_key(STORE_WEIGHTS, u, part, j);
                unsigned char *w = t->opt.slot[0].wout;
                if (wsz == 2) gpt_f32_to_bf16(state[0], (st_bf16 *)w, len);
                else memcpy(w, state[0], len * 4);
                if ((s = ensure_tensor(st, sk, len * wsz, err)) == ST_OK)
                    s = env_store_io(&t->env, 1, sk, w, store_padded_bytes(len * wsz), err);
            }
        }
    }
    return s;
}

/* Visits every state tensor of this run's layout: kind optim_kinds[k] of
 * elements [lo, hi) of unit u, in layout order. */
typedef st_status (*state_tensor_fn)(offload_trainer *t, store_key key, int u, int k, size_t lo, size_t hi,
                                     st_error *err);
static st_status each_state_tensor(offload_trainer *t, state_tensor_fn fn, st_error *err) {
    const run_layout *l = &t->lay;
    for (int u = 0; u < l->n_units; u++)
        for (int part = 0; part < 2; part++)
            for (size_t j = 0; j < l->units[u].segs[part]; j++) {
                size_t lo, hi;
                layout_segment_range(l, u, part, j, &lo, &hi);
                for (int k = 0; k < 3; k++) {
                    st_status s = fn(t, layout_segment_key(optim_kinds[k], u, part, j), u, k, lo, hi, err);
                    if (s != ST_OK) return s;
                }
            }
    return ST_OK;
}

/* Resuming in place: the store's state tensors must be exactly this run's
 * layout (the reader accepts any; the commits to come write this one). */
static st_status check_in_place(offload_trainer *t, store_key key, int u, int k, size_t lo, size_t hi,
                                st_error *err) {
    (void)u, (void)k;
    store_tensor_info info;
    if (store_has_tensor(t->env.st, key) && store_tensor_info_of(t->env.st, key, &info, NULL) == ST_OK &&
        info.bytes == (hi - lo) * 4)
        return ST_OK;
    char name[64];
    return st_fail(err, ST_EINVAL,
                   "the store in %s holds the run's state in another layout (at %s): it was written with another "
                   "schedule, alpha or clipping; resume with the run's settings, or give a new --store to copy the "
                   "state there",
                   t->cfg.store_paths[0], store_key_name(key, name, sizeof name));
}

/* Compute weights the store keeps from an earlier placement of units this
 * one holds in memory: removed at the next commit. */
static st_status drop_stale_weights(offload_trainer *t, st_error *err) {
    store *st = t->env.st;
    for (int i = store_tensor_count(st) - 1; i >= 0; i--) {
        store_tensor_info info;
        st_status s = store_tensor_info_at(st, i, &info, err);
        if (s == ST_OK && info.key.kind == STORE_WEIGHTS &&
            (info.key.block < 0 || info.key.block >= t->L1 || !layout_on_ssd(&t->lay, PLACE_WEIGHTS, info.key.block)))
            s = store_delete_tensor(st, info.key, err);
        if (s != ST_OK) return s;
    }
    return ST_OK;
}

static st_status init_store_activations(offload_trainer *t, st_error *err) {
    st_status s;
    for (int u = 1; u <= t->n_acts; u++)
        for (int m = 0; layout_on_ssd(&t->lay, PLACE_ACTS, u) && m < t->M; m++)
            if ((s = store_create_tensor(t->env.st, (store_key){STORE_ACTIVATIONS, u, m}, t->NC * 4, STORE_TIER_SSD,
                                         STORE_VOLATILE, err)))
                return s;
    return store_commit(t->env.st, err);
}

/* The commit resumed from is another number of ranks' (resharded). */
static int resharding(const offload_trainer *t) {
    const int old = t->cfg.resume_ranks > 1 ? t->cfg.resume_ranks : 1;
    return t->cfg.n_resume_paths > 0 && old != t->lay.ranks;
}

/* Resharding: the stores of every rank that made the commit, read only
 * (*from[*n_from]); none may be where this rank keeps its state. */
static st_status open_old_ranks(offload_trainer *t, store ***from, int *n_from, st_error *err) {
    const offload_config *cfg = &t->cfg;
    const int old = cfg->resume_ranks > 1 ? cfg->resume_ranks : 1;
    store_dirs given;
    char list[sizeof given.list] = "";
    st_status s = ST_OK;
    for (int i = 0; i < cfg->n_resume_paths && s == ST_OK; i++) {   /* the run's spelling, to derive each rank's */
        const size_t len = strlen(list);
        if (len + strlen(cfg->resume_paths[i]) + 2 > sizeof list) s = st_fail(err, ST_EINVAL, "resume directories too long");
        else snprintf(list + len, sizeof list - len, "%s%s", i ? "," : "", cfg->resume_paths[i]);
    }
    if (s == ST_OK) s = store_dirs_parse(list, &given, err);
    if (s == ST_OK && !(*from = calloc((size_t)old, sizeof **from))) s = st_fail(err, ST_ENOMEM, "out of memory");
    for (int r = 0; s == ST_OK && r < old; r++) {
        store_dirs d;
        if ((s = store_dirs_of_rank(&given, r, old, &d, err)) != ST_OK) break;
        if (st_same_paths(d.paths, d.n, cfg->store_paths, cfg->n_store_paths))
            return st_fail(err, ST_EINVAL,
                           "the commit's %d rank%s kept the state in %s, where this rank would keep its own: "
                           "resuming on %d rank%s moves it, so give other store directories",
                           old, old > 1 ? "s" : "", d.paths[0], t->lay.ranks, t->lay.ranks > 1 ? "s" : "");
        if ((s = store_open_read_only(&d, 0, &(*from)[r], err)) == ST_OK) (*n_from)++;
    }
    return s;
}

/* Opens the store: this run's (created, or reopened to resume in place),
 * and the ones resumed from when they are others (*from[*n_from], read
 * only: one, or every old rank's when resharding). */
static st_status open_stores(offload_trainer *t, int *in_place, store ***from, int *n_from, st_error *err) {
    const offload_config *cfg = &t->cfg;
    const int resume = cfg->n_resume_paths > 0;
    *from = NULL;
    *n_from = 0;
    *in_place = 0;
    if (cfg->n_store_paths < 1)
        return resume ? st_fail(err, ST_EINVAL, "resuming needs the store directories to keep the state in") : ST_OK;
    store_config sc = store_default_config();
    sc.paths = cfg->store_paths;
    sc.n_paths = cfg->n_store_paths;
    if (resharding(t)) {
        st_status s = open_old_ranks(t, from, n_from, err);
        if (s != ST_OK) return s;
    }
    *in_place = resume && !resharding(t) &&
                st_same_paths(cfg->store_paths, cfg->n_store_paths, cfg->resume_paths, cfg->n_resume_paths);
    sc.mode = *in_place ? STORE_OPEN_EXISTING : STORE_CREATE;
    sc.engine = cfg->engine;
    st_status s = store_open(&sc, &t->env.st, NULL, 0, err);
    if (s == ST_OK && resume && !*in_place && !resharding(t)) {
        store_config rc = store_default_config();
        rc.paths = cfg->resume_paths;
        rc.n_paths = cfg->n_resume_paths;
        rc.read_only = 1;
        if ((*from = calloc(1, sizeof **from)) == NULL) return st_fail(err, ST_ENOMEM, "out of memory");
        if ((s = store_open(&rc, &(*from)[0], NULL, 0, err)) == ST_OK) *n_from = 1;
    }
    return s;
}

/* The committed state's reader: this rank's shards of its own store (or
 * of one process's), or when resharding every old rank's stores, whose
 * shards this rank's take their elements from. */
static st_status open_commit(offload_trainer *t, store **from, int n_from, ckpt_reader **out, st_error *err) {
    const int old = t->cfg.resume_ranks > 1 ? t->cfg.resume_ranks : 1;
    if (!resharding(t)) return ckpt_reader_open_rank(out, n_from ? from[0] : t->env.st, &t->c, t->lay.ranks, t->lay.rank, err);
    return old > 1 ? ckpt_reader_open_ranks(out, from, n_from, &t->c, err) : ckpt_reader_open(out, from[0], &t->c, err);
}

st_status state_start(offload_trainer *t, const float *init, st_error *err) {
    const int resume = t->cfg.n_resume_paths > 0;
    const gpt_unit_reader read = t->cfg.init_read;
    /* the layout plans no buffer of its own where the widening buffer is host memory */
    const int own_unit = !init && !resume && t->lay.buf[BUF_INIT_UNIT].count > 0;
    float *unit_tmp = init || resume ? NULL : own_unit ? plan_alloc(t, BUF_INIT_UNIT) : t->wl.unit32;
    if (!init && !resume && !unit_tmp) return st_fail(err, ST_ENOMEM, "out of memory for initialization");
    state_source src = {0};
    store **from = NULL;
    int n_from = 0;
    st_status s = open_stores(t, &src.in_place, &from, &n_from, err);
    if (s == ST_OK && resume) s = open_commit(t, from, n_from, &src.ckpt, err);
    if (s == ST_OK && src.in_place) s = each_state_tensor(t, check_in_place, err);
    if (s == ST_OK && src.in_place) s = drop_stale_weights(t, err);
    for (int u = 0; s == ST_OK && u < t->L1; u++) {
        if (!resume) {
            src.unit = init ? init + t->lay.units[u].offset : unit_tmp;
            if (!init && read) s = read(t->cfg.init_ctx, u, unit_tmp, err);
            else if (!init) gpt_init_unit(&t->c, u, unit_tmp, t->cfg.train.seed);
            if (s != ST_OK) break;
        }
        s = init_unit(t, u, &src, err);
    }
    if (s == ST_OK && t->env.st) s = init_store_activations(t, err);
    ckpt_reader_free(src.ckpt);
    for (int i = 0; i < n_from; i++) store_close(from[i]);
    free(from);
    if (own_unit) st_free_aligned(unit_tmp);
    return s;
}

/* One state tensor of what memory holds, into the store through sbuf. */
static st_status write_host_tensor(offload_trainer *t, store_key key, int u, int k, size_t lo, size_t hi,
                                   st_error *err) {
    if (layout_on_ssd(&t->lay, PLACE_OPTIM, u)) return ST_OK;   /* the store's tensors are the state */
    st_status s = ensure_tensor(t->env.st, key, (hi - lo) * 4, err);
    memcpy(t->sbuf, host_state_of(&t->hs, k) + layout_host_index(&t->lay, u, lo), (hi - lo) * 4);
    return s == ST_OK ? env_store_io(&t->env, 1, key, t->sbuf, store_padded_bytes((hi - lo) * 4), err) : s;
}

st_status state_write_host(offload_trainer *t, st_error *err) { return each_state_tensor(t, write_host_tensor, err); }
