/* hw.c - hardware descriptions (strata/hw.h): the JSON file, read with
 * every field checked and named in the error, and written back so that it
 * reads the same again. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strata/fs.h"
#include "strata/hw.h"

const char *hw_backend_name(hw_backend b) { return b == HW_BACKEND_GPU ? "gpu" : "cpu"; }

void hw_ssd_use_store_rates(hw_ssd *d, double read_gbps, double write_gbps) {
    if (!(read_gbps > 0 && write_gbps > 0 && d->read_gbps > 0 && d->write_gbps > 0)) return;
    d->mixed_read_gbps *= read_gbps / d->read_gbps;
    d->mixed_write_gbps *= write_gbps / d->write_gbps;
    d->bench_read_gbps = d->read_gbps;
    d->bench_write_gbps = d->write_gbps;
    d->read_gbps = read_gbps;
    d->write_gbps = write_gbps;
}

/* Interpolated in log(rows) between the table's points, flat beyond them. */
static double rate_at(const hw_rate_at *t, int n, double rows) {
    if (rows <= t[0].rows) return t[0].gflops;
    for (int i = 1; i < n; i++)
        if (rows <= t[i].rows) {
            const double x = log(rows / t[i - 1].rows) / log(t[i].rows / t[i - 1].rows);
            return t[i - 1].gflops + x * (t[i].gflops - t[i - 1].gflops);
        }
    return t[n - 1].gflops;
}

double hw_matmul_gflops_at(const hw_desc *hw, double rows) {
    return hw->n_matmul_rows > 0 ? rate_at(hw->matmul_by_rows, hw->n_matmul_rows, rows) : hw->matmul_gflops;
}

double hw_head_gflops_at(const hw_desc *hw, double rows) {
    if (hw->n_head_rows > 0) return rate_at(hw->head_by_rows, hw->n_head_rows, rows);
    return hw->head_matmul_gflops > 0 ? hw->head_matmul_gflops : hw->matmul_gflops;
}

double hw_adamw_rate(const hw_desc *hw) { return hw->adamw_params_per_s * (hw->adamw_threads > 0 ? hw->adamw_threads : 1); }

int hw_ranks(const hw_desc *hw) {
    if (hw->backend != HW_BACKEND_CPU) return 1;
    return (hw->nodes > 1 ? hw->nodes : 1) * (hw->ranks_per_node > 1 ? hw->ranks_per_node : 1);
}

void hw_rank_share(const hw_desc *hw, int ranks_per_node, hw_desc *out) {
    *out = *hw;
    if (ranks_per_node <= 1) return;
    const double r = ranks_per_node;
    out->matmul_gflops /= r;
    out->head_matmul_gflops /= r;
    out->attention_gflops /= r;
    out->other_gbps /= r;
    out->widen_gbps /= r;
    for (int i = 0; i < out->n_matmul_rows; i++) out->matmul_by_rows[i].gflops /= r;
    for (int i = 0; i < out->n_head_rows; i++) out->head_by_rows[i].gflops /= r;
    for (int p = 0; p < out->n_ssd; p++) {
        hw_ssd *d = &out->ssd[p];
        /* an absent mixed rate is half of each alone: made explicit before the division */
        if (!(d->mixed_read_gbps > 0)) d->mixed_read_gbps = d->read_gbps / 2;
        if (!(d->mixed_write_gbps > 0)) d->mixed_write_gbps = d->write_gbps / 2;
        d->read_gbps /= r, d->write_gbps /= r, d->mixed_read_gbps /= r, d->mixed_write_gbps /= r;
    }
    const double threads = r * (hw->adamw_threads > 0 ? hw->adamw_threads : 1);
    if (threads > hw->cores) out->adamw_params_per_s *= hw->cores / threads;
    out->host_bytes = hw->host_bytes / (uint64_t)ranks_per_node;
    out->device_bytes = hw->device_bytes / (uint64_t)ranks_per_node;
    if (out->host_bytes == 0) out->host_bytes = 1;
    if (out->device_bytes == 0) out->device_bytes = 1;
}

/* ---- checks on the values ---------------------------------------------------------- */

/* "name: field: problem" */
static st_status bad(st_error *err, const char *name, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static st_status bad(st_error *err, const char *name, const char *field, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return st_fail(err, ST_EINVAL, "%s: %s: %s", name, field, msg);
}

#define POSITIVE(v, field) \
    if (!((v) > 0) || !isfinite(v)) return bad(err, name, field, "must be > 0")
#define NONNEG(v, field) \
    if (!((v) >= 0) || !isfinite(v)) return bad(err, name, field, "must be >= 0")

st_status hw_check(const hw_desc *hw, const char *name, st_error *err) {
    if (!name) name = "hw";
    if (!hw->name[0]) return bad(err, name, "name", "must not be empty");
    if (hw->backend != HW_BACKEND_CPU && hw->backend != HW_BACKEND_GPU)
        return bad(err, name, "compute.backend", "must be \"cpu\" or \"gpu\"");
    POSITIVE(hw->matmul_gflops, "compute.matmul_gflops");
    NONNEG(hw->head_matmul_gflops, "compute.head_matmul_gflops");
    NONNEG(hw->attention_gflops, "compute.attention_gflops");
    POSITIVE(hw->other_gbps, "compute.other_gbps");
    NONNEG(hw->widen_gbps, "compute.widen_gbps");
    if (hw->cores < 1) return bad(err, name, "compute.cores", "must be >= 1");
    NONNEG(hw->task_overhead_s, "compute.task_overhead_s");
    NONNEG(hw->io_cpu_s_per_gb, "compute.io_cpu_s_per_gb");
    NONNEG(hw->block_factor, "compute.block_factor");
    for (int k = 0; k < 2; k++) {
        const int n = k ? hw->n_head_rows : hw->n_matmul_rows;
        const hw_rate_at *t = k ? hw->head_by_rows : hw->matmul_by_rows;
        const char *table = k ? "compute.head_by_rows" : "compute.matmul_by_rows";
        if (n < 0 || n > HW_MAX_ROWS) return bad(err, name, table, "at most %d entries", HW_MAX_ROWS);
        for (int i = 0; i < n; i++) {
            char f[64];
            snprintf(f, sizeof f, "%s[%d].rows", table, i);
            if (!(t[i].rows >= 1) || !isfinite(t[i].rows)) return bad(err, name, f, "must be >= 1");
            if (i > 0 && !(t[i].rows > t[i - 1].rows)) return bad(err, name, f, "must be more than the entry before");
            snprintf(f, sizeof f, "%s[%d].gflops", table, i);
            POSITIVE(t[i].gflops, f);
        }
    }
    NONNEG(hw->host_device_gbps, "host_device_gbps");
    if (hw->backend == HW_BACKEND_GPU && !(hw->host_device_gbps > 0))
        return bad(err, name, "host_device_gbps", "must be > 0 with a gpu backend");
    if (hw->backend == HW_BACKEND_CPU && hw->host_device_gbps != 0)
        return bad(err, name, "host_device_gbps", "must be 0 with a cpu backend (device memory is host memory)");
    if (hw->n_ssd < 0 || hw->n_ssd > HW_MAX_SSD) return bad(err, name, "ssd", "at most %d paths", HW_MAX_SSD);
    for (int i = 0; i < hw->n_ssd; i++) {
        char f[64];
        const hw_ssd *d = &hw->ssd[i];
        snprintf(f, sizeof f, "ssd[%d].read_gbps", i);
        POSITIVE(d->read_gbps, f);
        snprintf(f, sizeof f, "ssd[%d].write_gbps", i);
        POSITIVE(d->write_gbps, f);
        snprintf(f, sizeof f, "ssd[%d].mixed_read_gbps", i);
        NONNEG(d->mixed_read_gbps, f);
        snprintf(f, sizeof f, "ssd[%d].mixed_write_gbps", i);
        NONNEG(d->mixed_write_gbps, f);
        snprintf(f, sizeof f, "ssd[%d].bench_read_gbps", i);
        NONNEG(d->bench_read_gbps, f);
        snprintf(f, sizeof f, "ssd[%d].bench_write_gbps", i);
        NONNEG(d->bench_write_gbps, f);
    }
    POSITIVE(hw->adamw_params_per_s, "optimizer.adamw_params_per_s_per_thread");
    if (hw->adamw_threads < 1) return bad(err, name, "optimizer.threads", "must be >= 1");
    if (!(hw->compute_slowdown >= 1) || !isfinite(hw->compute_slowdown))
        return bad(err, name, "contention.compute_slowdown", "must be >= 1");
    if (!(hw->optimizer_slowdown >= 1) || !isfinite(hw->optimizer_slowdown))
        return bad(err, name, "contention.optimizer_slowdown", "must be >= 1");
    if (!(hw->compute_beside_io == 0 || hw->compute_beside_io >= 1) || !isfinite(hw->compute_beside_io))
        return bad(err, name, "contention.compute_beside_io", "must be >= 1");
    if (!(hw->io_beside_compute == 0 || hw->io_beside_compute >= 1) || !isfinite(hw->io_beside_compute))
        return bad(err, name, "contention.io_beside_compute", "must be >= 1");
    if (hw->device_bytes == 0) return bad(err, name, "memory.device_bytes", "must be > 0");
    if (hw->host_bytes == 0) return bad(err, name, "memory.host_bytes", "must be > 0");
    if (hw->devices_per_node < 1) return bad(err, name, "node.devices", "must be >= 1");
    NONNEG(hw->interconnect_gbps, "node.interconnect_gbps");
    if (hw->devices_per_node > 1 && !(hw->interconnect_gbps > 0))
        return bad(err, name, "node.interconnect_gbps", "must be > 0 with more than one device");
    /* 0 (a description built in code without them) counts as 1 */
    if (hw->nodes < 0) return bad(err, name, "cluster.nodes", "must be >= 1");
    if (hw->ranks_per_node < 0) return bad(err, name, "cluster.ranks_per_node", "must be >= 1");
    if ((long)hw->nodes * hw->ranks_per_node > 1000000)
        return bad(err, name, "cluster.nodes", "nodes x ranks_per_node must be at most 1000000");
    NONNEG(hw->shm_gbps, "cluster.shm_gbps");
    NONNEG(hw->shm_latency_s, "cluster.shm_latency_s");
    NONNEG(hw->network_gbps, "cluster.network_gbps");
    NONNEG(hw->network_latency_s, "cluster.network_latency_s");
    if (hw->ranks_per_node > 1 && !(hw->shm_gbps > 0))
        return bad(err, name, "cluster.shm_gbps", "must be > 0 with more than one rank per node");
    if (hw->nodes > 1 && !(hw->network_gbps > 0))
        return bad(err, name, "cluster.network_gbps", "must be > 0 with more than one node");
    if (hw->backend == HW_BACKEND_GPU && (hw->nodes > 1 || hw->ranks_per_node > 1))
        return bad(err, name, "cluster", "ranks are modelled on a cpu backend; a gpu node's data parallelism is "
                   "node.devices");
    const hw_probe_record *p = &hw->probe;
    if (p->B < 0) return bad(err, name, "probe.micro_batch", "must be >= 0");
    if (p->T < 0) return bad(err, name, "probe.seq", "must be >= 0");
    NONNEG(p->block_forward_s, "probe.block_forward_s");
    NONNEG(p->block_backward_s, "probe.block_backward_s");
    NONNEG(p->head_s, "probe.head_s");
    NONNEG(p->adamw_alone_s, "probe.adamw_alone_s");
    NONNEG(p->adamw_beside_compute_s, "probe.adamw_beside_compute_s");
    NONNEG(p->compute_beside_adamw, "probe.compute_beside_adamw");
    NONNEG(p->ranks_allgather_gbps, "probe.ranks_allgather_gbps");
    NONNEG(p->ranks_reduce_scatter_gbps, "probe.ranks_reduce_scatter_gbps");
    NONNEG(p->checksum_gbps, "probe.checksum_gbps");
    NONNEG(p->io_kernel_s_per_gb, "probe.io_kernel_s_per_gb");
    if (p->trial_layers < 0) return bad(err, name, "probe.trial_layers", "must be >= 0");
    NONNEG(p->trial_work_s, "probe.trial_work_s");
    NONNEG(p->trial_predicted_work_s, "probe.trial_predicted_work_s");
    NONNEG(p->trial_ssd_step_s, "probe.trial_ssd_step_s");
    NONNEG(p->trial_ssd_work_s, "probe.trial_ssd_work_s");
    if (p->trial_long_layers < 0) return bad(err, name, "probe.trial_long_layers", "must be >= 0");
    NONNEG(p->trial_long_work_s, "probe.trial_long_work_s");
    return ST_OK;
}

/* ---- reading ------------------------------------------------------------------------ */

typedef struct reader {
    const char *name;   /* the file, for messages */
    st_error *err;
    st_status s;        /* the first failure; later calls do nothing */
} reader;

static void rfail(reader *r, const char *field, const char *what) {
    if (r->s == ST_OK) r->s = bad(r->err, r->name, field, "%s", what);
}

static void join(char *out, size_t n, const char *prefix, const char *key) {
    if (prefix[0]) snprintf(out, n, "%s.%s", prefix, key);
    else snprintf(out, n, "%s", key);
}

/* A member name from the input, fit for a one-line message: control bytes
 * become '?', and a long one is cut. */
static void clean_key(char *out, size_t n, const char *key) {
    size_t i = 0;
    for (; key && key[i] && i + 4 < n && i < 40; i++) out[i] = (unsigned char)key[i] < 0x20 || key[i] == 0x7f ? '?' : key[i];
    if (key && key[i]) out[i++] = '.', out[i++] = '.', out[i++] = '.';
    out[i] = 0;
}

/* Every member of obj must be one of keys, and appear once. */
static void known_fields(reader *r, const cJSON *obj, const char *prefix, const char *const *keys) {
    for (const cJSON *it = obj->child; it && r->s == ST_OK; it = it->next) {
        char f[160], key[48];
        clean_key(key, sizeof key, it->string ? it->string : "?");
        join(f, sizeof f, prefix, key);
        int found = 0;
        for (int k = 0; keys[k]; k++) found |= it->string && !strcmp(it->string, keys[k]);
        if (!found) rfail(r, f, "unknown field");
        for (const cJSON *o = obj->child; o != it && r->s == ST_OK; o = o->next)
            if (o->string && it->string && !strcmp(o->string, it->string)) rfail(r, f, "given twice");
    }
}

static const cJSON *member(reader *r, const cJSON *obj, const char *prefix, const char *key, int required) {
    if (r->s != ST_OK) return NULL;
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it && required) {
        char f[160];
        join(f, sizeof f, prefix, key);
        r->s = st_fail(r->err, ST_EINVAL, "%s: missing field %s", r->name, f);
    }
    return it;
}

/* A number member; absent optional ones leave *out alone. */
static void num(reader *r, const cJSON *obj, const char *prefix, const char *key, int required, double *out) {
    const cJSON *it = member(r, obj, prefix, key, required);
    if (!it) return;
    char f[160];
    join(f, sizeof f, prefix, key);
    if (!cJSON_IsNumber(it)) { rfail(r, f, "must be a number"); return; }
    if (!isfinite(it->valuedouble)) { rfail(r, f, "must be a finite number"); return; }
    *out = it->valuedouble == 0 ? 0.0 : it->valuedouble;   /* -0 is 0: the same description */
}

static void integer(reader *r, const cJSON *obj, const char *prefix, const char *key, int required, int *out) {
    double v = *out;
    num(r, obj, prefix, key, required, &v);
    if (r->s != ST_OK) return;
    char f[160];
    join(f, sizeof f, prefix, key);
    if (v != floor(v) || v < -1e9 || v > 1e9) { rfail(r, f, "must be a whole number"); return; }
    *out = (int)v;
}

static void bytes(reader *r, const cJSON *obj, const char *prefix, const char *key, int required, uint64_t *out) {
    double v = (double)*out;
    num(r, obj, prefix, key, required, &v);
    if (r->s != ST_OK) return;
    char f[160];
    join(f, sizeof f, prefix, key);
    if (!(v > 0)) { rfail(r, f, "must be > 0"); return; }
    if (v != floor(v) || v >= 9.2e18) { rfail(r, f, "must be a whole number of bytes below 2^63"); return; }
    *out = (uint64_t)v;
}

static void string(reader *r, const cJSON *obj, const char *prefix, const char *key, int required, char *out,
                   size_t cap) {
    const cJSON *it = member(r, obj, prefix, key, required);
    if (!it) return;
    char f[160];
    join(f, sizeof f, prefix, key);
    if (!cJSON_IsString(it) || !it->valuestring) { rfail(r, f, "must be a string"); return; }
    if (strlen(it->valuestring) >= cap) {
        char msg[64];
        snprintf(msg, sizeof msg, "longer than %zu characters", cap - 1);
        { rfail(r, f, msg); return; }
    }
    snprintf(out, cap, "%s", it->valuestring);
}

static const cJSON *object(reader *r, const cJSON *obj, const char *prefix, const char *key, int required,
                           const char *const *keys) {
    const cJSON *it = member(r, obj, prefix, key, required);
    if (!it) return NULL;
    char f[160];
    join(f, sizeof f, prefix, key);
    if (!cJSON_IsObject(it)) {
        rfail(r, f, "must be an object");
        return NULL;
    }
    known_fields(r, it, f, keys);
    return r->s == ST_OK ? it : NULL;
}

/* compute.<key>: [{"rows": R, "gflops": G}, ...], optional. */
static void rate_table(reader *r, const cJSON *compute, const char *key, hw_rate_at *out, int *n) {
    const cJSON *a = member(r, compute, "compute", key, 0);
    if (!a) return;
    char f[64];
    snprintf(f, sizeof f, "compute.%s", key);
    if (!cJSON_IsArray(a)) {
        rfail(r, f, "must be an array");
        return;
    }
    static const char *const keys[] = {"rows", "gflops", NULL};
    int i = 0;
    for (const cJSON *it = a->child; it && r->s == ST_OK; it = it->next, i++) {
        char e[80];
        snprintf(e, sizeof e, "compute.%s[%d]", key, i);
        if (i == HW_MAX_ROWS) {
            rfail(r, f, "at most 8 entries");
            return;
        }
        if (!cJSON_IsObject(it)) {
            rfail(r, e, "must be an object");
            return;
        }
        known_fields(r, it, e, keys);
        num(r, it, e, "rows", 1, &out[i].rows);
        num(r, it, e, "gflops", 1, &out[i].gflops);
        *n = i + 1;
    }
}

/* Line and column of byte offset `at` in text, for a parse error. */
static void position(const char *text, size_t len, size_t at, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < at && i < len; i++) {
        if (text[i] == '\n') (*line)++, *col = 1;
        else (*col)++;
    }
}

st_status hw_parse_json(const char *text, size_t len, const char *name, hw_desc *out, st_error *err) {
    if (!name) name = "hw";
    memset(out, 0, sizeof *out);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        int line, col;
        position(text, len, at, &line, &col);
        return st_fail(err, ST_EINVAL, "%s: malformed JSON at line %d, column %d (byte %zu)", name, line, col, at);
    }
    /* only blanks may follow the document */
    for (const char *p = end; p && p < text + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(root);
            int line, col;
            position(text, len, (size_t)(p - text), &line, &col);
            return st_fail(err, ST_EINVAL, "%s: malformed JSON at line %d, column %d (byte %zu): text after the end",
                           name, line, col, (size_t)(p - text));
        }
    reader r = {.name = name, .err = err, .s = ST_OK};
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return st_fail(err, ST_EINVAL, "%s: must be a JSON object", name);
    }
    hw_desc hw;
    memset(&hw, 0, sizeof hw);
    hw.adamw_threads = 1;
    hw.compute_slowdown = hw.optimizer_slowdown = 1.0;
    hw.devices_per_node = 1;
    hw.nodes = hw.ranks_per_node = 1;
    static const char *const top[] = {"name", "compute", "host_device_gbps", "ssd", "optimizer", "contention",
                                      "memory", "node", "cluster", "probe", "note", NULL};
    known_fields(&r, root, "", top);
    string(&r, root, "", "name", 1, hw.name, sizeof hw.name);
    const cJSON *note = member(&r, root, "", "note", 0);
    if (note && !cJSON_IsString(note)) rfail(&r, "note", "must be a string");

    static const char *const compute_keys[] = {"backend", "matmul_gflops", "head_matmul_gflops", "attention_gflops",
                                               "other_gbps", "widen_gbps", "cores", "task_overhead_s", "io_cpu_s_per_gb",
                                               "block_factor", "matmul_by_rows", "head_by_rows", NULL};
    const cJSON *c = object(&r, root, "", "compute", 1, compute_keys);
    if (c) {
        char backend[8] = "cpu";
        string(&r, c, "compute", "backend", 0, backend, sizeof backend);
        if (r.s == ST_OK && strcmp(backend, "cpu") && strcmp(backend, "gpu"))
            rfail(&r, "compute.backend", "must be \"cpu\" or \"gpu\"");
        hw.backend = !strcmp(backend, "gpu") ? HW_BACKEND_GPU : HW_BACKEND_CPU;
        num(&r, c, "compute", "matmul_gflops", 1, &hw.matmul_gflops);
        num(&r, c, "compute", "head_matmul_gflops", 0, &hw.head_matmul_gflops);
        num(&r, c, "compute", "attention_gflops", 0, &hw.attention_gflops);
        num(&r, c, "compute", "other_gbps", 1, &hw.other_gbps);
        num(&r, c, "compute", "widen_gbps", 0, &hw.widen_gbps);
        integer(&r, c, "compute", "cores", 1, &hw.cores);
        num(&r, c, "compute", "task_overhead_s", 0, &hw.task_overhead_s);
        num(&r, c, "compute", "io_cpu_s_per_gb", 0, &hw.io_cpu_s_per_gb);
        num(&r, c, "compute", "block_factor", 0, &hw.block_factor);
        rate_table(&r, c, "matmul_by_rows", hw.matmul_by_rows, &hw.n_matmul_rows);
        rate_table(&r, c, "head_by_rows", hw.head_by_rows, &hw.n_head_rows);
    }
    num(&r, root, "", "host_device_gbps", 0, &hw.host_device_gbps);

    const cJSON *ssd = member(&r, root, "", "ssd", 1);
    if (ssd && !cJSON_IsArray(ssd)) rfail(&r, "ssd", "must be an array (of paths)");
    if (ssd && r.s == ST_OK) {
        static const char *const ssd_keys[] = {"path", "read_gbps", "write_gbps", "mixed_read_gbps",
                                               "mixed_write_gbps", "bench_read_gbps", "bench_write_gbps", NULL};
        int i = 0;
        for (const cJSON *it = ssd->child; it && r.s == ST_OK; it = it->next, i++) {
            char f[32];
            snprintf(f, sizeof f, "ssd[%d]", i);
            if (i == HW_MAX_SSD) {
                rfail(&r, "ssd", "at most 16 paths");
                break;
            }
            if (!cJSON_IsObject(it)) {
                rfail(&r, f, "must be an object");
                break;
            }
            known_fields(&r, it, f, ssd_keys);
            hw_ssd *d = &hw.ssd[i];
            string(&r, it, f, "path", 0, d->path, sizeof d->path);
            num(&r, it, f, "read_gbps", 1, &d->read_gbps);
            num(&r, it, f, "write_gbps", 1, &d->write_gbps);
            num(&r, it, f, "mixed_read_gbps", 0, &d->mixed_read_gbps);
            num(&r, it, f, "mixed_write_gbps", 0, &d->mixed_write_gbps);
            num(&r, it, f, "bench_read_gbps", 0, &d->bench_read_gbps);
            num(&r, it, f, "bench_write_gbps", 0, &d->bench_write_gbps);
            hw.n_ssd = i + 1;
        }
    }

    static const char *const opt_keys[] = {"adamw_params_per_s_per_thread", "threads", NULL};
    const cJSON *o = object(&r, root, "", "optimizer", 1, opt_keys);
    if (o) {
        num(&r, o, "optimizer", "adamw_params_per_s_per_thread", 1, &hw.adamw_params_per_s);
        integer(&r, o, "optimizer", "threads", 0, &hw.adamw_threads);
    }
    static const char *const cont_keys[] = {"compute_slowdown", "optimizer_slowdown", "compute_beside_io",
                                            "io_beside_compute", NULL};
    const cJSON *ct = object(&r, root, "", "contention", 0, cont_keys);
    if (ct) {
        num(&r, ct, "contention", "compute_slowdown", 0, &hw.compute_slowdown);
        num(&r, ct, "contention", "optimizer_slowdown", 0, &hw.optimizer_slowdown);
        num(&r, ct, "contention", "compute_beside_io", 0, &hw.compute_beside_io);
        num(&r, ct, "contention", "io_beside_compute", 0, &hw.io_beside_compute);
    }
    static const char *const mem_keys[] = {"device_bytes", "host_bytes", NULL};
    const cJSON *m = object(&r, root, "", "memory", 1, mem_keys);
    if (m) {
        bytes(&r, m, "memory", "device_bytes", 1, &hw.device_bytes);
        bytes(&r, m, "memory", "host_bytes", 1, &hw.host_bytes);
    }
    static const char *const node_keys[] = {"devices", "interconnect_gbps", NULL};
    const cJSON *nd = object(&r, root, "", "node", 0, node_keys);
    if (nd) {
        integer(&r, nd, "node", "devices", 0, &hw.devices_per_node);
        num(&r, nd, "node", "interconnect_gbps", 0, &hw.interconnect_gbps);
    }
    static const char *const cluster_keys[] = {"nodes", "ranks_per_node", "shm_gbps", "shm_latency_s",
                                               "network_gbps", "network_latency_s", NULL};
    const cJSON *cl = object(&r, root, "", "cluster", 0, cluster_keys);
    if (cl) {
        integer(&r, cl, "cluster", "nodes", 0, &hw.nodes);
        integer(&r, cl, "cluster", "ranks_per_node", 0, &hw.ranks_per_node);
        if (r.s == ST_OK && hw.nodes < 1) rfail(&r, "cluster.nodes", "must be >= 1");
        if (r.s == ST_OK && hw.ranks_per_node < 1) rfail(&r, "cluster.ranks_per_node", "must be >= 1");
        num(&r, cl, "cluster", "shm_gbps", 0, &hw.shm_gbps);
        num(&r, cl, "cluster", "shm_latency_s", 0, &hw.shm_latency_s);
        num(&r, cl, "cluster", "network_gbps", 0, &hw.network_gbps);
        num(&r, cl, "cluster", "network_latency_s", 0, &hw.network_latency_s);
    }
    static const char *const probe_keys[] = {"model", "micro_batch", "seq", "block_forward_s", "block_backward_s",
                                             "head_s", "adamw_alone_s", "adamw_beside_compute_s",
                                             "compute_beside_adamw",
                                             "ranks_allgather_gbps", "ranks_reduce_scatter_gbps", "checksum_gbps",
                                             "io_kernel_s_per_gb", "trial_layers", "trial_work_s",
                                             "trial_predicted_work_s", "trial_ssd_step_s", "trial_ssd_work_s",
                                             "trial_long_layers", "trial_long_work_s", "blas_kernels", NULL};
    const cJSON *pr = object(&r, root, "", "probe", 0, probe_keys);
    if (pr) {
        hw_probe_record *p = &hw.probe;
        string(&r, pr, "probe", "model", 0, p->model, sizeof p->model);
        integer(&r, pr, "probe", "micro_batch", 0, &p->B);
        integer(&r, pr, "probe", "seq", 0, &p->T);
        string(&r, pr, "probe", "blas_kernels", 0, p->blas_kernels, sizeof p->blas_kernels);
        num(&r, pr, "probe", "block_forward_s", 0, &p->block_forward_s);
        num(&r, pr, "probe", "block_backward_s", 0, &p->block_backward_s);
        num(&r, pr, "probe", "head_s", 0, &p->head_s);
        num(&r, pr, "probe", "adamw_alone_s", 0, &p->adamw_alone_s);
        num(&r, pr, "probe", "adamw_beside_compute_s", 0, &p->adamw_beside_compute_s);
        num(&r, pr, "probe", "compute_beside_adamw", 0, &p->compute_beside_adamw);
        num(&r, pr, "probe", "ranks_allgather_gbps", 0, &p->ranks_allgather_gbps);
        num(&r, pr, "probe", "ranks_reduce_scatter_gbps", 0, &p->ranks_reduce_scatter_gbps);
        num(&r, pr, "probe", "checksum_gbps", 0, &p->checksum_gbps);
        num(&r, pr, "probe", "io_kernel_s_per_gb", 0, &p->io_kernel_s_per_gb);
        integer(&r, pr, "probe", "trial_layers", 0, &p->trial_layers);
        num(&r, pr, "probe", "trial_work_s", 0, &p->trial_work_s);
        num(&r, pr, "probe", "trial_predicted_work_s", 0, &p->trial_predicted_work_s);
        num(&r, pr, "probe", "trial_ssd_step_s", 0, &p->trial_ssd_step_s);
        num(&r, pr, "probe", "trial_ssd_work_s", 0, &p->trial_ssd_work_s);
        integer(&r, pr, "probe", "trial_long_layers", 0, &p->trial_long_layers);
        num(&r, pr, "probe", "trial_long_work_s", 0, &p->trial_long_work_s);
    }
    cJSON_Delete(root);
    if (r.s != ST_OK) return r.s;
    st_status s = hw_check(&hw, name, err);
    if (s == ST_OK) *out = hw;
    return s;
}

st_status hw_load_json(const char *path, hw_desc *out, st_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return st_fail_errno(err, errno, "%s: cannot open the hardware description", path);
    enum { CAP = 1 << 20 };   /* a description is a few hundred bytes */
    char *buf = malloc(CAP);
    size_t n = buf ? fread(buf, 1, CAP, f) : 0;
    int too_big = buf && n == CAP;
    int failed = ferror(f);
    fclose(f);
    if (!buf) return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    st_status s;
    if (failed) s = st_fail(err, ST_EIO, "%s: read error", path);
    else if (too_big) s = st_fail(err, ST_EINVAL, "%s: larger than 1 MiB, not a hardware description", path);
    else s = hw_parse_json(buf, n, path, out, err);
    free(buf);
    return s;
}

/* ---- writing ------------------------------------------------------------------------ */

/* Numbers as the shortest text that reads back as the same double (cJSON's
 * own printing accepts a neighbouring double). */
static void add_num(cJSON *obj, const char *name, double v) {
    char buf[40] = "null";   /* not a number: refused when read back */
    for (int digits = 15; digits <= 17 && isfinite(v); digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) break;
    }
    cJSON_AddRawToObject(obj, name, buf);
}

char *hw_to_json(const hw_desc *hw) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "name", hw->name);
    cJSON *c = cJSON_AddObjectToObject(root, "compute");
    if (c) {
        cJSON_AddStringToObject(c, "backend", hw_backend_name(hw->backend));
        add_num(c, "matmul_gflops", hw->matmul_gflops);
        if (hw->head_matmul_gflops > 0) add_num(c, "head_matmul_gflops", hw->head_matmul_gflops);
        if (hw->attention_gflops > 0) add_num(c, "attention_gflops", hw->attention_gflops);
        add_num(c, "other_gbps", hw->other_gbps);
        if (hw->widen_gbps > 0) add_num(c, "widen_gbps", hw->widen_gbps);
        add_num(c, "cores", hw->cores);
        if (hw->task_overhead_s > 0) add_num(c, "task_overhead_s", hw->task_overhead_s);
        if (hw->io_cpu_s_per_gb > 0) add_num(c, "io_cpu_s_per_gb", hw->io_cpu_s_per_gb);
        if (hw->block_factor > 0) add_num(c, "block_factor", hw->block_factor);
        for (int k = 0; k < 2; k++) {
            const int n = k ? hw->n_head_rows : hw->n_matmul_rows;
            const hw_rate_at *t = k ? hw->head_by_rows : hw->matmul_by_rows;
            if (n <= 0) continue;
            cJSON *a = cJSON_AddArrayToObject(c, k ? "head_by_rows" : "matmul_by_rows");
            for (int i = 0; a && i < n; i++) {
                cJSON *e = cJSON_CreateObject();
                if (!e) continue;
                add_num(e, "rows", t[i].rows);
                add_num(e, "gflops", t[i].gflops);
                cJSON_AddItemToArray(a, e);
            }
        }
    }
    add_num(root, "host_device_gbps", hw->host_device_gbps);
    cJSON *ssd = cJSON_AddArrayToObject(root, "ssd");
    for (int i = 0; ssd && i < hw->n_ssd; i++) {
        cJSON *d = cJSON_CreateObject();
        if (!d) continue;
        if (hw->ssd[i].path[0]) cJSON_AddStringToObject(d, "path", hw->ssd[i].path);
        add_num(d, "read_gbps", hw->ssd[i].read_gbps);
        add_num(d, "write_gbps", hw->ssd[i].write_gbps);
        if (hw->ssd[i].mixed_read_gbps > 0) add_num(d, "mixed_read_gbps", hw->ssd[i].mixed_read_gbps);
        if (hw->ssd[i].mixed_write_gbps > 0) add_num(d, "mixed_write_gbps", hw->ssd[i].mixed_write_gbps);
        if (hw->ssd[i].bench_read_gbps > 0) add_num(d, "bench_read_gbps", hw->ssd[i].bench_read_gbps);
        if (hw->ssd[i].bench_write_gbps > 0) add_num(d, "bench_write_gbps", hw->ssd[i].bench_write_gbps);
        cJSON_AddItemToArray(ssd, d);
    }
    cJSON *o = cJSON_AddObjectToObject(root, "optimizer");
    if (o) {
        add_num(o, "adamw_params_per_s_per_thread", hw->adamw_params_per_s);
        add_num(o, "threads", hw->adamw_threads);
    }
    cJSON *ct = cJSON_AddObjectToObject(root, "contention");
    if (ct) {
        add_num(ct, "compute_slowdown", hw->compute_slowdown);
        add_num(ct, "optimizer_slowdown", hw->optimizer_slowdown);
        if (hw->compute_beside_io > 0) add_num(ct, "compute_beside_io", hw->compute_beside_io);
        if (hw->io_beside_compute > 0) add_num(ct, "io_beside_compute", hw->io_beside_compute);
    }
    cJSON *m = cJSON_AddObjectToObject(root, "memory");
    if (m) {
        add_num(m, "device_bytes", (double)hw->device_bytes);
        add_num(m, "host_bytes", (double)hw->host_bytes);
    }
    cJSON *nd = cJSON_AddObjectToObject(root, "node");
    if (nd) {
        add_num(nd, "devices", hw->devices_per_node);
        add_num(nd, "interconnect_gbps", hw->interconnect_gbps);
    }
    if (hw->nodes > 1 || hw->ranks_per_node > 1 || hw->shm_gbps > 0 || hw->shm_latency_s > 0 || hw->network_gbps > 0 ||
        hw->network_latency_s > 0) {   /* absent otherwise: a description without ranks reads and writes as before */
        cJSON *cl = cJSON_AddObjectToObject(root, "cluster");
        if (cl) {
            add_num(cl, "nodes", hw->nodes > 1 ? hw->nodes : 1);
            add_num(cl, "ranks_per_node", hw->ranks_per_node > 1 ? hw->ranks_per_node : 1);
            add_num(cl, "shm_gbps", hw->shm_gbps);
            add_num(cl, "shm_latency_s", hw->shm_latency_s);
            add_num(cl, "network_gbps", hw->network_gbps);
            add_num(cl, "network_latency_s", hw->network_latency_s);
        }
    }
    const hw_probe_record *p = &hw->probe;
    if (p->model[0] || p->blas_kernels[0] || p->B || p->T || p->block_forward_s > 0 || p->block_backward_s > 0 ||
        p->head_s > 0 || p->adamw_alone_s > 0 || p->adamw_beside_compute_s > 0 || p->ranks_allgather_gbps > 0 ||
        p->ranks_reduce_scatter_gbps > 0 || p->checksum_gbps > 0 || p->io_kernel_s_per_gb > 0 ||
        p->compute_beside_adamw > 0 || p->trial_layers > 0 || p->trial_work_s > 0 || p->trial_predicted_work_s > 0 ||
        p->trial_ssd_step_s > 0 || p->trial_ssd_work_s > 0 || p->trial_long_layers > 0 || p->trial_long_work_s > 0) {
        cJSON *pr = cJSON_AddObjectToObject(root, "probe");
        if (pr) {
            cJSON_AddStringToObject(pr, "model", p->model);
            add_num(pr, "micro_batch", p->B);
            add_num(pr, "seq", p->T);
            if (p->blas_kernels[0]) cJSON_AddStringToObject(pr, "blas_kernels", p->blas_kernels);
            add_num(pr, "block_forward_s", p->block_forward_s);
            add_num(pr, "block_backward_s", p->block_backward_s);
            add_num(pr, "head_s", p->head_s);
            add_num(pr, "adamw_alone_s", p->adamw_alone_s);
            add_num(pr, "adamw_beside_compute_s", p->adamw_beside_compute_s);
            if (p->compute_beside_adamw > 0) add_num(pr, "compute_beside_adamw", p->compute_beside_adamw);
            if (p->ranks_allgather_gbps > 0) add_num(pr, "ranks_allgather_gbps", p->ranks_allgather_gbps);
            if (p->ranks_reduce_scatter_gbps > 0) add_num(pr, "ranks_reduce_scatter_gbps", p->ranks_reduce_scatter_gbps);
            if (p->checksum_gbps > 0) add_num(pr, "checksum_gbps", p->checksum_gbps);
            if (p->io_kernel_s_per_gb > 0) add_num(pr, "io_kernel_s_per_gb", p->io_kernel_s_per_gb);
            if (p->trial_layers > 0) add_num(pr, "trial_layers", p->trial_layers);
            if (p->trial_work_s > 0) add_num(pr, "trial_work_s", p->trial_work_s);
            if (p->trial_predicted_work_s > 0) add_num(pr, "trial_predicted_work_s", p->trial_predicted_work_s);
            if (p->trial_ssd_step_s > 0) add_num(pr, "trial_ssd_step_s", p->trial_ssd_step_s);
            if (p->trial_ssd_work_s > 0) add_num(pr, "trial_ssd_work_s", p->trial_ssd_work_s);
            if (p->trial_long_layers > 0) add_num(pr, "trial_long_layers", p->trial_long_layers);
            if (p->trial_long_work_s > 0) add_num(pr, "trial_long_work_s", p->trial_long_work_s);
        }
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}

st_status hw_save_json(const char *path, const hw_desc *hw, st_error *err) {
    st_status s = hw_check(hw, path, err);
    if (s != ST_OK) return s;
    char *text = hw_to_json(hw);
    if (!text) return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    st_atomic_file out;
    FILE *f;
    if ((s = st_atomic_open_stream(&out, path, &f, err)) == ST_OK) {
        fputs(text, f);
        fputc('\n', f);
        s = st_atomic_commit(&out, err);   /* a failed write shows in the stream's error flag */
    }
    free(text);
    return s;
}
