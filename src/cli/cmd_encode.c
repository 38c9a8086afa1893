/* cmd_encode.c - `strata encode`: text on stdin to token ids on stdout. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_flags.h"
#include "strata/tokenizer.h"

typedef struct encode_opts {
    const char *tokenizer;
    int allow_special, count;
} encode_opts;

static const cli_flag encode_flags[] = {
    CLI_STRING("tokenizer", offsetof(encode_opts, tokenizer), "FILE|DIR",
               "a Hugging Face tokenizer.json, or a model directory holding\n"
               "one (default: GPT-2's vocabulary)"),
    CLI_ON("allow-special", offsetof(encode_opts, allow_special),
           "encode special tokens written in the text (<|endoftext|>,\n"
           "<|begin_of_text|>, ...) as their ids, as Hugging Face's library\n"
           "does (default: plain text, as OpenAI's encoder does)"),
    CLI_ON("count", offsetof(encode_opts, count), "print only the number of tokens"),
};

static const cli_spec encode_spec = {
    .command = "encode",
    .usage = "usage: strata encode [--tokenizer FILE|DIR] [--allow-special] < text > ids",
    .about = "Reads text (any bytes) on stdin and prints its token ids, separated by spaces,\n"
             "on one line. 'strata decode' with the same tokenizer reverses it exactly.",
    .epilogue = "GPT-2's vocabulary is read from $STRATA_VOCAB_DIR or vocab/ (scripts/fetch_vocab.sh).",
    .flags = encode_flags,
    .n_flags = CLI_COUNT(encode_flags),
    .takes_args = 1,   /* to say where the text comes from */
};

/* Reads all of stdin; *buf is malloc'd. */
static int read_stdin(char **buf, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    if (!b) return -1;
    for (;;) {
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) { free(b); errno = ENOMEM; return -1; }
            b = nb;
        }
        size_t got = fread(b + n, 1, cap - n, stdin);
        n += got;
        if (got == 0) break;
    }
    if (ferror(stdin)) { free(b); return -1; }
    *buf = b;
    *len = n;
    return 0;
}

int cmd_encode(int argc, char **argv) {
    encode_opts o = {0};
    cli_parsed flags;
    int parsed = cli_parse_flags(&encode_spec, argc, argv, &o, &flags);
    if (parsed != CLI_PARSED) return parsed;
    if (flags.n_args) return cli_usage_error("encode", "unexpected argument '%s' (the text comes on stdin)", flags.args[0]);
    const unsigned enc_flags = o.allow_special ? TOKENIZER_ALLOW_SPECIAL : 0;

    st_error err = {0};
    tokenizer *tok;
    if (tokenizer_load_path(&tok, o.tokenizer, &err) != ST_OK) return cli_fail(&err);
    char *text;
    size_t len;
    if (read_stdin(&text, &len) != 0) {
        tokenizer_free(tok);
        return cli_error("stdin: %s", strerror(errno));
    }
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    st_status st = tokenizer_encode_append(tok, text, len, enc_flags, &ids, &n, &cap, &err);
    free(text);
    tokenizer_free(tok);
    if (st) {
        free(ids);
        return cli_fail(&err);
    }
    if (o.count) {
        printf("%zu\n", n);
    } else {
        for (size_t k = 0; k < n; k++) printf(k ? " %d" : "%d", ids[k]);
        putchar('\n');
    }
    free(ids);
    if (fflush(stdout) != 0 || ferror(stdout)) return cli_error("stdout: %s", strerror(errno));
    return 0;
}
