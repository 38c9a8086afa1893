/* cli.c - shared command-line helpers: error printing, the strict parsers of
 * flag values, and reading a store named on the command line. */
#include "cli/cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "strata/backend.h"
#include "strata/store.h"

int cli_error(const char *fmt, ...) {
    fflush(stdout);   /* after the lines it follows, when both go to one file */
    va_list ap;
    va_start(ap, fmt);
    fputs("strata: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int cli_fail(const st_error *err) {
    return cli_error("%s", err->msg[0] ? err->msg : st_status_name(err->status));
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "strata %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see 'strata %s --help')\n", cmd);
    va_end(ap);
    return 2;
}

st_status cli_parse_int(const char *flag, const char *s, long min, long max, long *out, st_error *err) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end)
        return st_fail(err, ST_EINVAL, "%s: '%s' is not an integer", flag, s);
    if (v < min || v > max) {   /* one form for every flag: "--steps 0: must be at least 1" */
        if (max >= INT_MAX) return st_fail(err, ST_EINVAL, "%s %ld: must be at least %ld", flag, v, min);
        return st_fail(err, ST_EINVAL, "%s %ld: must be in [%ld, %ld]", flag, v, min, max);
    }
    *out = v;
    return ST_OK;
}

st_status cli_parse_u64(const char *flag, const char *s, uint64_t *out, st_error *err) {
    char *end;
    errno = 0;
    /* strtoull skips blanks and wraps a minus sign around: " -1" is 2^64-1 */
    if (strchr(s, '-')) return st_fail(err, ST_EINVAL, "%s: '%s' must not be negative", flag, s);
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end)
        return st_fail(err, ST_EINVAL, "%s: '%s' is not a non-negative integer", flag, s);
    *out = v;
    return ST_OK;
}

st_status cli_parse_double(const char *flag, const char *s, double min, double max, double *out, st_error *err) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return st_fail(err, ST_EINVAL, "%s: '%s' is not a number", flag, s);
    if (v < min || v > max) {
        if (max >= 1e9) return st_fail(err, ST_EINVAL, "%s %g: must be at least %g", flag, v, min);
        return st_fail(err, ST_EINVAL, "%s %g: must be in [%g, %g]", flag, v, min, max);
    }
    *out = v;
    return ST_OK;
}

st_status cli_parse_size(const char *flag, const char *s, uint64_t *out, st_error *err) {
    char *end;
    errno = 0;
    if (*s == '-') return st_fail(err, ST_EINVAL, "%s: '%s' must not be negative", flag, s);
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0)
        return st_fail(err, ST_EINVAL, "%s: '%s' is not a size (examples: 4096, 1M, 2G)", flag, s);
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I')) end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end)
        return st_fail(err, ST_EINVAL, "%s: '%s' is not a size (examples: 4096, 1M, 2G)", flag, s);
    double bytes = v * mult;
    if (bytes > 9.2e18 || bytes != floor(bytes))
        return st_fail(err, ST_EINVAL, "%s: '%s' is not a whole number of bytes", flag, s);
    *out = (uint64_t)bytes;
    return ST_OK;
}

int cli_stdout_is_tty(void) { return isatty(STDOUT_FILENO); }

st_status cli_load_hw(const char *path, hw_desc *out, st_error *err) {
    st_status s = hw_load_json(path, out, err);
    if (s != ST_OK) return s;
    const char *now = cpu_blas_kernels(), *then = out->probe.blas_kernels;
    if (then[0] && now && strcasecmp(then, now) != 0)
        fprintf(stderr,
                "warning: %s was measured with OpenBLAS's %s kernels and this process runs its %s kernels: its "
                "compute rates, and the predictions made with them, may be far off; measure this machine again with "
                "'strata probe'\n",
                path, then, now);
    return ST_OK;
}

void cli_plan_progress_start(cli_plan_progress *p) {
    *p = (cli_plan_progress){.t0 = st_now(), .tty = isatty(STDERR_FILENO), .last_quarter = 0};
}

void cli_plan_progress_show(void *ctx, int done, int total) {
    cli_plan_progress *p = ctx;
    const double now = st_now(), el = now - p->t0;
    if (el < 1.0) return;
    if (p->tty) {
        if (done == total) {
            if (p->drawn) fputs("\r\033[K", stderr);
            return;
        }
        if (now - p->last_draw < 0.1) return;
        p->last_draw = now;
        p->drawn = 1;
        /* no time left: the candidates' costs differ, and the costlier (more micro-batches, longer
           lists) come later */
        fprintf(stderr, "\rplan: %d of %d candidates simulated, %.0f s\033[K", done, total, el);
        return;
    }
    const int quarter = (int)(4.0 * done / total);
    if (quarter <= p->last_quarter) return;
    p->last_quarter = quarter;
    fprintf(stderr, "plan: %d of %d candidates simulated in %.1f s\n", done, total, el);
}

st_status cli_parse_schedule(const char *s, sched_kind *out, st_error *err) {
    if (!strcmp(s, "vertical")) *out = SCHED_VERTICAL;
    else if (!strcmp(s, "horizontal")) *out = SCHED_HORIZONTAL;
    else return st_fail(err, ST_EINVAL, "--schedule must be vertical or horizontal, not '%s'", s);
    return ST_OK;
}

st_status cli_parse_offload(const char *s, int allow_auto, placement *out, int *is_auto, st_error *err) {
    memset(out, 0, sizeof *out);
    *is_auto = 0;
    const char *choices = allow_auto ? "weights, optim, acts, grads, none or auto" : "weights, optim, acts, grads or none";
    if (!strcmp(s, "none")) return ST_OK;
    if (allow_auto && !strcmp(s, "auto")) {
        *is_auto = 1;
        return ST_OK;
    }
    char list[256];
    if (strlen(s) >= sizeof list) return st_fail(err, ST_EINVAL, "--offload: '%.40s...' is too long", s);
    snprintf(list, sizeof list, "%s", s);
    static const char *names[PLACE_KINDS] = {"weights", "optim", "acts", "grads"};
    int any = 0, given[PLACE_KINDS] = {0};
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        double share = 1;
        if (eq) {   /* KIND=SHARE: the share of its parts on the SSD */
            *eq = '\0';
            char *end;
            errno = 0;
            share = strtod(eq + 1, &end);
            if (eq[1] == '\0' || *end || errno || !(share >= 0 && share <= 1))
                return st_fail(err, ST_EINVAL, "--offload %s=%s: the share on the SSD must be a number from 0 to 1",
                               tok, eq + 1);
        }
        int found = -1;
        for (int k = 0; k < PLACE_KINDS; k++)
            if (!strcmp(tok, names[k])) found = k;
        if (found < 0) return st_fail(err, ST_EINVAL, "--offload: unknown state '%s' (%s, or KIND=SHARE)", tok, choices);
        if (given[found]) return st_fail(err, ST_EINVAL, "--offload: %s is given twice", tok);
        given[found] = 1;
        placement_set_share(out, (place_kind)found, share);
        any = 1;
    }
    if (!any) return st_fail(err, ST_EINVAL, "--offload: empty list (%s)", choices);
    return ST_OK;
}

st_status cli_parse_rope_scaling(const char *s, gpt_rope_scaling *out, st_error *err) {
    *out = (gpt_rope_scaling){0};
    if (!strcmp(s, "none")) return ST_OK;
    double f, lo, hi;
    int orig, used = 0;
    if (sscanf(s, "llama3:%lf,%lf,%lf,%d%n", &f, &lo, &hi, &orig, &used) != 4 || s[used])
        return st_fail(err, ST_EINVAL, "--rope-scaling %s: must be none or llama3:FACTOR,LOW,HIGH,ORIGINAL", s);
    *out = (gpt_rope_scaling){(float)f, (float)lo, (float)hi, orig};
    return ST_OK;
}

const char *cli_format_rope_scaling(const gpt_rope_scaling *r, char *buf, size_t cap) {
    if (r->factor == 0) snprintf(buf, cap, "none");
    else snprintf(buf, cap, "llama3:%.9g,%.9g,%.9g,%d", (double)r->factor, (double)r->low_freq_factor,
                  (double)r->high_freq_factor, r->original_context);
    return buf;
}

st_status cli_model_config(const cli_model_flags *f, gpt_config *cfg, st_error *err) {
    const int llama_flags = f->arch || f->n_kv_head || f->d_ff || f->tied || f->norm_eps || f->rope_theta ||
                            f->rope_scaling;
    if (f->n_layer || f->d_model || f->n_head || llama_flags) {
        if (f->model)
            return st_fail(err, ST_EINVAL, "give either --model or an explicit shape (--n-layer/--n-head/--d-model, "
                           "--arch and its flags), not both");
        if (!f->n_layer || !f->d_model || !f->n_head)
            return st_fail(err, ST_EINVAL, "an explicit shape needs --n-layer, --n-head and --d-model");
        *cfg = (gpt_config){.n_layer = (int)f->n_layer, .n_head = (int)f->n_head, .d_model = (int)f->d_model,
                            .n_ctx = (int)(f->n_ctx ? f->n_ctx : f->seq), .vocab_size = (int)(f->vocab ? f->vocab : 50257),
                            .n_kv_head = (int)f->n_kv_head, .d_ff = (int)f->d_ff, .norm_eps = (float)f->norm_eps,
                            .rope_theta = (float)f->rope_theta};
        st_status s = f->arch ? gpt_arch_parse(f->arch, &cfg->arch, err) : ST_OK;
        if (s != ST_OK) return s;
        if (cfg->arch == GPT_ARCH_LLAMA) {
            if (!f->d_ff) return st_fail(err, ST_EINVAL, "an explicit Llama shape needs --d-ff");
            if (!cfg->n_kv_head) cfg->n_kv_head = cfg->n_head;
            if (!cfg->norm_eps) cfg->norm_eps = 1e-5f;
            if (!cfg->rope_theta) cfg->rope_theta = 10000.0f;
            cfg->tied = f->tied > 0;
            if (f->rope_scaling && (s = cli_parse_rope_scaling(f->rope_scaling, &cfg->rope_scaling, err)) != ST_OK)
                return s;
        } else if ((f->rope_scaling && strcmp(f->rope_scaling, "none")) ||
                   (f->n_kv_head && f->n_kv_head != f->n_head) || (f->d_ff && f->d_ff != 4 * f->d_model)) {
            return st_fail(err, ST_EINVAL, "GPT-2's key/value heads are its heads, its MLP is 4 d_model wide and it "
                           "has no rotary embeddings (--n-kv-head, --d-ff and --rope-scaling are for --arch llama)");
        }
        return gpt_config_check(cfg, err);
    }
    st_status s = gpt_config_from_name(cfg, f->model ? f->model : "gpt2-124m", err);
    if (s != ST_OK) return s;
    if (f->n_ctx) cfg->n_ctx = (int)f->n_ctx;
    if (f->vocab) cfg->vocab_size = (int)f->vocab;
    return gpt_config_check(cfg, err);
}

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

st_status cli_store_dirs(const char *arg, store_dirs *out, st_error *err) {
    st_status s = store_dirs_parse(arg, out, err);
    if (s != ST_OK) {
        char msg[sizeof err->msg];
        memcpy(msg, err->msg, sizeof msg);
        return st_fail(err, s, "the store's directories, or a run directory: %s", msg);
    }
    /* A run directory: its store is where its run.json says, else RUN_DIR/store. */
    char run_json[PATH_MAX], manifest[PATH_MAX], sub[PATH_MAX];
    snprintf(run_json, sizeof run_json, "%s/run.json", out->paths[0]);
    snprintf(manifest, sizeof manifest, "%s/strata-store.manifest", out->paths[0]);
    snprintf(sub, sizeof sub, "%s/store", out->paths[0]);
    if (out->n != 1 || !is_file(run_json) || is_file(manifest)) return ST_OK;
    FILE *f = fopen(run_json, "rb");
    char text[65536];
    size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[len] = 0;
    cJSON *doc = cJSON_Parse(text);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(doc, "store");
    if (cJSON_IsString(st) && st->valuestring[0]) s = store_dirs_parse(st->valuestring, out, err);
    else if (!is_dir(sub)) s = st_fail(err, ST_ENOENT, "%s is a run directory without a store in %s", out->paths[0], sub);
    else s = store_dirs_parse(sub, out, err);
    cJSON_Delete(doc);
    return s;
}

const char *cli_model_tokenizer(const char *flag, const char *model_dir, char *buf, size_t cap) {
    if (flag && *flag) return flag;
    if (!model_dir || snprintf(buf, cap, "%s/tokenizer.json", model_dir) >= (int)cap) return NULL;
    return is_file(buf) ? buf : NULL;
}

st_status cli_commit_read(store *st, ckpt_record *out, st_error *err) {
    size_t n = 0;
    const void *meta = store_user_meta(st, &n);   /* valid until the next store_set_user_meta: parsed at once */
    return ckpt_record_parse(meta, n, out, err);
}

static st_status open_commit(const store_dirs *d, int previous, store **st, ckpt_record *rec, st_error *err) {
    st_status s = store_open_read_only(d, previous, st, err);
    if (s == ST_OK && (s = cli_commit_read(*st, rec, err)) != ST_OK) {
        store_close(*st);
        *st = NULL;
    }
    return s;
}

int cli_store_ranks(const store_dirs *dirs) {
    if (store_dirs_hold_store(dirs)) return 1;
    int found = 0;   /* rank R's spelling is the same for any number of ranks above 1 */
    for (store_dirs d; store_dirs_of_rank(dirs, found, 2, &d, NULL) == ST_OK && store_dirs_hold_store(&d);) found++;
    if (found == 0) return 1;
    store_dirs r0;
    store *st;
    ckpt_record rec;
    if (store_dirs_of_rank(dirs, 0, 2, &r0, NULL) != ST_OK || open_commit(&r0, 0, &st, &rec, NULL) != ST_OK)
        return found;   /* rank 0's store opened again by the caller, which says what is wrong with it */
    store_close(st);
    return rec.ranks > 1 ? rec.ranks : found;
}

st_status cli_open_rank_stores(const store_dirs *dirs, int ranks, store **stores, ckpt_record *records, int *ahead,
                               st_error *err) {
    st_status s = ST_OK;
    long step = LONG_MAX;
    *ahead = 0;
    for (int r = 0; r < ranks; r++) stores[r] = NULL;
    for (int r = 0; r < ranks && s == ST_OK; r++) {
        store_dirs d;
        if ((s = store_dirs_of_rank(dirs, r, ranks, &d, err)) == ST_OK &&
            (s = open_commit(&d, 0, &stores[r], &records[r], err)) == ST_OK && records[r].step < step)
            step = records[r].step;
        if (s == ST_OK && ranks > 1 && (records[r].ranks != ranks || records[r].rank != r))
            s = st_fail(err, ST_ECORRUPT, "%s holds rank %d of %d's commit, not rank %d of %d's", d.paths[0],
                        records[r].rank, records[r].ranks, r, ranks);
    }
    for (int r = 0; r < ranks && s == ST_OK; r++) {
        if (records[r].step == step) continue;
        const long last = records[r].step;
        store_dirs d;
        store_close(stores[r]);
        stores[r] = NULL;
        if ((s = store_dirs_of_rank(dirs, r, ranks, &d, err)) == ST_OK &&
            (s = open_commit(&d, 1, &stores[r], &records[r], err)) == ST_OK && records[r].step != step)
            s = st_fail(err, ST_ECORRUPT, "the ranks' last commits differ (step %ld, and rank %d's of step %ld), and "
                        "rank %d's store no longer keeps the commit of step %ld", step, r, last, r, step);
        *ahead += 1;
    }
    if (s != ST_OK)
        for (int r = 0; r < ranks; r++) store_close(stores[r]), stores[r] = NULL;
    return s;
}
