/* cli_flags.c - parsing a command line against a command's flag table, and
 * the table's other uses: config files, values as text, settings as JSON. */
#include "cli/cli_flags.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "strata/model.h"

static void *field_of(const cli_flag *f, void *opts) { return (char *)opts + f->offset; }
static const void *const_field_of(const cli_flag *f, const void *opts) { return (const char *)opts + f->offset; }

static int takes_value(const cli_flag *f) { return f->type != CLI_TYPE_ON && f->type != CLI_TYPE_OFF; }

const cli_flag *cli_flag_named(const cli_spec *cmd, const char *name) {
    for (size_t i = 0; i < cmd->n_flags; i++)
        if (!strcmp(cmd->flags[i].name, name)) return &cmd->flags[i];
    return NULL;
}

int cli_flag_given(const cli_spec *cmd, const cli_parsed *p, const char *name) {
    const cli_flag *f = cli_flag_named(cmd, name);
    return f && p->given[f - cmd->flags];
}

int cli_name_in(const char *name, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, list[i])) return 1;
    return 0;
}

st_status cli_flag_set(const cli_flag *f, void *opts, const char *value, st_error *err) {
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", f->name);
    void *field = field_of(f, opts);
    switch (f->type) {
    case CLI_TYPE_STRING: *(const char **)field = value; return ST_OK;
    case CLI_TYPE_INT: return cli_parse_int(flag, value, (long)f->min, (long)f->max, (long *)field, err);
    case CLI_TYPE_DOUBLE: return cli_parse_double(flag, value, f->min, f->max, (double *)field, err);
    case CLI_TYPE_U64: return cli_parse_u64(flag, value, (uint64_t *)field, err);
    case CLI_TYPE_SIZE: return cli_parse_size(flag, value, (uint64_t *)field, err);
    case CLI_TYPE_ON: *(int *)field = 1; return ST_OK;
    case CLI_TYPE_OFF: *(int *)field = 0; return ST_OK;
    }
    return st_fail(err, ST_EINVAL, "%s: unknown flag type %d", flag, (int)f->type);
}

void cli_flag_format(const cli_flag *f, const void *opts, char *buf, size_t n) {
    const void *field = const_field_of(f, opts);
    switch (f->type) {
    case CLI_TYPE_STRING: {
        const char *s = *(const char *const *)field;
        snprintf(buf, n, "%s", s ? s : "");
        break;
    }
    case CLI_TYPE_INT: snprintf(buf, n, "%ld", *(const long *)field); break;
    case CLI_TYPE_DOUBLE: {   /* the shortest text that reads back as the same double */
        const double v = *(const double *)field;
        for (int digits = 6; digits <= 17; digits++) {
            snprintf(buf, n, "%.*g", digits, v);
            if (strtod(buf, NULL) == v) break;
        }
        break;
    }
    case CLI_TYPE_U64:
    case CLI_TYPE_SIZE: snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)field); break;
    case CLI_TYPE_ON:
    case CLI_TYPE_OFF: snprintf(buf, n, "%s", *(const int *)field ? "true" : "false"); break;
    }
}

void cli_flag_copy(const cli_flag *f, void *to, const void *from) {
    size_t size = sizeof(int);
    switch (f->type) {
    case CLI_TYPE_STRING: size = sizeof(const char *); break;
    case CLI_TYPE_INT: size = sizeof(long); break;
    case CLI_TYPE_DOUBLE: size = sizeof(double); break;
    case CLI_TYPE_U64:
    case CLI_TYPE_SIZE: size = sizeof(uint64_t); break;
    case CLI_TYPE_ON:
    case CLI_TYPE_OFF: size = sizeof(int); break;
    }
    memcpy(field_of(f, to), const_field_of(f, from), size);
}

/* What one word of the command line is. */
typedef enum word_kind { WORD_FLAG, WORD_CONFIG, WORD_HELP, WORD_END_OF_FLAGS, WORD_ARG } word_kind;

typedef struct word {
    word_kind kind;
    const cli_flag *flag;   /* WORD_FLAG */
    const char *value;      /* WORD_FLAG with a value, WORD_CONFIG */
    int n_words;            /* argv words it takes: 2 for "--name VALUE" */
} word;

/* argv[i] read as the start of a flag, or as an argument. A flag that takes
 * a value takes the next word whatever it looks like, as getopt does. */
static st_status read_word(const cli_spec *cmd, int argc, char **argv, int i, word *w, st_error *err) {
    const char *a = argv[i];
    *w = (word){.kind = WORD_FLAG, .n_words = 1};
    if (!strcmp(a, "--")) {
        w->kind = WORD_END_OF_FLAGS;
        return ST_OK;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
        w->kind = WORD_HELP;
        return ST_OK;
    }
    if (a[0] != '-' || !a[1]) {   /* "-" is an argument too: stdin, by convention */
        w->kind = WORD_ARG;
        return ST_OK;
    }
    const char *eq = NULL;
    char name[128];
    if (a[1] == '-') {
        eq = strchr(a + 2, '=');
        const size_t len = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
        if (len < sizeof name) {   /* a longer one is no flag's */
            memcpy(name, a + 2, len);
            name[len] = 0;
            w->flag = cli_flag_named(cmd, name);
            if (!w->flag && cmd->config_help && !strcmp(name, "config")) w->kind = WORD_CONFIG;
        }
    } else if (!a[2]) {
        for (size_t k = 0; k < cmd->n_flags; k++)
            if (cmd->flags[k].short_name == a[1]) w->flag = &cmd->flags[k];
    }
    if (!w->flag && w->kind != WORD_CONFIG)
        return st_fail(err, ST_EINVAL, "unknown flag: %.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
    if (w->flag && !takes_value(w->flag)) {
        if (eq) return st_fail(err, ST_EINVAL, "--%s takes no value", w->flag->name);
        return ST_OK;
    }
    if (eq) {
        w->value = eq + 1;
    } else if (i + 1 < argc) {
        w->value = argv[i + 1];
        w->n_words = 2;
    } else {
        return st_fail(err, ST_EINVAL, "%s needs a value", a);
    }
    return ST_OK;
}

st_status cli_flags_scan(const cli_spec *cmd, int argc, char **argv, cli_parsed *out, st_error *err) {
    *out = (cli_parsed){0};
    if (cmd->n_flags > CLI_MAX_FLAGS)
        return st_fail(err, ST_EINVAL, "strata %s has %zu flags, more than CLI_MAX_FLAGS", cmd->command, cmd->n_flags);
    /* argv[1..first_arg) holds the flag words read so far and
     * argv[first_arg..i) the arguments: each flag moves in front of them */
    int first_arg = 1, i = 1;
    while (i < argc) {
        word w;
        st_status s = read_word(cmd, argc, argv, i, &w, err);
        if (s != ST_OK) return s;
        if (w.kind == WORD_HELP) {
            out->help = 1;
            return ST_OK;
        }
        if (w.kind == WORD_ARG) {
            i++;
            continue;
        }
        if (w.kind == WORD_CONFIG) {
            if (out->config_path) return st_fail(err, ST_EINVAL, "--config may be given once");
            out->config_path = w.value;
        }
        if (w.kind == WORD_FLAG) out->given[w.flag - cmd->flags] = 1;
        char *moved[2] = {argv[i], w.n_words > 1 ? argv[i + 1] : NULL};
        memmove(argv + first_arg + w.n_words, argv + first_arg, (size_t)(i - first_arg) * sizeof *argv);
        for (int k = 0; k < w.n_words; k++) argv[first_arg + k] = moved[k];
        first_arg += w.n_words;
        i += w.n_words;
        if (w.kind == WORD_END_OF_FLAGS) break;
    }
    out->flag_words = argv + 1;
    out->n_flag_words = first_arg - 1;
    out->args = argv + first_arg;
    out->n_args = argc - first_arg;
    if (out->n_args && !cmd->takes_args && !cmd->one_arg)
        return st_fail(err, ST_EINVAL, "unexpected argument '%s'", out->args[0]);
    if (out->n_args > 1 && cmd->one_arg)
        return st_fail(err, ST_EINVAL, "one %s argument, not '%s' and '%s'", cmd->one_arg, out->args[0], out->args[1]);
    return ST_OK;
}

st_status cli_flags_apply(const cli_spec *cmd, const cli_parsed *p, void *opts, st_error *err) {
    for (int i = 0; i < p->n_flag_words;) {
        word w;
        st_status s = read_word(cmd, p->n_flag_words, p->flag_words, i, &w, err);
        if (s != ST_OK) return s;
        if (w.kind == WORD_END_OF_FLAGS) break;
        if (w.kind == WORD_FLAG && (s = cli_flag_set(w.flag, opts, w.value, err)) != ST_OK) return s;
        i += w.n_words;
    }
    return ST_OK;
}

/* "--name METAVAR" or "--name, -x": the left column of the help. */
static void flag_column(const cli_flag *f, char *buf, size_t n) {
    if (f->short_name) snprintf(buf, n, "--%s, -%c", f->name, f->short_name);
    else snprintf(buf, n, "--%s%s%s", f->name, f->metavar ? " " : "", f->metavar ? f->metavar : "");
}

static void print_flag_line(FILE *f, int width, const char *column, const char *help, const char *default_text) {
    fprintf(f, "  %-*s", width, column);
    for (const char *line = help; line;) {
        const char *nl = strchr(line, '\n');
        if (line != help) fprintf(f, "\n  %-*s", width, "");
        fprintf(f, "%.*s", nl ? (int)(nl - line) : (int)strlen(line), line);
        line = nl ? nl + 1 : NULL;
    }
    if (default_text) fprintf(f, " (default %s)", default_text);
    fputc('\n', f);
}

void cli_print_help(FILE *f, const cli_spec *cmd, const void *opts) {
    static const cli_flag config = {.name = "config", .metavar = "FILE"};
    char column[160];
    int width = 0;
    for (size_t i = 0; i <= cmd->n_flags; i++) {
        const cli_flag *fl = i < cmd->n_flags ? &cmd->flags[i] : cmd->config_help ? &config : NULL;
        if (!fl) break;
        flag_column(fl, column, sizeof column);
        if ((int)strlen(column) > width) width = (int)strlen(column);
    }
    width += 2;
    fprintf(f, "%s\n\n", cmd->usage);
    if (cmd->about) fprintf(f, "%s\n\n", cmd->about);
    for (size_t i = 0; i < cmd->n_flags; i++) {
        const cli_flag *fl = &cmd->flags[i];
        char value[256];
        cli_flag_format(fl, opts, value, sizeof value);
        flag_column(fl, column, sizeof column);
        /* the value the options hold before parsing, unless the help says what the default is, or it is
         * 0 for "not given" */
        const int show = takes_value(fl) && value[0] && !strstr(fl->help, "default") &&
                         (fl->show_default || strcmp(value, "0") != 0);
        print_flag_line(f, width, column, fl->help, show ? value : NULL);
    }
    if (cmd->config_help) {
        flag_column(&config, column, sizeof column);
        print_flag_line(f, width, column, cmd->config_help, NULL);
    }
    if (cmd->epilogue) fprintf(f, "\n%s\n", cmd->epilogue);
    if (cmd->lists_models) fprintf(f, "\nModels: %s.\n", gpt_config_names());
}

int cli_parse_flags(const cli_spec *cmd, int argc, char **argv, void *opts, cli_parsed *out) {
    st_error err = {0};
    if (cli_flags_scan(cmd, argc, argv, out, &err) != ST_OK) return cli_usage_error(cmd->command, "%s", err.msg);
    if (out->help) {
        cli_print_help(stdout, cmd, opts);
        return 0;
    }
    if (out->config_path && cli_config_apply(cmd, opts, out->config_path, &out->config, &err) != ST_OK) {
        cJSON_Delete(out->config);
        out->config = NULL;
        return cli_fail(&err);
    }
    if (cli_flags_apply(cmd, out, opts, &err) != ST_OK) {
        cJSON_Delete(out->config);
        out->config = NULL;
        return cli_usage_error(cmd->command, "%s", err.msg);
    }
    return CLI_PARSED;
}

/* One setting of a config file into opts. */
static st_status apply_setting(const cli_flag *f, void *opts, const cJSON *it, const char *path, st_error *err) {
    const int on_off = !takes_value(f);
    if (cJSON_IsBool(it) && on_off) {
        const int on = cJSON_IsTrue(it);
        *(int *)field_of(f, opts) = f->type == CLI_TYPE_ON ? on : !on;
        return ST_OK;
    }
    char num[64];
    const char *value = NULL;
    if (cJSON_IsString(it)) {
        value = it->valuestring;
    } else if (cJSON_IsNumber(it)) {
        if (f->type != CLI_TYPE_DOUBLE && it->valuedouble != floor(it->valuedouble))
            return st_fail(err, ST_EINVAL, "%s: \"%s\" must be an integer", path, it->string);
        snprintf(num, sizeof num, f->type == CLI_TYPE_DOUBLE ? "%.17g" : "%.0f", it->valuedouble);
        value = num;
    } else {
        return st_fail(err, ST_EINVAL, "%s: \"%s\" has the wrong type", path, it->string);
    }
    if (on_off) return st_fail(err, ST_EINVAL, "%s: \"%s\" must be true or false", path, it->string);
    st_status s = cli_flag_set(f, opts, value, err);
    if (s != ST_OK) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return st_fail(err, s, "%s: %s", path, msg);
    }
    return ST_OK;
}

st_status cli_config_apply(const cli_spec *cmd, void *opts, const char *path, struct cJSON **doc, st_error *err) {
    enum { MAX_BYTES = 1 << 20 };
    *doc = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return st_fail_errno(err, errno, "%s: cannot open config file", path);
    char *buf = malloc(MAX_BYTES);
    size_t n = buf ? fread(buf, 1, MAX_BYTES - 1, f) : 0;
    const int too_big = buf && n == MAX_BYTES - 1 && fgetc(f) != EOF;
    fclose(f);
    if (!buf) return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    if (too_big) {
        free(buf);
        return st_fail(err, ST_EINVAL, "%s: config file larger than 1 MiB", path);
    }
    buf[n] = 0;
    *doc = cJSON_Parse(buf);
    free(buf);
    if (!*doc || !cJSON_IsObject(*doc)) return st_fail(err, ST_EINVAL, "%s: not a JSON object", path);
    for (cJSON *it = (*doc)->child; it; it = it->next) {
        const cli_flag *fl = cli_flag_named(cmd, it->string);
        if (!fl) return st_fail(err, ST_EINVAL, "%s: unknown setting \"%s\"", path, it->string);
        if (fl->type == CLI_TYPE_STRING && cJSON_IsNumber(it)) {
            /* a number for a text setting ("commit-every": 5): made text in the document, which the value
             * will point into as long as the caller keeps it */
            char num[64];
            snprintf(num, sizeof num, "%.17g", it->valuedouble);
            cJSON *text = cJSON_CreateString(num);
            if (!text || !cJSON_ReplaceItemInObjectCaseSensitive(*doc, it->string, text)) {
                cJSON_Delete(text);
                return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
            }
            it = text;
        }
        st_status s = apply_setting(fl, opts, it, path, err);
        if (s != ST_OK) return s;
    }
    return ST_OK;
}

char *cli_settings_json(const cli_spec *cmd, const void *opts, const char *const *skip, size_t n_skip) {
    cJSON *doc = cJSON_CreateObject();
    for (size_t i = 0; doc && i < cmd->n_flags; i++) {
        const cli_flag *f = &cmd->flags[i];
        const void *field = const_field_of(f, opts);
        if (cli_name_in(f->name, skip, n_skip)) continue;
        switch (f->type) {
        case CLI_TYPE_STRING:
            if (*(const char *const *)field) cJSON_AddStringToObject(doc, f->name, *(const char *const *)field);
            break;
        case CLI_TYPE_INT: cJSON_AddNumberToObject(doc, f->name, (double)*(const long *)field); break;
        case CLI_TYPE_DOUBLE: cJSON_AddNumberToObject(doc, f->name, *(const double *)field); break;
        case CLI_TYPE_U64:
        case CLI_TYPE_SIZE: {
            char num[32];
            cli_flag_format(f, opts, num, sizeof num);
            cJSON_AddStringToObject(doc, f->name, num);
            break;
        }
        case CLI_TYPE_ON: cJSON_AddBoolToObject(doc, f->name, *(const int *)field); break;
        case CLI_TYPE_OFF: break;   /* its CLI_TYPE_ON flag records the field */
        }
    }
    char *text = doc ? cJSON_Print(doc) : NULL;
    cJSON_Delete(doc);
    return text;
}
