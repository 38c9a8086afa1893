/* checkpoint.c - a run's training state in a store (see strata/checkpoint.h). */
#include "strata/checkpoint.h"
#include "strata/comm.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_KINDS 3
static const store_kind state_kinds[N_KINDS] = {STORE_MASTER, STORE_ADAM_M, STORE_ADAM_V};

static int kind_slot(store_kind k) {
    for (int i = 0; i < N_KINDS; i++)
        if (state_kinds[i] == k) return i;
    return -1;
}

/* One state tensor: its store, key and the unit elements it holds. */
typedef struct piece {
    int store;
    int32_t index;
    size_t lo, hi;
} piece;

struct ckpt_reader {
    store **st;                  /* [n_stores] the stores read (not owned) */
    int n_stores;
    int n_units;
    piece *pieces[N_KINDS];      /* all units' pieces of a kind, by unit, then store, then index */
    int *first[N_KINDS];         /* [n_units + 1]: unit u's pieces are [first[u], first[u+1]) */
    float *stage[N_KINDS];       /* the last piece read of each kind */
    int staged[N_KINDS];         /* its position in pieces[], or -1 */
};

static int by_unit_index(const void *a, const void *b) {
    const store_tensor_info *x = a, *y = b;
    if (x->key.block != y->key.block) return x->key.block < y->key.block ? -1 : 1;
    return (x->key.index > y->key.index) - (x->key.index < y->key.index);
}

uint64_t ckpt_reader_bytes(store *st) {
    uint64_t largest = 0;
    for (int i = 0; i < store_tensor_count(st); i++) {
        store_tensor_info info;
        if (store_tensor_info_at(st, i, &info, NULL) == ST_OK && kind_slot(info.key.kind) >= 0 &&
            info.padded_bytes > largest)
            largest = info.padded_bytes;
    }
    return N_KINDS * largest;
}

void ckpt_reader_free(ckpt_reader *r) {
    if (!r) return;
    for (int k = 0; k < N_KINDS; k++) {
        free(r->pieces[k]);
        free(r->first[k]);
        st_free_aligned(r->stage[k]);
    }
    free(r->st);
    free(r);
}

/* A store's tensors of one kind, sorted by unit and index, into infos[*n]
 * (room for every tensor of the store). */
static st_status kind_tensors(store *st, store_kind kind, store_tensor_info *infos, int *n, st_error *err) {
    *n = 0;
    for (int i = 0; i < store_tensor_count(st); i++) {
        st_status s = store_tensor_info_at(st, i, &infos[*n], err);
        if (s != ST_OK) return s;
        if (infos[*n].key.kind == kind) (*n)++;
    }
    qsort(infos, (size_t)*n, sizeof *infos, by_unit_index);
    return ST_OK;
}

/* Indexes stores[s], which holds the shards of rank first_rank + s of
 * `ranks` (one store of one process: 1, 0). */
static st_status reader_open(ckpt_reader **out, store *const *stores, int n_stores, const gpt_config *c, int ranks,
                             int first_rank, st_error *err) {
    *out = NULL;
    if (n_stores < 1 || ranks < 1 || first_rank < 0 || first_rank + n_stores > ranks)
        return st_fail(err, ST_EINVAL, "stores of ranks %d..%d of %d", first_rank, first_rank + n_stores - 1, ranks);
    const int L1 = gpt_num_units(c);
    ckpt_reader *r = calloc(1, sizeof *r);
    store_tensor_info **infos = calloc((size_t)n_stores, sizeof *infos);
    int *count = calloc((size_t)n_stores, sizeof *count), *at = calloc((size_t)n_stores, sizeof *at);
    int total = 0;
    uint64_t stage_bytes = 0;
    st_status s = r && infos && count && at && (r->st = malloc(sizeof *r->st * (size_t)n_stores)) ? ST_OK
                : st_fail(err, ST_ENOMEM, "out of memory");
    for (int i = 0; s == ST_OK && i < n_stores; i++) {
        r->st[i] = stores[i];
        const int n = store_tensor_count(stores[i]);
        total += n;
        if (!(infos[i] = calloc((size_t)n + 1, sizeof **infos))) s = st_fail(err, ST_ENOMEM, "out of memory");
        const uint64_t b = ckpt_reader_bytes(stores[i]) / N_KINDS;
        if (b > stage_bytes) stage_bytes = b;
    }
    if (s == ST_OK) r->n_stores = n_stores, r->n_units = L1;
    for (int k = 0; k < N_KINDS && s == ST_OK; k++) {
        for (int i = 0; i < n_stores && s == ST_OK; i++) {
            s = kind_tensors(stores[i], state_kinds[k], infos[i], &count[i], err);
            at[i] = 0;
        }
        if (s != ST_OK) break;
        r->pieces[k] = malloc(sizeof(piece) * ((size_t)total + 1));
        r->first[k] = calloc((size_t)L1 + 1, sizeof(int));
        r->stage[k] = stage_bytes ? st_alloc_io(stage_bytes) : NULL;
        r->staged[k] = -1;
        if (!r->pieces[k] || !r->first[k] || (stage_bytes && !r->stage[k])) {
            s = st_fail(err, ST_ENOMEM, "out of memory for reading the committed state");
            break;
        }
        int np = 0;
        for (int u = 0; u < L1 && s == ST_OK; u++) {
            r->first[k][u] = np;
            for (int i = 0; i < n_stores && s == ST_OK; i++) {   /* the ranks' shards, in rank order */
                const int rank = first_rank + i;
                size_t pos, shard_hi;   /* the rank's shard of the unit: [pos, shard_hi) */
                comm_shard_range(gpt_unit_numel(c, u), ranks, rank, &pos, &shard_hi);
                const store_tensor_info *in = infos[i];
                for (; at[i] < count[i] && in[at[i]].key.block == u; at[i]++) {
                    const store_tensor_info *t = &in[at[i]];
                    if (t->bytes % 4) {
                        char name[64];
                        s = st_fail(err, ST_ECORRUPT, "state tensor %s holds %llu bytes, not whole floats",
                                    store_key_name(t->key, name, sizeof name), (unsigned long long)t->bytes);
                        break;
                    }
                    r->pieces[k][np++] = (piece){i, t->key.index, pos, pos + t->bytes / 4};
                    pos += t->bytes / 4;
                }
                if (s == ST_OK && ranks == 1 && u == 0 && !c->tied &&
                    pos == gpt_unit_numel(c, 0) + gpt_unit_numel(c, gpt_head_unit(c)))
                    s = st_fail(err, ST_EUNSUPPORTED,
                                "the store keeps the untied head in unit 0, as Strata did before the head had a unit "
                                "of its own (2026-11-26); export its weights with that version (strata export) and "
                                "train on from them with --init");
                else if (s == ST_OK && pos != shard_hi && ranks > 1)
                    s = st_fail(err, ST_ECORRUPT,
                                "the store's %s tensors of unit %d end at element %zu, rank %d of %d's shard of the "
                                "model's unit at %zu (a store of another model or rank, or without committed state)",
                                store_kind_name(state_kinds[k]), u, pos, rank, ranks, shard_hi);
                else if (s == ST_OK && pos != shard_hi)
                    s = st_fail(err, ST_ECORRUPT,
                                "the store's %s tensors of unit %d hold %zu elements, the model's unit has %zu (a "
                                "store of another model, or one without committed training state)",
                                store_kind_name(state_kinds[k]), u, pos, gpt_unit_numel(c, u));
            }
        }
        r->first[k][L1] = np;
        for (int i = 0; i < n_stores && s == ST_OK; i++)
            if (at[i] != count[i])
                s = st_fail(err, ST_ECORRUPT, "the store holds %s tensors of unit %d, past the model's %d units",
                            store_kind_name(state_kinds[k]), infos[i][at[i]].key.block, L1);
    }
    for (int i = 0; infos && i < n_stores; i++) free(infos[i]);
    free(infos);
    free(count);
    free(at);
    if (s != ST_OK) {
        ckpt_reader_free(r);
        return s;
    }
    *out = r;
    return ST_OK;
}

st_status ckpt_reader_open(ckpt_reader **out, store *st, const gpt_config *c, st_error *err) {
    return reader_open(out, &st, 1, c, 1, 0, err);
}

st_status ckpt_reader_open_rank(ckpt_reader **out, store *st, const gpt_config *c, int ranks, int rank,
                                st_error *err) {
    return reader_open(out, &st, 1, c, ranks, rank, err);
}

st_status ckpt_reader_open_ranks(ckpt_reader **out, store *const *stores, int ranks, const gpt_config *c,
                                 st_error *err) {
    return reader_open(out, stores, ranks, c, ranks, 0, err);
}

st_status ckpt_read_range(ckpt_reader *r, store_kind kind, int u, size_t lo, size_t hi, float *out, st_error *err) {
    const int k = kind_slot(kind);
    if (k < 0 || u < 0 || u >= r->n_units)
        return st_fail(err, ST_EINVAL, "no committed state of kind %s for unit %d", store_kind_name(kind), u);
    size_t done = lo;   /* out[0] is element lo; [lo, done) is copied */
    for (int i = r->first[k][u]; i < r->first[k][u + 1] && done < hi; i++) {
        const piece *p = &r->pieces[k][i];
        if (p->hi <= done || p->lo >= hi) continue;
        if (r->staged[k] != i) {
            r->staged[k] = -1;
            st_status s = store_read(r->st[p->store], (store_key){kind, u, p->index}, r->stage[k],
                                     store_padded_bytes((p->hi - p->lo) * 4), err);
            if (s != ST_OK) return s;
            r->staged[k] = i;
        }
        const size_t b = hi < p->hi ? hi : p->hi;
        memcpy(out + (done - lo), r->stage[k] + (done - p->lo), (b - done) * sizeof(float));
        done = b;
    }
    if (done < hi) return st_fail(err, ST_EINVAL, "unit %d has no elements [%zu, %zu)", u, done, hi);
    return ST_OK;
}

st_status ckpt_unit_numel(const ckpt_reader *r, int u, size_t *n, st_error *err) {
    if (u < 0 || u >= r->n_units) return st_fail(err, ST_EINVAL, "unit %d out of range [0, %d)", u, r->n_units);
    *n = r->pieces[0][r->first[0][u + 1] - 1].hi;
    return ST_OK;
}

st_status ckpt_write_unit(store *st, int u, const float *master, const float *m, const float *v, size_t n,
                          size_t seg, void *stage, st_error *err) {
    const float *src[N_KINDS] = {master, m, v};
    for (size_t j = 0, lo = 0; lo < n; j++, lo += seg) {
        const size_t len = n - lo < seg ? n - lo : seg;
        for (int k = 0; k < N_KINDS; k++) {
            store_key key = {state_kinds[k], u, (int32_t)j};
            st_status s;
            if (store_has_tensor(st, key)) {
                store_tensor_info info;
                if ((s = store_tensor_info_of(st, key, &info, err)) != ST_OK) return s;
                if (info.bytes != len * 4) {
                    char name[64];
                    return st_fail(err, ST_EINVAL, "store tensor %s holds %llu bytes, this run writes %zu there "
                                                   "(the store holds another layout of the state)",
                                   store_key_name(key, name, sizeof name), (unsigned long long)info.bytes, len * 4);
                }
            } else if ((s = store_create_tensor(st, key, len * 4, STORE_TIER_SSD, 0, err)) != ST_OK) {
                return s;
            }
            memcpy(stage, src[k] + lo, len * 4);
            if ((s = store_write(st, key, stage, store_padded_bytes(len * 4), err)) != ST_OK) return s;
        }
    }
    return ST_OK;
}

int ckpt_record_format(const ckpt_record *r, char *buf, size_t cap) {
    const gpt_config *m = &r->model;
    /* Llama's own fields, after GPT-2's (whose records stay as they were) */
    char llama[320] = "";
    if (m->arch == GPT_ARCH_LLAMA) {
        const gpt_rope_scaling *rs = &m->rope_scaling;
        snprintf(llama, sizeof llama,
                 ", \"arch\": \"llama\", \"n_kv_head\": %d, \"d_ff\": %d, \"tied\": %d, \"norm_eps\": %.9g, "
                 "\"rope_theta\": %.9g, \"rope_scaling\": [%.9g, %.9g, %.9g, %d]",
                 m->n_kv_head, m->d_ff, m->tied, (double)m->norm_eps, (double)m->rope_theta, (double)rs->factor,
                 (double)rs->low_freq_factor, (double)rs->high_freq_factor, rs->original_context);
    }
    /* The fingerprint is a string: a JSON number holds only 53 bits exactly. */
    /* a rank's share of a run of several ranks (one process's records stay as they were), then the
       segment the state is cut into (0: left out, as records were before it was kept) */
    char tail[96] = "";
    int at = 0;
    if (r->ranks > 1) at = snprintf(tail, sizeof tail, ", \"ranks\": %d, \"rank\": %d", r->ranks, r->rank);
    if (r->segment) snprintf(tail + at, sizeof tail - (size_t)at, ", \"segment\": %zu", r->segment);
    int n = snprintf(buf, cap,
                     "{\"step\": %ld, \"n_layer\": %d, \"n_head\": %d, \"d_model\": %d, \"n_ctx\": %d, \"vocab\": %d%s, "
                     "\"data_pos\": %llu, \"data_epoch\": %llu, \"data_tokens\": %llu, \"vocab_fingerprint\": \"%016llx\"%s}",
                     r->step, m->n_layer, m->n_head, m->d_model, m->n_ctx, m->vocab_size, llama,
                     (unsigned long long)r->data_pos, (unsigned long long)r->data_epoch,
                     (unsigned long long)r->data_tokens, (unsigned long long)r->vocab_fingerprint, tail);
    return n >= 0 && (size_t)n < cap ? n : -1;
}

/* A finite number field (floats of the model), or an integer one. */
static int record_number(const cJSON *j, const char *key, double *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble)) return 0;
    *out = it->valuedouble;
    return 1;
}

/* Llama's fields of a record into m (GPT-2's record has none). */
static st_status parse_llama(const cJSON *j, gpt_config *m, st_error *err) {
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(j, "arch");
    if (!arch) return ST_OK;
    const char *a = cJSON_GetStringValue(arch);
    if (!a || gpt_arch_parse(a, &m->arch, NULL) != ST_OK)
        return st_fail(err, ST_ECORRUPT, "the store's commit record: field arch is not gpt2 or llama");
    if (m->arch != GPT_ARCH_LLAMA) return ST_OK;
    static const char *const keys[] = {"n_kv_head", "d_ff", "tied", "norm_eps", "rope_theta"};
    double v[5];
    for (int k = 0; k < 5; k++)
        if (!record_number(j, keys[k], &v[k]) || (k < 3 && (v[k] != floor(v[k]) || v[k] < 0 || v[k] > INT_MAX)))
            return st_fail(err, ST_ECORRUPT, "the store's commit record: field %s missing or out of range", keys[k]);
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(j, "rope_scaling");
    double r[4];
    for (int k = 0; k < 4; k++) {
        const cJSON *it = cJSON_IsArray(rs) && cJSON_GetArraySize(rs) == 4 ? cJSON_GetArrayItem(rs, k) : NULL;
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || fabs(it->valuedouble) > INT_MAX ||
            (k == 3 && it->valuedouble != floor(it->valuedouble)))
            return st_fail(err, ST_ECORRUPT, "the store's commit record: field rope_scaling is not 4 numbers");
        r[k] = it->valuedouble;
    }
    m->n_kv_head = (int)v[0], m->d_ff = (int)v[1], m->tied = (int)v[2];
    m->norm_eps = (float)v[3], m->rope_theta = (float)v[4];
    m->rope_scaling = (gpt_rope_scaling){(float)r[0], (float)r[1], (float)r[2], (int)r[3]};
    return ST_OK;
}

st_status ckpt_record_parse(const void *text, size_t n, ckpt_record *out, st_error *err) {
    if (!text || n == 0) return st_fail(err, ST_ENOENT, "the store holds no commit of a training step yet");
    cJSON *j = cJSON_ParseWithLength(text, n);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return st_fail(err, ST_ECORRUPT, "the store's commit record is not a JSON object");
    }
    static const char *const keys[] = {"step", "n_layer", "n_head", "d_model", "n_ctx", "vocab",
                                       "data_pos", "data_epoch", "data_tokens"};
    double v[9] = {0};
    for (int k = 0; k < 9; k++) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, keys[k]);
        const double most = k < 6 ? (double)INT_MAX : 9007199254740992.0;   /* 2^53: exact in a double */
        if (!it && k >= 6) continue;   /* a commit from before the data position was recorded */
        if (!cJSON_IsNumber(it) || !(it->valuedouble >= 0) || it->valuedouble > most ||
            it->valuedouble != floor(it->valuedouble)) {
            cJSON_Delete(j);
            return st_fail(err, ST_ECORRUPT, "the store's commit record: field %s missing or out of range", keys[k]);
        }
        v[k] = it->valuedouble;
    }
    /* absent in commits from before it was recorded: unknown */
    uint64_t fingerprint = 0;
    const cJSON *fp = cJSON_GetObjectItemCaseSensitive(j, "vocab_fingerprint");
    if (fp) {
        const char *t = cJSON_GetStringValue(fp);
        if (!t || !st_parse_hex64(t, &fingerprint)) {
            cJSON_Delete(j);
            return st_fail(err, ST_ECORRUPT, "the store's commit record: field vocab_fingerprint is not 16 hex digits");
        }
    }
    /* a rank's share of a run of several ranks; absent: one process */
    double ranks = 1, rank = 0;
    const int has_ranks = cJSON_GetObjectItemCaseSensitive(j, "ranks") != NULL;
    if (has_ranks && (!record_number(j, "ranks", &ranks) || !record_number(j, "rank", &rank) || ranks < 2 ||
                      ranks > 1 << 20 || ranks != floor(ranks) || rank < 0 || rank >= ranks || rank != floor(rank))) {
        cJSON_Delete(j);
        return st_fail(err, ST_ECORRUPT, "the store's commit record: fields ranks and rank out of range");
    }
    /* absent in commits from before it was recorded: the segment they were all cut into */
    double segment = (double)CKPT_SEGMENT_UNRECORDED;
    if (cJSON_GetObjectItemCaseSensitive(j, "segment") &&
        (!record_number(j, "segment", &segment) || segment < 1 || segment > (double)(1u << 31) ||
         segment != floor(segment) || fmod(segment, 2048) != 0)) {
        cJSON_Delete(j);
        return st_fail(err, ST_ECORRUPT, "the store's commit record: field segment is not a multiple of 2048 up to 2^31");
    }
    *out = (ckpt_record){.step = (long)v[0],
                         .model = {.n_layer = (int)v[1], .n_head = (int)v[2], .d_model = (int)v[3],
                                   .n_ctx = (int)v[4], .vocab_size = (int)v[5]},
                         .data_pos = (uint64_t)v[6], .data_epoch = (uint64_t)v[7], .data_tokens = (uint64_t)v[8],
                         .vocab_fingerprint = fingerprint, .ranks = (int)ranks, .rank = (int)rank,
                         .segment = (size_t)segment};
    st_status s = parse_llama(j, &out->model, err);
    cJSON_Delete(j);
    if (s != ST_OK) return s;
    st_error e = {0};
    if (gpt_config_check(&out->model, &e) != ST_OK)
        return st_fail(err, ST_ECORRUPT, "the store's commit record: %s", e.msg);
    return ST_OK;
}
