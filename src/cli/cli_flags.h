/*
 * cli_flags.h - the one way a command reads its command line: a table of its
 * flags (name, value type and range, where the value goes in the command's
 * options struct, help), parsed by cli_parse_flags. Because every value
 * lands at an offset of a plain struct, the same table also applies a JSON
 * config file, formats values as text and writes the settings as JSON
 * (what `strata train` records in run.json and reads back on --resume).
 */
#ifndef STRATA_CLI_FLAGS_H
#define STRATA_CLI_FLAGS_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>

#include "strata/base.h"

struct cJSON;

typedef enum cli_type {
    CLI_TYPE_STRING,   /* const char *: the text given (it points into argv or the config document) */
    CLI_TYPE_INT,      /* long in [min, max] */
    CLI_TYPE_DOUBLE,   /* double in [min, max] */
    CLI_TYPE_U64,      /* uint64_t: any non-negative integer */
    CLI_TYPE_SIZE,     /* uint64_t bytes: 4096, 512K, 2G (cli_parse_size) */
    CLI_TYPE_ON,       /* int set to 1; takes no value */
    CLI_TYPE_OFF,      /* int set to 0; takes no value: the negation of a CLI_TYPE_ON flag on the same field */
} cli_type;

typedef struct cli_flag {
    const char *name;      /* the long name, without "--" */
    cli_type type;
    size_t offset;         /* where the value goes: offsetof(the command's options, field) */
    double min, max;       /* the range of CLI_TYPE_INT and CLI_TYPE_DOUBLE */
    const char *metavar;   /* what the help calls the value ("N", "FILE"); NULL for on/off flags */
    const char *help;      /* one line, or several separated by '\n' */
    char short_name;       /* a one-letter alias ('v' for -v), or 0 */
    int show_default;      /* the help adds "(default 0)" too: every other default is shown, X the value the
                              options hold before parsing, unless the help itself says "default" */
} cli_flag;

/* Table entries, one per type. */
#define CLI_STRING(name_, offset_, metavar_, help_) \
    {.name = name_, .type = CLI_TYPE_STRING, .offset = offset_, .metavar = metavar_, .help = help_}
#define CLI_INT(name_, offset_, min_, max_, metavar_, help_) \
    {.name = name_, .type = CLI_TYPE_INT, .offset = offset_, .min = min_, .max = max_, .metavar = metavar_, .help = help_}
#define CLI_DOUBLE(name_, offset_, min_, max_, metavar_, help_)                                                        \
    {.name = name_, .type = CLI_TYPE_DOUBLE, .offset = offset_, .min = min_, .max = max_, .metavar = metavar_,         \
     .help = help_}
#define CLI_U64(name_, offset_, metavar_, help_) \
    {.name = name_, .type = CLI_TYPE_U64, .offset = offset_, .metavar = metavar_, .help = help_}
#define CLI_SIZE(name_, offset_, metavar_, help_) \
    {.name = name_, .type = CLI_TYPE_SIZE, .offset = offset_, .metavar = metavar_, .help = help_}
#define CLI_ON(name_, offset_, help_) {.name = name_, .type = CLI_TYPE_ON, .offset = offset_, .help = help_}
#define CLI_OFF(name_, offset_, help_) {.name = name_, .type = CLI_TYPE_OFF, .offset = offset_, .help = help_}

/* Flags several commands share, with one meaning, range and help. */

/* The model's shape (train, simulate, plan), read by cli_model_config:
 * OFFSET(field) is the offset of that cli_model_flags field in the options. */
#define CLI_MODEL_SHAPE_FLAGS(OFFSET)                                                                   \
    CLI_STRING("model", OFFSET(model), "NAME", "model shape by name (default gpt2-124m; see Models below)"), \
    CLI_INT("n-layer", OFFSET(n_layer), 1, INT_MAX, "N", "explicit shape: layers"),                     \
    CLI_INT("n-head", OFFSET(n_head), 1, INT_MAX, "N", "explicit shape: attention heads"),              \
    CLI_INT("d-model", OFFSET(d_model), 1, INT_MAX, "N", "explicit shape: width"),                      \
    CLI_INT("n-ctx", OFFSET(n_ctx), 1, INT_MAX, "N", "longest sequence the model supports (default: --seq)"), \
    CLI_INT("vocab", OFFSET(vocab), 1, INT_MAX, "N", "vocabulary size (default 50257, GPT-2's)"),         \
    CLI_STRING("arch", OFFSET(arch), "A", "explicit shape: gpt2 (default) or llama"),                       \
    CLI_INT("n-kv-head", OFFSET(n_kv_head), 1, INT_MAX, "N", "explicit Llama shape: key/value heads (default: --n-head)"), \
    CLI_INT("d-ff", OFFSET(d_ff), 1, INT_MAX, "N", "explicit Llama shape: the MLP's width (intermediate_size)"),           \
    CLI_INT("tied", OFFSET(tied), 0, 1, "0|1", "explicit Llama shape: 1 ties the head to the embedding (default 0: untied)"),     \
    CLI_DOUBLE("norm-eps", OFFSET(norm_eps), 0, 1, "X", "explicit Llama shape: RMSNorm epsilon (default 1e-5)"),         \
    CLI_DOUBLE("rope-theta", OFFSET(rope_theta), 0, 1e12, "X", "explicit Llama shape: rotary base (default 10000)"),     \
    CLI_STRING("rope-scaling", OFFSET(rope_scaling), "S",                                                   \
               "explicit Llama shape: none (default) or llama3:FACTOR,LOW,HIGH,ORIGINAL\n"                  \
               "(Llama 3.1's rope_scaling)")
/* Tokens per training sequence (train, simulate, plan, probe): a long. */
#define CLI_SEQ_FLAG(offset_)                                                                            \
    {.name = "seq", .type = CLI_TYPE_INT, .offset = offset_, .min = 1, .max = 1 << 20, .metavar = "T", \
     .help = "tokens per sequence", .show_default = 1}
/* Compute threads (train, eval, sample): a long, 0 when not given. As many
 * as any machine has: train records its thread count and reads it back. */
#define CLI_THREADS_FLAG(offset_) CLI_INT("threads", offset_, 1, 1 << 16, "N", "compute threads (default: all cores)")
/* A hardware description (train, simulate, plan). */
#define CLI_HW_FLAG(offset_) \
    CLI_STRING("hw", offset_, "FILE", "hardware description (JSON; 'strata probe' writes this machine's)")
/* The attention heads of a weights file (eval, sample): a long, 0 when not given. */
#define CLI_WEIGHTS_N_HEAD_FLAG(offset_) \
    CLI_INT("n-head", offset_, 1, 4096, "N", "attention heads (default: config.json beside the model, else d_model/64)")
/* How a token file without a strata shard header is read (train, eval,
 * decode): a string for token_format_parse, "auto" by default. */
#define CLI_DATA_FORMAT_FLAG(offset_)                                                     \
    CLI_STRING("data-format", offset_, "F",                                               \
               "auto (default): a strata shard, or raw uint16 ids if the file is\n"      \
               "named *.bin (nanoGPT's); u16: raw uint16 ids whatever the name")

#define CLI_COUNT(table) (sizeof table / sizeof table[0])
#define CLI_MAX_FLAGS 64   /* the most flags a command has (cli_parsed.given) */

/* A command's command line: its flags, whether it takes arguments, and the
 * text of its --help. */
typedef struct cli_spec {
    const char *command;      /* "train": names the command in messages */
    const char *usage;        /* the usage line(s), "usage: strata train ..." */
    const char *about;        /* what it does, printed before the flags, or NULL */
    const char *epilogue;     /* printed after the flags, or NULL */
    const cli_flag *flags;
    size_t n_flags;
    int takes_args;           /* arguments that are not flags go to the command (else: usage error) */
    const char *one_arg;      /* it takes at most one, this one ("PATH[,PATH...]"): more is a usage error */
    const char *config_help;  /* --config FILE.json is accepted, with this help line; NULL: it is not */
    int lists_models;         /* the help ends with the model names (commands with the model shape flags) */
} cli_spec;

/* What parsing a command line found besides the values it stored. */
typedef struct cli_parsed {
    unsigned char given[CLI_MAX_FLAGS];   /* given[i]: the command line set flags[i] */
    char **args;                          /* the arguments that are not flags, in order */
    int n_args;
    int help;                             /* --help or -h: nothing was stored */
    const char *config_path;              /* --config FILE, or NULL */
    struct cJSON *config;                 /* the config document (string values point into it); the caller
                                             cJSON_Deletes it when the options are no longer used */
    char **flag_words;                    /* the flags and their values, in order (cli_flags_apply) */
    int n_flag_words;
} cli_parsed;

#define CLI_PARSED (-1)   /* cli_parse_flags: run the command */

/* Parses argv[1..argc) (argv[0] is the command's name) into opts, which hold
 * the defaults: the config file first (--config, when cmd takes one), then
 * the flags in order, so that flags override the file. Flags are --name
 * VALUE, --name=VALUE, a short alias -x, and --help or -h; "--" ends them.
 * argv is reordered: flags first, then the arguments, in order.
 * Returns CLI_PARSED when the command should run; else what the command
 * returns: 0 after printing the help, 2 after a usage error
 * ("strata CMD: MSG (see 'strata CMD --help')"), 1 when the config file
 * cannot be used. opts may be NULL for a command without flags. */
int cli_parse_flags(const cli_spec *cmd, int argc, char **argv, void *opts, cli_parsed *out);

/* cli_parse_flags' steps, for what tests and commands need on their own. */

/* The command line's structure, nothing stored: unknown flags, missing
 * values, arguments where cmd takes none, --help, which flags are given. */
st_status cli_flags_scan(const cli_spec *cmd, int argc, char **argv, cli_parsed *out, st_error *err);
/* The values of the flags cli_flags_scan found, stored into opts in order. */
st_status cli_flags_apply(const cli_spec *cmd, const cli_parsed *p, void *opts, st_error *err);
/* The help: usage, about, one line per flag, epilogue; "(default X)" from opts. */
void cli_print_help(FILE *f, const cli_spec *cmd, const void *opts);

/* One flag's value from text, with the strict parsers of cli.h, into opts. */
st_status cli_flag_set(const cli_flag *f, void *opts, const char *value, st_error *err);
/* One flag's value as text: what reads back as the same value through
 * cli_flag_set ("" for an unset string; true or false for on/off). */
void cli_flag_format(const cli_flag *f, const void *opts, char *buf, size_t n);
/* Copies one flag's field from one options struct to another. */
void cli_flag_copy(const cli_flag *f, void *to, const void *from);
/* cmd's flag named name (without "--"), or NULL. */
const cli_flag *cli_flag_named(const cli_spec *cmd, const char *name);
/* Whether the command line gave the flag named name. */
int cli_flag_given(const cli_spec *cmd, const cli_parsed *p, const char *name);

/* Settings from a JSON object whose keys are the long flag names: strings
 * and numbers go through cli_flag_set, true and false set on/off flags.
 * *doc is the parsed document (string values point into it; cJSON_Delete
 * it). Messages start with the path. */
st_status cli_config_apply(const cli_spec *cmd, void *opts, const char *path, struct cJSON **doc, st_error *err);
/* The settings in opts as a JSON object under their flag names (malloc'd
 * text; NULL when out of memory), readable by cli_config_apply: every flag
 * but those named in skip, unset strings and CLI_TYPE_OFF flags (their
 * CLI_TYPE_ON flag records the field); u64 and size values as text, since a
 * JSON number (a double) cannot hold every 64-bit value. */
char *cli_settings_json(const cli_spec *cmd, const void *opts, const char *const *skip, size_t n_skip);

/* Whether name is one of list[0..n). */
int cli_name_in(const char *name, const char *const *list, size_t n);

#endif
