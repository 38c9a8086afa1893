/* test_data_tokenizer.c - the C GPT-2 tokenizer against the JavaScript
 * encoder's vectors (tests/fixtures/tokenizer_vectors.tsv), byte round trips
 * (invalid UTF-8 included), the pre-split rules, special tokens and errors.
 * Needs vocab/ (scripts/setup.sh runs scripts/fetch_vocab.sh); fails, not
 * skips, when it is missing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>

#include "data/tokenizer_internal.h"
#include "strata/tokenizer.h"

static tokenizer *tok;

static int load_tokenizer(void **state) {
    (void)state;
    st_error err = {0};
    if (tokenizer_load_default(&tok, &err) != ST_OK) {
        fprintf(stderr, "test_data_tokenizer: cannot load the GPT-2 vocabulary: %s\n", err.msg);
        return -1;   /* cmocka reports the group setup as failed */
    }
    return 0;
}

static int free_tokenizer(void **state) {
    (void)state;
    tokenizer_free(tok);
    return 0;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Encodes bytes and checks that decoding gives them back; returns the ids. */
static int32_t *encode_roundtrip(const char *text, size_t len, size_t *n) {
    st_error err = {0};
    int32_t *ids;
    assert_int_equal(tokenizer_encode(tok, text, len, &ids, n, &err), ST_OK);
    char *back;
    size_t blen;
    assert_int_equal(tokenizer_decode(tok, ids, *n, &back, &blen, &err), ST_OK);
    assert_int_equal(blen, len);
    assert_memory_equal(back, text, len);
    free(back);
    return ids;
}

static void test_matches_js_vectors(void **state) {
    (void)state;
    const char *path = STRATA_SOURCE_DIR "/tests/fixtures/tokenizer_vectors.tsv";
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, cases = 0, tokens = 0, failures = 0;
    ssize_t got;
    while ((got = getline(&line, &cap, f)) > 0) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char *tab1 = strchr(line, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        assert_non_null(tab2);
        *tab1 = 0;
        size_t hexlen = strcspn(tab1 + 1, "\t");
        assert_true(hexlen % 2 == 0);
        char *text = malloc(hexlen / 2 + 1);
        for (size_t k = 0; k < hexlen / 2; k++)
            text[k] = (char)(hexval(tab1[1 + 2 * k]) * 16 + hexval(tab1[2 + 2 * k]));
        size_t want_cap = 16, n_want = 0;
        int32_t *want = malloc(want_cap * sizeof *want);
        for (char *p = tab2 + 1; *p && *p != '\n';) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p) break;
            if (n_want == want_cap) want = realloc(want, (want_cap *= 2) * sizeof *want);
            want[n_want++] = (int32_t)v;
            p = end;
        }
        size_t n;
        int32_t *ids = encode_roundtrip(text, hexlen / 2, &n);
        size_t k = 0;
        while (k < n && k < n_want && ids[k] == want[k]) k++;
        if (k != n || n != n_want) {
            if (failures++ < 10)
                fprintf(stderr, "case %s: %zu ids, want %zu; first difference at id %zu (got %d, want %d)\n", line,
                        n, n_want, k, k < n ? ids[k] : -1, k < n_want ? want[k] : -1);
        }
        cases++;
        tokens += n_want;
        free(ids);
        free(want);
        free(text);
    }
    free(line);
    fclose(f);
    assert_true(cases > 500);
    assert_true(tokens > 50000);
    assert_int_equal(failures, 0);
}

/* Any bytes survive encode then decode: random bytes, ASCII with stray high
 * bytes, truncated and overlong sequences, surrogates, values past U+10FFFF. */
static void test_any_bytes_round_trip(void **state) {
    (void)state;
    st_rng rng;
    st_rng_seed(&rng, 7);
    static const char *nasty[] = {
        "\xff", "\xfe\xff", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xed\xa0\x80", "\xed\xbf\xbf", "\xf4\x90\x80\x80",
        "\xf5\x80\x80\x80", "\xf8\x88\x80\x80\x80", "\xe2\x82", "\xf0\x9f\x98", "\x80", "\xbf\xbf", "\xc3",
        "a\xe2\x82\xac" "b", "\xe2\x82\xac\xe2\x82", " \xff\xfe!", "'\xffs", "\xc2\xa0\xc2", "1\xff" "2",
    };
    for (size_t i = 0; i < sizeof nasty / sizeof nasty[0]; i++) {
        size_t n;
        free(encode_roundtrip(nasty[i], strlen(nasty[i]), &n));
    }
    static const char shards[] = "a \n'\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xed\xa0";
    char buf[600];
    for (int round = 0; round < 3000; round++) {
        size_t len = st_rng_next(&rng) % sizeof buf;
        int mode = round % 3;
        for (size_t k = 0; k < len; k++) {
            uint64_t r = st_rng_next(&rng);
            if (mode == 0) buf[k] = (char)r;                                        /* any byte */
            else if (mode == 1) buf[k] = (char)(r % 16 ? 32 + r % 95 : 128 + (r >> 8) % 128);   /* mostly ASCII */
            else buf[k] = shards[r % (sizeof shards - 1)];                           /* pieces of UTF-8 */
        }
        size_t n;
        free(encode_roundtrip(buf, len, &n));
    }
}

/* Splits text and compares the pieces with the expected ones, given as a
 * list of strings ending with NULL. */
static void check_split(const char *text, size_t len, ...) {
    size_t ends[64];
    size_t n = tokenizer_pretokenize(tok, text, len, ends, 64);
    va_list ap;
    va_start(ap, len);
    size_t start = 0, k = 0;
    const char *want;
    while ((want = va_arg(ap, const char *))) {
        assert_true(k < n);
        size_t wl = strlen(want);
        if (ends[k] - start != wl || memcmp(text + start, want, wl))
            fail_msg("piece %zu of \"%s\": got \"%.*s\", want \"%s\"", k, text, (int)(ends[k] - start), text + start,
                     want);
        start = ends[k++];
    }
    va_end(ap);
    assert_int_equal(k, n);
    assert_int_equal(start, len);
}

#define SPLIT(s, ...) check_split(s, sizeof(s) - 1, __VA_ARGS__, NULL)

static void test_pre_split_rules(void **state) {
    (void)state;
    SPLIT("Hello world", "Hello", " world");
    SPLIT("I'm here's", "I", "'m", " here", "'s");
    SPLIT("a   b", "a", "  ", " b");              /* \s+(?!\S) leaves the last space to the word */
    SPLIT("a \tb", "a", " ", "\t", "b");          /* a tab is not the optional space */
    SPLIT("x  ", "x", "  ");                      /* trailing run taken whole */
    SPLIT("1234 56", "1234", " 56");
    SPLIT("?!' x", "?!'", " x");
    SPLIT("''s", "''", "s");
    SPLIT("\xc3\xa9t\xc3\xa9 \xe4\xb8\xad", "\xc3\xa9t\xc3\xa9", " \xe4\xb8\xad");
    /* Invalid UTF-8: each bad byte is one [^\s\p{L}\p{N}] character. */
    SPLIT("a\xff" "b", "a", "\xff", "b");
    SPLIT(" \xff\xfe!x", " \xff\xfe!", "x");
    SPLIT("\xe2\x82" "a", "\xe2\x82", "a");       /* truncated euro sign */
    SPLIT("\xed\xa0\x80" "1", "\xed\xa0\x80", "1"); /* encoded surrogate */
    SPLIT("\xc0\xa0 x", "\xc0\xa0", " x");        /* overlong space is not a space */
    SPLIT("a\xc2\xa0 b", "a", "\xc2\xa0", " b");  /* U+00A0 is \s */
}

static void test_special_token(void **state) {
    (void)state;
    st_error err = {0};
    const char *text = "a<|endoftext|>b<|endoftext|>";
    int32_t *ids = NULL, *plain;
    size_t n = 0, cap = 0, n_plain;
    assert_int_equal(tokenizer_encode_append(tok, text, strlen(text), TOKENIZER_ALLOW_SPECIAL, &ids, &n, &cap, &err), ST_OK);
    assert_int_equal(n, 4);
    assert_int_equal(ids[0], 64);            /* "a" */
    assert_int_equal(ids[1], GPT2_EOT);
    assert_int_equal(ids[2], 65);            /* "b" */
    assert_int_equal(ids[3], GPT2_EOT);
    assert_int_equal(tokenizer_encode(tok, text, strlen(text), &plain, &n_plain, &err), ST_OK);
    for (size_t k = 0; k < n_plain; k++) assert_int_not_equal(plain[k], GPT2_EOT);
    assert_true(n_plain > 4);
    char *back;
    size_t blen;
    assert_int_equal(tokenizer_decode(tok, ids, n, &back, &blen, &err), ST_OK);
    assert_string_equal(back, text);
    free(back);
    free(plain);
    free(ids);
}

static void test_decode_rejects_bad_ids(void **state) {
    (void)state;
    st_error err = {0};
    int32_t ids[] = {15496, GPT2_VOCAB_SIZE};
    char *text;
    size_t len;
    assert_int_equal(tokenizer_decode(tok, ids, 2, &text, &len, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "token 1 is 50257"));
    int32_t neg[] = {-1};
    assert_int_equal(tokenizer_decode(tok, neg, 1, &text, &len, &err), ST_EINVAL);
    size_t l;
    assert_null(tokenizer_token_bytes(tok, GPT2_VOCAB_SIZE, &l));
    assert_non_null(tokenizer_token_bytes(tok, GPT2_EOT, &l));
    assert_int_equal(l, strlen(GPT2_EOT_TEXT));
}

/* More distinct words than the cache holds: results must not depend on what
 * was cached or cleared. */
static void test_cache_overflow_is_invisible(void **state) {
    (void)state;
    st_rng rng;
    st_rng_seed(&rng, 11);
    size_t words = 80000, len = 0;
    char *text = malloc(words * 12);
    for (size_t w = 0; w < words; w++) {
        text[len++] = ' ';
        int wl = 2 + (int)(st_rng_next(&rng) % 8);
        for (int k = 0; k < wl; k++) text[len++] = (char)('a' + st_rng_next(&rng) % 26);
    }
    st_error err = {0};
    tokenizer *fresh;
    assert_int_equal(tokenizer_load_default(&fresh, &err), ST_OK);
    int32_t *a, *b, *c;
    size_t na, nb, nc;
    assert_int_equal(tokenizer_encode(tok, text, len, &a, &na, &err), ST_OK);
    assert_int_equal(tokenizer_encode(tok, text, len, &b, &nb, &err), ST_OK);        /* warm, partly cleared cache */
    size_t cut = len / 2;
    while (text[cut] != ' ') cut--;   /* a word boundary: the prefix encodes as a prefix */
    assert_int_equal(tokenizer_encode(fresh, text, cut, &c, &nc, &err), ST_OK);   /* other cache state */
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof *a);
    assert_true(nc < na);
    assert_memory_equal(a, c, nc * sizeof *a);
    free(a); free(b); free(c); free(text);
    tokenizer_free(fresh);
}

static void write_file(const char *path, const char *data) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(data, f);
    fclose(f);
}

static void test_load_errors_name_the_file(void **state) {
    (void)state;
    st_error err = {0};
    tokenizer *t = NULL;
    char dir[] = "/tmp/strata_tok_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char enc[128], bpe[128];
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", dir);

    assert_int_equal(tokenizer_load_gpt2(&t, enc, bpe, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, enc));
    assert_null(t);

    write_file(enc, "{\"a\": 0, \"b\" 1}");
    assert_int_equal(tokenizer_load_gpt2(&t, enc, bpe, &err), ST_ECORRUPT);
    assert_non_null(strstr(err.msg, enc));

    /* a tiny but valid encoder lacks most bytes */
    write_file(enc, "{\"a\": 0, \"b\": 1, \"ab\": 2}");
    write_file(bpe, "#version: 0.2\na b\n");
    assert_int_equal(tokenizer_load_gpt2(&t, enc, bpe, &err), ST_ECORRUPT);
    assert_non_null(strstr(err.msg, "byte 0x00"));

    /* $STRATA_VOCAB_DIR pointing at nothing is an error that says so */
    const char *old = getenv("STRATA_VOCAB_DIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("STRATA_VOCAB_DIR", "/nonexistent/vocab", 1);
    assert_int_equal(tokenizer_load_default(&t, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/vocab"));
    if (saved) setenv("STRATA_VOCAB_DIR", saved, 1);
    else unsetenv("STRATA_VOCAB_DIR");
    free(saved);

    unlink(enc);
    unlink(bpe);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_js_vectors),
        cmocka_unit_test(test_any_bytes_round_trip),
        cmocka_unit_test(test_pre_split_rules),
        cmocka_unit_test(test_special_token),
        cmocka_unit_test(test_decode_rejects_bad_ids),
        cmocka_unit_test(test_cache_overflow_is_invisible),
        cmocka_unit_test(test_load_errors_name_the_file),
    };
    return cmocka_run_group_tests(tests, load_tokenizer, free_tokenizer);
}
