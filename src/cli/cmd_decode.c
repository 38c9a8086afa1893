/* cmd_decode.c - `strata decode`: token ids (stdin or a token file) to text. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_flags.h"
#include "strata/data.h"
#include "strata/tokenizer.h"

typedef struct decode_opts {
    const char *tokens, *data_format, *tokenizer;
    uint64_t start, count;
} decode_opts;

#define O(field) offsetof(decode_opts, field)
static const cli_flag decode_flags[] = {
    CLI_STRING("tokens", O(tokens), "FILE", "decode this token file"),
    CLI_STRING("tokenizer", O(tokenizer), "FILE|DIR",
               "a Hugging Face tokenizer.json, or a model directory holding\n"
               "one (default: GPT-2's vocabulary)"),
    CLI_DATA_FORMAT_FLAG(O(data_format)),
    CLI_U64("start", O(start), "N", "first token to decode (default 0)"),
    CLI_U64("count", O(count), "N", "number of tokens (default: to the end)"),
};

static const cli_spec decode_spec = {
    .command = "decode",
    .usage = "usage: strata decode [--tokenizer FILE|DIR] < ids > text\n"
             "       strata decode [--tokenizer FILE|DIR] --tokens FILE [--start N] [--count N]",
    .about = "Reads token ids separated by spaces, newlines or commas (brackets are\n"
             "ignored, so a JSON list works) and writes the text they stand for, byte\n"
             "for byte. With --tokens, decodes a token file instead (a shard from\n"
             "'strata prepare' or a nanoGPT .bin).",
    .flags = decode_flags,
    .n_flags = CLI_COUNT(decode_flags),
};

static int put_token(const tokenizer *tok, int32_t id, const char *where, uint64_t pos) {
    size_t len;
    const char *b = tokenizer_token_bytes(tok, id, &len);
    if (!b) return cli_error("%s: token %" PRIu64 " is %d, outside the vocabulary [0, %d) of %s", where, pos, id,
                             tokenizer_vocab_size(tok), tokenizer_source(tok));
    fwrite(b, 1, len, stdout);
    return 0;
}

static int decode_stdin(const tokenizer *tok) {
    uint64_t pos = 0;
    char word[32];
    size_t wl = 0;
    for (;;) {
        int ch = getchar();
        if (ch != EOF && (isdigit(ch) || ch == '-' || ch == '+')) {
            if (wl + 1 >= sizeof word) return cli_error("stdin: token %" PRIu64 " is not a token id", pos);
            word[wl++] = (char)ch;
            continue;
        }
        if (ch != EOF && !isspace(ch) && ch != ',' && ch != '[' && ch != ']')
            return cli_error("stdin: unexpected character '%c' at token %" PRIu64 " (expected token ids)", ch, pos);
        if (wl) {
            word[wl] = 0;
            char *end;
            errno = 0;
            long v = strtol(word, &end, 10);
            if (*end || errno || v < INT32_MIN || v > INT32_MAX)
                return cli_error("stdin: '%s' at token %" PRIu64 " is not a token id", word, pos);
            if (put_token(tok, (int32_t)v, "stdin", pos)) return 1;
            pos++;
            wl = 0;
        }
        if (ch == EOF) break;
    }
    if (ferror(stdin)) return cli_error("stdin: %s", strerror(errno));
    return 0;
}

static int decode_file(const tokenizer *tok, const char *path, token_format format, uint64_t start,
                       uint64_t count, int has_count) {
    st_error err = {0};
    token_file *tf;
    if (token_file_open(&tf, path, format, &err) != ST_OK) return cli_fail(&err);
    uint64_t n = token_file_count(tf);
    if (start > n) {
        token_file_close(tf);
        return cli_error("%s: --start %" PRIu64 " is past the end (%" PRIu64 " tokens)", path, start, n);
    }
    uint64_t end = has_count && count < n - start ? start + count : n;
    enum { CHUNK = 1 << 16 };
    int32_t *buf = malloc(CHUNK * sizeof *buf);
    int rc = buf ? 0 : cli_error("out of memory");
    for (uint64_t pos = start; pos < end && !rc; pos += CHUNK) {
        size_t m = end - pos < CHUNK ? (size_t)(end - pos) : CHUNK;
        if (token_file_read(tf, pos, m, buf, tokenizer_vocab_size(tok), &err) != ST_OK) rc = cli_fail(&err);
        for (size_t k = 0; k < m && !rc; k++) rc = put_token(tok, buf[k], path, pos + k);
    }
    free(buf);
    token_file_close(tf);
    return rc;
}

int cmd_decode(int argc, char **argv) {
    decode_opts o = {.data_format = "auto"};
    cli_parsed flags;
    int parsed = cli_parse_flags(&decode_spec, argc, argv, &o, &flags);
    if (parsed != CLI_PARSED) return parsed;
    const char *path = o.tokens;
    const int has_count = cli_flag_given(&decode_spec, &flags, "count");
    if (!path && (o.start || has_count)) return cli_usage_error("decode", "--start and --count need --tokens FILE");
    st_error err = {0};
    token_format format;
    if (token_format_parse(o.data_format, &format, &err) != ST_OK) return cli_usage_error("decode", "--%s", err.msg);

    tokenizer *tok;
    if (tokenizer_load_path(&tok, o.tokenizer, &err) != ST_OK) return cli_fail(&err);
    int rc = path ? decode_file(tok, path, format, o.start, o.count, has_count) : decode_stdin(tok);
    tokenizer_free(tok);
    if (fflush(stdout) != 0 || ferror(stdout)) return rc ? rc : cli_error("stdout: %s", strerror(errno));
    return rc;
}
