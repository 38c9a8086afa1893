/* cmd_encode.c - `strata encode`: text on stdin to GPT-2 token ids on stdout. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "strata/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f, "usage: strata encode [--allow-special] < text > ids\n\n"
               "Reads text (any bytes) on stdin and prints its GPT-2 token ids, separated by\n"
               "spaces, on one line. 'strata decode' reverses it exactly.\n\n"
               "  --allow-special  encode the literal text <|endoftext|> as token 50256\n"
               "                   (default: plain text, as OpenAI's and the JS encoder do)\n"
               "  --count          print only the number of tokens\n\n"
               "The vocabulary is read from $STRATA_VOCAB_DIR or vocab/ (scripts/fetch_vocab.sh).\n");
}

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
    static const struct option longopts[] = {
        {"allow-special", no_argument, NULL, 's'}, {"count", no_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'}, {0}};
    unsigned flags = 0;
    int count_only = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 's': flags |= GPT2_ALLOW_SPECIAL; break;
        case 'c': count_only = 1; break;
        case 'h': usage(stdout); return 0;
        default: return cli_usage_error("encode", "unknown flag");
        }
    }
    if (optind < argc) return cli_usage_error("encode", "unexpected argument '%s' (the text comes on stdin)", argv[optind]);

    st_error err = {0};
    gpt2_tokenizer *tok;
    if (gpt2_tokenizer_load_default(&tok, &err) != ST_OK) return cli_fail(&err);
    char *text;
    size_t len;
    if (read_stdin(&text, &len) != 0) {
        gpt2_tokenizer_free(tok);
        return cli_error("stdin: %s", strerror(errno));
    }
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    st_status st = gpt2_encode_append(tok, text, len, flags, &ids, &n, &cap, &err);
    free(text);
    gpt2_tokenizer_free(tok);
    if (st) {
        free(ids);
        return cli_fail(&err);
    }
    if (count_only) {
        printf("%zu\n", n);
    } else {
        for (size_t k = 0; k < n; k++) printf(k ? " %d" : "%d", ids[k]);
        putchar('\n');
    }
    free(ids);
    if (fflush(stdout) != 0 || ferror(stdout)) return cli_error("stdout: %s", strerror(errno));
    return 0;
}
