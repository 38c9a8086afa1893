/* test_cli_flags.c - the flag table parser every command uses (cli/cli_flags.h):
 * each value type and its range, --flag=value, missing values, unknown flags,
 * arguments, which flags were given, --help, config files, values as text
 * and settings as JSON read back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "cli/cli_flags.h"

typedef struct opts {
    const char *name;
    long count;
    double rate;
    uint64_t seed, bytes;
    int fast, verbose;
    long seq;
} opts;

#define O(field) offsetof(opts, field)
static const cli_flag flags[] = {
    CLI_STRING("name", O(name), "NAME", "a name"),
    CLI_INT("count", O(count), -5, 100, "N", "a count"),
    CLI_DOUBLE("rate", O(rate), 0, 1e6, "X", "a rate\nover two lines"),
    CLI_U64("seed", O(seed), "S", "a seed"),
    CLI_SIZE("bytes", O(bytes), "SIZE", "a size"),
    CLI_ON("fast", O(fast), "go fast"),
    CLI_OFF("slow", O(fast), "go slow"),
    {.name = "verbose", .short_name = 'v', .type = CLI_TYPE_ON, .offset = O(verbose), .help = "say more"},
    CLI_SEQ_FLAG(O(seq)),
};
enum { NAME, COUNT, RATE, SEED, BYTES, FAST, SLOW, VERBOSE, SEQ };

static const cli_spec with_args = {
    .command = "test",
    .usage = "usage: strata test [flags] ARG...",
    .about = "Tests the parser.",
    .epilogue = "The end.",
    .flags = flags,
    .n_flags = CLI_COUNT(flags),
    .takes_args = 1,
    .config_help = "settings as JSON",
};
static const cli_spec no_args = {
    .command = "test",
    .usage = "usage: strata test [flags]",
    .flags = flags,
    .n_flags = CLI_COUNT(flags),
};

static opts defaults(void) { return (opts){.name = "default", .count = 3, .rate = 0.5, .seq = 256}; }

/* scan and apply, as cli_parse_flags does without a config file */
static st_status parse_argv(const cli_spec *spec, int argc, char **argv, opts *o, cli_parsed *p, st_error *err) {
    st_status s = cli_flags_scan(spec, argc, argv, p, err);
    if (s == ST_OK && !p->help) s = cli_flags_apply(spec, p, o, err);
    return s;
}
/* argv: NULL-terminated */
static st_status parse_words(const cli_spec *spec, opts *o, cli_parsed *p, st_error *err, char **argv) {
    int argc = 0;
    while (argv[argc]) argc++;
    return parse_argv(spec, argc, argv, o, p, err);
}
#define PARSE(spec, o, p, err, ...) parse_words(spec, o, p, err, (char *[]){"test", __VA_ARGS__, NULL})

static void assert_fails_with(st_status s, const st_error *err, const char *msg) {
    assert_int_equal(s, ST_EINVAL);
    if (!strstr(err->msg, msg)) fail_msg("message '%s' lacks '%s'", err->msg, msg);
}

static void test_each_type(void **state) {
    (void)state;
    opts o = defaults();
    cli_parsed p;
    st_error err = {0};
    assert_int_equal(PARSE(&no_args, &o, &p, &err, "--name", "x", "--count", "-5", "--rate", "0.25", "--seed",
                           "18446744073709551615", "--bytes", "2K", "--fast", "--seq", "64"),
                     ST_OK);
    assert_string_equal(o.name, "x");
    assert_int_equal(o.count, -5);
    assert_true(o.rate == 0.25);
    assert_true(o.seed == UINT64_MAX);
    assert_int_equal(o.bytes, 2048);
    assert_int_equal(o.fast, 1);
    assert_int_equal(o.seq, 64);
    assert_int_equal(PARSE(&no_args, &o, &p, &err, "--slow"), ST_OK);
    assert_int_equal(o.fast, 0);
    assert_int_equal(PARSE(&no_args, &o, &p, &err, "-v"), ST_OK);
    assert_int_equal(o.verbose, 1);
    /* the last of a repeated flag wins, as with getopt */
    assert_int_equal(PARSE(&no_args, &o, &p, &err, "--count", "1", "--count", "2"), ST_OK);
    assert_int_equal(o.count, 2);
}

static void test_ranges(void **state) {
    (void)state;
    opts o = defaults();
    cli_parsed p;
    st_error err = {0};
    assert_int_equal(PARSE(&no_args, &o, &p, &err, "--count", "100", "--rate", "1e6"), ST_OK);
    assert_int_equal(o.count, 100);
    assert_true(o.rate == 1e6);
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--count", "101"), &err, "--count 101: must be in [-5, 100]");
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--count", "-6"), &err, "--count -6: must be in [-5, 100]");
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--count", "1.5"), &err, "--count: '1.5' is not an integer");
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--rate", "-0.5"), &err, "--rate -0.5: must be in [0, 1e+06]");
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--rate", "nan"), &err, "--rate: 'nan' is not a number");
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--seed", "-1"), &err, "--seed: '-1' must not be negative");
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--bytes", "1Q"), &err, "--bytes: '1Q' is not a size");
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--seq", "0"), &err, "--seq 0: must be in [1, 1048576]");
    assert_int_equal(o.count, 100);   /* a refused value leaves the field as it was */
}

static void test_equals_form(void **state) {
    (void)state;
    opts o = defaults();
    cli_parsed p;
    st_error err = {0};
    assert_int_equal(PARSE(&no_args, &o, &p, &err, "--count=7", "--name=a=b", "--bytes=1M"), ST_OK);
    assert_int_equal(o.count, 7);
    assert_string_equal(o.name, "a=b");
    assert_int_equal(o.bytes, 1 << 20);
    assert_int_equal(PARSE(&no_args, &o, &p, &err, "--name="), ST_OK);
    assert_string_equal(o.name, "");
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--count="), &err, "--count: '' is not an integer");
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--fast=1"), &err, "--fast takes no value");
}

static void test_missing_value(void **state) {
    (void)state;
    opts o = defaults();
    cli_parsed p;
    st_error err = {0};
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--fast", "--count"), &err, "--count needs a value");
    assert_int_equal(o.fast, 0);   /* nothing is stored when the command line is malformed */
    /* a value is the next word, whatever it looks like */
    assert_int_equal(PARSE(&no_args, &o, &p, &err, "--name", "--fast"), ST_OK);
    assert_string_equal(o.name, "--fast");
    assert_int_equal(o.fast, 0);
    assert_int_equal(PARSE(&no_args, &o, &p, &err, "--count", "-4"), ST_OK);
    assert_int_equal(o.count, -4);
}

static void test_unknown_flag(void **state) {
    (void)state;
    opts o = defaults();
    cli_parsed p;
    st_error err = {0};
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--bogus"), &err, "unknown flag: --bogus");
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--bogus=1"), &err, "unknown flag: --bogus");
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "-x"), &err, "unknown flag: -x");
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--coun", "1"), &err, "unknown flag: --coun");   /* no prefixes */
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--config", "x.json"), &err, "unknown flag: --config");
}

static void test_arguments(void **state) {
    (void)state;
    opts o = defaults();
    cli_parsed p;
    st_error err = {0};
    char *argv[] = {"test", "a", "--count", "3", "b", "-", "--fast", "--", "--c", "-v"};
    assert_int_equal(parse_argv(&with_args, 10, argv, &o, &p, &err), ST_OK);
    assert_int_equal(o.count, 3);
    assert_int_equal(o.fast, 1);
    assert_int_equal(o.verbose, 0);   /* after "--": an argument */
    assert_int_equal(p.n_args, 5);
    const char *want[] = {"a", "b", "-", "--c", "-v"};
    for (int i = 0; i < 5; i++) assert_string_equal(p.args[i], want[i]);
    assert_int_equal(p.n_flag_words, 4);
    assert_string_equal(argv[1], "--count");   /* flags first, then the arguments */
    assert_string_equal(argv[5], "a");
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--count", "3", "a"), &err, "unexpected argument 'a'");
    assert_fails_with(PARSE(&no_args, &o, &p, &err, "--", "a"), &err, "unexpected argument 'a'");
    assert_int_equal(PARSE(&with_args, &o, &p, &err, "--count", "4"), ST_OK);
    assert_int_equal(p.n_args, 0);
}

static void test_given(void **state) {
    (void)state;
    opts o = defaults();
    cli_parsed p;
    st_error err = {0};
    assert_int_equal(PARSE(&no_args, &o, &p, &err, "--count", "3", "--slow", "--rate=0.1"), ST_OK);
    for (int i = 0; i < (int)CLI_COUNT(flags); i++)
        assert_int_equal(p.given[i], i == COUNT || i == SLOW || i == RATE);
    assert_true(cli_flag_given(&no_args, &p, "slow"));
    assert_false(cli_flag_given(&no_args, &p, "fast"));
    assert_false(cli_flag_given(&no_args, &p, "nonsense"));
    assert_int_equal(PARSE(&no_args, &o, &p, &err, "-v"), ST_OK);
    assert_true(p.given[VERBOSE]);
    assert_false(p.given[COUNT]);
}

static char *read_all(FILE *f) {
    static char text[8192];
    rewind(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    return text;
}

static void test_help(void **state) {
    (void)state;
    opts o = defaults();
    cli_parsed p;
    st_error err = {0};
    /* --help wins wherever it stands, and nothing is stored */
    assert_int_equal(PARSE(&no_args, &o, &p, &err, "--count", "7", "--help", "--bogus"), ST_OK);
    assert_true(p.help);
    assert_int_equal(o.count, 3);
    assert_int_equal(PARSE(&no_args, &o, &p, &err, "-h"), ST_OK);
    assert_true(p.help);
    assert_int_equal(PARSE(&no_args, &o, &p, &err, "--name", "--help"), ST_OK);   /* a value, not a flag */
    assert_false(p.help);

    FILE *f = tmpfile();
    assert_non_null(f);
    o = defaults();   /* every default is shown but a 0 ("not given") */
    cli_print_help(f, &with_args, &o);
    const char *text = read_all(f);
    fclose(f);
    const char *want = "usage: strata test [flags] ARG...\n"
                       "\n"
                       "Tests the parser.\n"
                       "\n"
                       "  --name NAME    a name (default default)\n"
                       "  --count N      a count (default 3)\n"
                       "  --rate X       a rate\n"
                       "                 over two lines (default 0.5)\n"
                       "  --seed S       a seed\n"
                       "  --bytes SIZE   a size\n"
                       "  --fast         go fast\n"
                       "  --slow         go slow\n"
                       "  --verbose, -v  say more\n"
                       "  --seq T        tokens per sequence (default 256)\n"
                       "  --config FILE  settings as JSON\n"
                       "\n"
                       "The end.\n";
    assert_string_equal(text, want);
}

/* path: a temporary file holding text. */
static void write_file(char *path, const char *text) {
    strcpy(path, "/tmp/strata_test_cli_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static st_status apply_text(const char *text, opts *o, st_error *err) {
    char path[64];
    write_file(path, text);
    cJSON *doc = NULL;
    st_status s = cli_config_apply(&with_args, o, path, &doc, err);
    cJSON_Delete(doc);
    unlink(path);
    return s;
}

static void test_config_file(void **state) {
    (void)state;
    opts o = defaults();
    char path[64];
    write_file(path, "{\"name\": \"cfg\", \"count\": -2, \"rate\": 0.125, \"seed\": \"12345678901234567890\", "
                     "\"bytes\": \"1M\", \"fast\": true, \"verbose\": true, \"seq\": 512}");
    cJSON *doc = NULL;
    st_error err = {0};
    assert_int_equal(cli_config_apply(&with_args, &o, path, &doc, &err), ST_OK);
    assert_string_equal(o.name, "cfg");   /* it points into doc */
    assert_int_equal(o.count, -2);
    assert_true(o.rate == 0.125);
    assert_true(o.seed == 12345678901234567890ull);
    assert_int_equal(o.bytes, 1 << 20);
    assert_int_equal(o.fast, 1);
    assert_int_equal(o.verbose, 1);
    assert_int_equal(o.seq, 512);
    cJSON_Delete(doc);
    unlink(path);
    /* numbers as strings, and the negation of an on/off flag */
    o = defaults();
    assert_int_equal(apply_text("{\"count\": \"9\", \"slow\": true}", &o, &err), ST_OK);
    assert_int_equal(o.count, 9);
    assert_int_equal(o.fast, 0);
    assert_int_equal(apply_text("{\"slow\": false}", &o, &err), ST_OK);
    assert_int_equal(o.fast, 1);
}

static void test_config_errors(void **state) {
    (void)state;
    opts o = defaults();
    st_error err = {0};
    assert_fails_with(apply_text("{\"nope\": 1}", &o, &err), &err, "unknown setting \"nope\"");
    assert_fails_with(apply_text("{\"count\": [1]}", &o, &err), &err, "\"count\" has the wrong type");
    assert_fails_with(apply_text("{\"count\": true}", &o, &err), &err, "\"count\" has the wrong type");
    assert_fails_with(apply_text("{\"count\": 2.5}", &o, &err), &err, "\"count\" must be an integer");
    assert_fails_with(apply_text("{\"seed\": 1.5}", &o, &err), &err, "\"seed\" must be an integer");
    assert_fails_with(apply_text("{\"count\": \"many\"}", &o, &err), &err, "--count: 'many' is not an integer");
    assert_fails_with(apply_text("{\"count\": 101}", &o, &err), &err, "--count 101: must be in [-5, 100]");
    assert_fails_with(apply_text("{\"fast\": 1}", &o, &err), &err, "\"fast\" must be true or false");
    assert_fails_with(apply_text("[1, 2]", &o, &err), &err, "not a JSON object");
    assert_fails_with(apply_text("{\"count\": ", &o, &err), &err, "not a JSON object");
    assert_true(strncmp(err.msg, "/tmp/strata_test_cli_", 21) == 0);   /* the message names the file */
    cJSON *doc = NULL;
    assert_int_not_equal(cli_config_apply(&with_args, &o, "/nonexistent/x.json", &doc, &err), ST_OK);
    assert_non_null(strstr(err.msg, "/nonexistent/x.json: cannot open config file"));
    assert_int_equal(o.count, 3);
}

/* cli_parse_flags: the config file, then the flags; exit codes. */
static void test_config_then_flags(void **state) {
    (void)state;
    char path[64];
    write_file(path, "{\"name\": \"cfg\", \"count\": 4}");
    opts o = defaults();
    cli_parsed p;
    char *argv[] = {"test", "--count", "9", "--config", path};
    assert_int_equal(cli_parse_flags(&with_args, 5, argv, &o, &p), CLI_PARSED);
    assert_int_equal(o.count, 9);   /* the flag overrides the file wherever it stands */
    assert_string_equal(o.name, "cfg");
    assert_string_equal(p.config_path, path);
    assert_non_null(p.config);
    assert_false(p.given[NAME]);
    cJSON_Delete(p.config);
    char *twice[] = {"test", "--config", path, "--config", path};
    assert_int_equal(cli_parse_flags(&with_args, 5, twice, &o, &p), 2);
    char *bad_flag[] = {"test", "--config", path, "--count", "x"};
    assert_int_equal(cli_parse_flags(&with_args, 5, bad_flag, &o, &p), 2);
    assert_null(p.config);
    unlink(path);
    write_file(path, "{\"count\": \"x\"}");
    char *bad_file[] = {"test", "--config", path};
    assert_int_equal(cli_parse_flags(&with_args, 3, bad_file, &o, &p), 1);   /* a file, not the usage, is wrong */
    assert_null(p.config);
    unlink(path);
}

static void test_format_round_trip(void **state) {
    (void)state;
    const double doubles[] = {0.1, 1.0 / 3, 6e-4, 1e-300, 0.95, 123456.789, 0};
    for (size_t k = 0; k < sizeof doubles / sizeof doubles[0]; k++) {
        const opts a = {.name = "a name", .count = -5, .rate = doubles[k], .seed = UINT64_MAX - 1, .bytes = 12345,
                        .fast = 1, .verbose = 1, .seq = 77};
        opts b = {0};
        st_error err = {0};
        char text[CLI_COUNT(flags)][128];   /* b's string points into its text */
        for (size_t i = 0; i < CLI_COUNT(flags); i++) {
            cli_flag_format(&flags[i], &a, text[i], sizeof text[i]);
            if (flags[i].type == CLI_TYPE_ON || flags[i].type == CLI_TYPE_OFF) {
                assert_string_equal(text[i], "true");
                continue;
            }
            assert_int_equal(cli_flag_set(&flags[i], &b, text[i], &err), ST_OK);
        }
        assert_string_equal(b.name, "a name");
        assert_int_equal(b.count, -5);
        assert_true(b.rate == a.rate);
        assert_true(b.seed == UINT64_MAX - 1);
        assert_int_equal(b.bytes, 12345);
        assert_int_equal(b.seq, 77);
    }
    opts unset = {0};
    char text[16] = "x";
    cli_flag_format(&flags[NAME], &unset, text, sizeof text);
    assert_string_equal(text, "");
    cli_flag_format(&flags[RATE], &(opts){.rate = 0.1}, text, sizeof text);
    assert_string_equal(text, "0.1");   /* the shortest text that reads back */
}

static void test_copy(void **state) {
    (void)state;
    const opts a = {.name = "n", .count = 0x123456789, .rate = 0.75, .seed = 1ull << 40, .bytes = 10, .fast = 1,
                    .verbose = 1, .seq = -0x123456789};
    opts b;
    memset(&b, 0xa5, sizeof b);
    for (size_t i = 0; i < CLI_COUNT(flags); i++) cli_flag_copy(&flags[i], &b, &a);
    assert_memory_equal(&a, &b, sizeof a);
}

static void test_settings_json(void **state) {
    (void)state;
    opts a = {.name = NULL, .count = 42, .rate = 0.3, .seed = UINT64_MAX, .bytes = 3 << 20, .fast = 0, .seq = 99};
    const char *skip[] = {"verbose"};
    char *text = cli_settings_json(&with_args, &a, skip, 1);
    assert_non_null(text);
    cJSON *doc = cJSON_Parse(text);
    assert_non_null(doc);
    assert_null(cJSON_GetObjectItemCaseSensitive(doc, "name"));      /* unset string */
    assert_null(cJSON_GetObjectItemCaseSensitive(doc, "slow"));      /* its "fast" records it */
    assert_null(cJSON_GetObjectItemCaseSensitive(doc, "verbose"));   /* skipped */
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(doc, "fast")));
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(doc, "seed");
    assert_true(cJSON_IsString(seed));
    assert_string_equal(seed->valuestring, "18446744073709551615");
    assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(doc, "count")));
    /* the keys in the table's order */
    const char *order[] = {"count", "rate", "seed", "bytes", "fast", "seq"};
    const cJSON *it = doc->child;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++, it = it->next) {
        assert_non_null(it);
        assert_string_equal(it->string, order[i]);
    }
    assert_null(it);
    cJSON_Delete(doc);
    /* it reads back as the same settings */
    opts b = defaults();
    b.fast = 1;
    st_error err = {0};
    assert_int_equal(apply_text(text, &b, &err), ST_OK);
    free(text);
    assert_int_equal(b.count, 42);
    assert_true(b.rate == 0.3);
    assert_true(b.seed == UINT64_MAX);
    assert_int_equal(b.bytes, 3 << 20);
    assert_int_equal(b.fast, 0);
    assert_int_equal(b.seq, 99);
}

/* The shared model shape flags feed cli_model_config. */
typedef struct shape_opts {
    cli_model_flags shape;
} shape_opts;
#define SHAPE(field) offsetof(shape_opts, shape.field)
static const cli_flag shape_flags[] = {CLI_MODEL_SHAPE_FLAGS(SHAPE), CLI_SEQ_FLAG(SHAPE(seq))};
static const cli_spec shape_spec = {.command = "shape", .usage = "", .flags = shape_flags,
                                    .n_flags = CLI_COUNT(shape_flags)};

static void test_model_shape_flags(void **state) {
    (void)state;
    shape_opts o = {.shape = {.seq = 256}};
    cli_parsed p;
    st_error err = {0};
    char *argv[] = {"shape", "--n-layer", "2", "--n-head", "4", "--d-model", "64", "--seq", "32", "--vocab", "101"};
    assert_int_equal(cli_flags_scan(&shape_spec, 11, argv, &p, &err), ST_OK);
    assert_int_equal(cli_flags_apply(&shape_spec, &p, &o, &err), ST_OK);
    gpt_config cfg;
    assert_int_equal(cli_model_config(&o.shape, &cfg, &err), ST_OK);
    assert_int_equal(cfg.n_layer, 2);
    assert_int_equal(cfg.n_head, 4);
    assert_int_equal(cfg.d_model, 64);
    assert_int_equal(cfg.n_ctx, 32);   /* --n-ctx defaults to --seq */
    assert_int_equal(cfg.vocab_size, 101);
    char *named[] = {"shape", "--model", "gpt2-tiny"};
    o = (shape_opts){.shape = {.seq = 256}};
    assert_int_equal(cli_flags_scan(&shape_spec, 3, named, &p, &err), ST_OK);
    assert_int_equal(cli_flags_apply(&shape_spec, &p, &o, &err), ST_OK);
    assert_string_equal(o.shape.model, "gpt2-tiny");
    assert_int_equal(cli_model_config(&o.shape, &cfg, &err), ST_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_type),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_equals_form),
        cmocka_unit_test(test_missing_value),
        cmocka_unit_test(test_unknown_flag),
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_given),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_config_file),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_config_then_flags),
        cmocka_unit_test(test_format_round_trip),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_settings_json),
        cmocka_unit_test(test_model_shape_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
