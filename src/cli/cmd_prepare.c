/* cmd_prepare.c - `strata prepare`: text files and directories to a tokenized
 * dataset (train.tok, val.tok, meta.json) for `strata train`. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_flags.h"
#include "strata/data.h"

typedef struct prepare_opts {
    const char *out, *tokenizer;
    double val_fraction;
    int overwrite, allow_special;
} prepare_opts;

#define O(field) offsetof(prepare_opts, field)
static const cli_flag prepare_flags[] = {
    CLI_STRING("out", O(out), "DIR", "where the dataset goes (created if missing)"),
    CLI_STRING("tokenizer", O(tokenizer), "FILE|DIR",
               "a Hugging Face tokenizer.json, or a model directory holding\n"
               "one (default: GPT-2's vocabulary)"),
    CLI_DOUBLE("val-fraction", O(val_fraction), 1e-6, 0.5, "F", "share of tokens for validation, in (0, 0.5] (default 0.1)"),
    CLI_ON("overwrite", O(overwrite), "replace a dataset already in DIR"),
    CLI_ON("allow-special", O(allow_special),
           "special tokens written in the input (<|endoftext|>, ...)\n"
           "become their ids (default: plain text)"),
};

static const cli_spec prepare_spec = {
    .command = "prepare",
    .usage = "usage: strata prepare INPUT... --out DIR [flags]",
    .about = "Tokenizes text files, and the text files found in directories (recursively,\n"
             "in sorted order; hidden, empty and binary files are skipped), with GPT-2's\n"
             "tokenizer or --tokenizer's into DIR/train.tok and DIR/val.tok (see\n"
             "docs/FORMATS.md). Each file is one document, preceded by the document\n"
             "separator (GPT-2: <|endoftext|>; Llama 3: <|begin_of_text|>). The token\n"
             "stream is cut into blocks and an evenly spread share of them becomes the\n"
             "validation split. DIR/meta.json records the tokenizer and its fingerprint.",
    .epilogue = "GPT-2's vocabulary is read from $STRATA_VOCAB_DIR or vocab/ (scripts/fetch_vocab.sh).",
    .flags = prepare_flags,
    .n_flags = CLI_COUNT(prepare_flags),
    .takes_args = 1,
};

typedef struct progress {
    int tty;
    double t0, last_draw;
    int last_decile;
} progress;

static void fmt_eta(double s, char *buf, size_t n) {
    if (s < 0 || s > 359999) snprintf(buf, n, "--:--");
    else if (s >= 3600) snprintf(buf, n, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
    else snprintf(buf, n, "%d:%02d", (int)s / 60, (int)s % 60);
}

static void on_progress(void *ctx, uint64_t done, uint64_t total, uint64_t tokens) {
    progress *p = ctx;
    double now = st_now(), el = now - p->t0;
    double frac = total ? (double)done / (double)total : 1.0;
    double mbs = el > 0 ? (double)done / 1e6 / el : 0;
    char eta[32];
    fmt_eta(mbs > 0 ? ((double)(total - done) / 1e6) / mbs : -1, eta, sizeof eta);
    if (p->tty) {
        if (now - p->last_draw < 0.1 && done < total) return;   /* redraw at most 10 times a second */
        p->last_draw = now;
        char bar[31];
        int fill = (int)(frac * 30);
        for (int k = 0; k < 30; k++) bar[k] = k < fill ? '#' : '.';
        bar[30] = 0;
        printf("\rprepare [%s] %3.0f%%  %.1f/%.1f MB  %.1f MB/s  ETA %s  %.2fM tokens \033[K", bar, frac * 100,
               (double)done / 1e6, (double)total / 1e6, mbs, eta, (double)tokens / 1e6);
        fflush(stdout);
    } else {
        int decile = (int)(frac * 10);
        if (decile <= p->last_decile && done < total) return;
        p->last_decile = decile;
        printf("prepare: %3.0f%%  %.1f/%.1f MB  %.1f MB/s  ETA %s  %" PRIu64 " tokens\n", frac * 100,
               (double)done / 1e6, (double)total / 1e6, mbs, eta, tokens);
        fflush(stdout);
    }
}

int cmd_prepare(int argc, char **argv) {
    prepare_opts po = {0};
    cli_parsed flags;
    int parsed = cli_parse_flags(&prepare_spec, argc, argv, &po, &flags);
    if (parsed != CLI_PARSED) return parsed;
    if (!po.out) return cli_usage_error("prepare", "--out DIR is required");
    if (!flags.n_args) return cli_usage_error("prepare", "no input files or directories");
    dataset_prepare_opts o = {.inputs = (const char *const *)flags.args, .n_inputs = (size_t)flags.n_args,
                              .out_dir = po.out, .val_fraction = po.val_fraction, .overwrite = po.overwrite,
                              .encode_flags = po.allow_special ? TOKENIZER_ALLOW_SPECIAL : 0};
    st_error err = {0};

    tokenizer *tok;
    if (tokenizer_load_path(&tok, po.tokenizer, &err) != ST_OK) return cli_fail(&err);
    progress p = {cli_stdout_is_tty(), st_now(), 0, -1};
    o.progress = on_progress;
    o.progress_ctx = &p;
    dataset_prepare_result r;
    st_status st = dataset_prepare(tok, &o, &r, &err);
    tokenizer_free(tok);
    if (p.tty) printf("\n");
    if (st) return cli_fail(&err);
    double el = st_now() - p.t0;
    char size[32];
    printf("prepared %s: %" PRIu64 " files (%s of text", o.out_dir, r.files, st_format_bytes((double)r.bytes, size, sizeof size));
    if (r.skipped) printf(", %" PRIu64 " skipped", r.skipped);
    printf(") -> %" PRIu64 " training + %" PRIu64 " validation tokens in %.1f s (%.1f MB/s)\n", r.train_tokens,
           r.val_tokens, el, el > 0 ? (double)r.bytes / 1e6 / el : 0);
    return 0;
}
