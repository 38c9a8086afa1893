/* test_data_tokenizer_json.c - Hugging Face tokenizer.json files against the
 * library itself: the hard cases of tests/fixtures/tokenizer_json_{gpt2,
 * llama3}.tsv (made by tools/tokenizer_reference.js with tokenizers 0.22),
 * in both special-token modes; fingerprints, BOS and the document separator;
 * the Llama 3 pre-split rules; byte round trips; and the refusals, each
 * naming the file and the part. Needs vocab/gpt2-tokenizer.json and
 * vocab/llama3-tokenizer.json (scripts/setup.sh makes them); fails, not
 * skips, when they are missing. (tests/cli/tokenizer_reference.sh compares
 * with the library on the default corpus, at test time.) */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>

#include "data/tokenizer_internal.h"
#include "strata/tokenizer.h"

static tokenizer *gpt2_json, *llama3, *gpt2_files;
static char vocab_dir[PATH_MAX];

static int load_all(void **state) {
    (void)state;
    st_error err = {0};
    char path[PATH_MAX + 64];
    if (tokenizer_find_vocab_dir(vocab_dir, sizeof vocab_dir, &err) != ST_OK ||
        tokenizer_load_default(&gpt2_files, &err) != ST_OK) {
        fprintf(stderr, "test_data_tokenizer_json: %s\n", err.msg);
        return -1;
    }
    snprintf(path, sizeof path, "%s/gpt2-tokenizer.json", vocab_dir);
    if (tokenizer_load_json(&gpt2_json, path, &err) != ST_OK) goto missing;
    snprintf(path, sizeof path, "%s/llama3-tokenizer.json", vocab_dir);
    if (tokenizer_load_json(&llama3, path, &err) != ST_OK) goto missing;
    return 0;
missing:
    fprintf(stderr, "test_data_tokenizer_json: %s (scripts/setup.sh makes it: scripts/fetch_tokenizers.sh, then "
            "node tools/make_tokenizer_json.js)\n", err.msg);
    return -1;
}

static int free_all(void **state) {
    (void)state;
    tokenizer_free(gpt2_json);
    tokenizer_free(llama3);
    tokenizer_free(gpt2_files);
    return 0;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Parses space-separated ids from p up to a tab, newline or NUL. */
static int32_t *parse_ids(char **pp, size_t *n) {
    size_t cap = 16;
    int32_t *v = malloc(cap * sizeof *v);
    char *p = *pp;
    *n = 0;
    while (*p && *p != '\t' && *p != '\n') {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p) break;
        if (*n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
        v[(*n)++] = (int32_t)x;
        p = end;
    }
    *pp = p;
    return v;
}

static size_t compare(const char *name, const char *mode, const int32_t *got, size_t n, const int32_t *want,
                      size_t n_want) {
    size_t k = 0;
    while (k < n && k < n_want && got[k] == want[k]) k++;
    if (k == n && n == n_want) return 0;
    fprintf(stderr, "case %s (%s): %zu ids, want %zu; first difference at id %zu (got %d, want %d)\n", name, mode, n,
            n_want, k, k < n ? got[k] : -1, k < n_want ? want[k] : -1);
    return 1;
}

/* Every case of a fixture: ids with added tokens matched (the library's
 * default: TOKENIZER_ALLOW_SPECIAL) and with special tokens as text, and the
 * decoding back to the text. */
static void check_fixture(tokenizer *tok, const char *file) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", STRATA_SOURCE_DIR, file);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, cases = 0, tokens = 0, failures = 0;
    while (getline(&line, &cap, f) > 0) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char *tab = strchr(line, '\t');
        assert_non_null(tab);
        *tab = 0;
        char *hex = tab + 1;
        size_t hexlen = strcspn(hex, "\t");
        assert_true(hexlen % 2 == 0 && hex[hexlen] == '\t');
        char *text = malloc(hexlen / 2 + 1);
        for (size_t k = 0; k < hexlen / 2; k++) text[k] = (char)(hexval(hex[2 * k]) * 16 + hexval(hex[2 * k + 1]));
        size_t len = hexlen / 2, n_all, n_plain;
        char *p = hex + hexlen + 1;
        int32_t *want_all = parse_ids(&p, &n_all);
        assert_int_equal(*p, '\t');
        p++;
        int32_t *want_plain = parse_ids(&p, &n_plain);

        st_error err = {0};
        int32_t *ids = NULL, *plain;
        size_t n = 0, icap = 0, np;
        assert_int_equal(tokenizer_encode_append(tok, text, len, TOKENIZER_ALLOW_SPECIAL, &ids, &n, &icap, &err), ST_OK);
        assert_int_equal(tokenizer_encode(tok, text, len, &plain, &np, &err), ST_OK);
        size_t bad = compare(line, "special tokens matched", ids, n, want_all, n_all) +
                     compare(line, "special tokens as text", plain, np, want_plain, n_plain);
        char *back;
        size_t blen;
        assert_int_equal(tokenizer_decode(tok, ids, n, &back, &blen, &err), ST_OK);
        if (blen != len || memcmp(back, text, len)) {
            fprintf(stderr, "case %s: does not decode back to the text\n", line);
            bad++;
        }
        free(back);
        failures += bad != 0;
        cases++;
        tokens += n_all;
        free(ids); free(plain); free(want_all); free(want_plain); free(text);
    }
    free(line);
    fclose(f);
    if (failures) fail_msg("%s: %zu of %zu cases differ from the library", file, failures, cases);
    assert_true(cases > 350);
    assert_true(tokens > 20000);
}

static void test_gpt2_json_matches_library(void **state) {
    (void)state;
    check_fixture(gpt2_json, "tokenizer_json_gpt2.tsv");
}

static void test_llama3_matches_library(void **state) {
    (void)state;
    check_fixture(llama3, "tokenizer_json_llama3.tsv");
}

static int32_t *enc(tokenizer *tok, const char *s, size_t *n) {
    st_error err = {0};
    int32_t *ids;
    assert_int_equal(tokenizer_encode(tok, s, strlen(s), &ids, n, &err), ST_OK);
    return ids;
}

static void test_what_it_is(void **state) {
    (void)state;
    /* the same vocabulary from GPT-2's files and from tokenizer.json */
    assert_true(tokenizer_fingerprint(gpt2_files) == tokenizer_fingerprint(gpt2_json));
    assert_true(tokenizer_fingerprint(gpt2_files) != tokenizer_fingerprint(llama3));
    assert_int_equal(tokenizer_vocab_size(gpt2_json), GPT2_VOCAB_SIZE);
    assert_int_equal(tokenizer_vocab_size(llama3), 128256);
    assert_string_equal(tokenizer_name(gpt2_files), "gpt2");
    assert_string_equal(tokenizer_name(gpt2_json), "gpt2");
    assert_string_equal(tokenizer_name(llama3), "llama3");
    assert_non_null(strstr(tokenizer_source(llama3), "llama3-tokenizer.json"));
    assert_non_null(strstr(tokenizer_source(gpt2_files), "encoder.json"));
    /* BOS from the template; GPT-2 has none and separates with <|endoftext|> */
    assert_int_equal(tokenizer_bos_id(llama3), 128000);
    assert_int_equal(tokenizer_eos_id(llama3), -1);
    assert_int_equal(tokenizer_doc_separator(llama3), 128000);
    assert_int_equal(tokenizer_bos_id(gpt2_json), -1);
    assert_int_equal(tokenizer_doc_separator(gpt2_json), GPT2_EOT);
    assert_int_equal(tokenizer_doc_separator(gpt2_files), GPT2_EOT);
    assert_true(tokenizer_is_special(llama3, 128009));
    assert_false(tokenizer_is_special(llama3, 9906));
    assert_int_equal(tokenizer_token_id(llama3, "<|eot_id|>", 10), 128009);
    assert_int_equal(tokenizer_token_id(llama3, "Hello", 5), 9906);
    size_t len;
    const char *b = tokenizer_token_bytes(llama3, 128000, &len);
    assert_int_equal(len, 17);
    assert_memory_equal(b, "<|begin_of_text|>", 17);
    /* the library saves Llama 3 with merges as pairs: the same vocabulary */
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/llama3-tokenizer-saved.json", vocab_dir);
    tokenizer *saved;
    st_error err = {0};
    if (tokenizer_load_json(&saved, path, &err) != ST_OK) fail_msg("%s", err.msg);
    assert_true(tokenizer_fingerprint(saved) == tokenizer_fingerprint(llama3));
    size_t n1, n2;
    int32_t *a = enc(saved, "Hello world, it's 2025!", &n1), *c = enc(llama3, "Hello world, it's 2025!", &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, c, n1 * sizeof *a);
    free(a); free(c);
    tokenizer_free(saved);
    /* tokenizer_load_path takes the directory that holds a tokenizer.json */
    char dir[] = "/tmp/strata_tokdir_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char link[PATH_MAX + 64];
    snprintf(link, sizeof link, "%s/tokenizer.json", dir);
    snprintf(path, sizeof path, "%s/llama3-tokenizer.json", vocab_dir);
    assert_int_equal(symlink(path, link), 0);
    tokenizer *viadir;
    assert_int_equal(tokenizer_load_path(&viadir, dir, &err), ST_OK);
    assert_true(tokenizer_fingerprint(viadir) == tokenizer_fingerprint(llama3));
    tokenizer_free(viadir);
    unlink(link);
    assert_int_equal(tokenizer_load_path(&viadir, dir, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, "tokenizer.json"));
    rmdir(dir);
}

static void check_split(tokenizer *tok, const char *text, size_t len, ...) {
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

#define SPLIT(s, ...) check_split(llama3, s, sizeof(s) - 1, __VA_ARGS__, NULL)

static void test_llama3_pre_split_rules(void **state) {
    (void)state;
    SPLIT("Hello world", "Hello", " world");
    SPLIT("DON'T It'S", "DON", "'T", " It", "'S");      /* contractions in any case */
    SPLIT("'store", "'s", "tore");                        /* the contraction wins over a longer word */
    SPLIT("'\xc5\xbfx", "'\xc5\xbf", "x");                /* U+017F folds to s */
    SPLIT("1234567", "123", "456", "7");
    SPLIT(".word $x", ".word", " $", "x");                /* one non-letter may lead a word */
    SPLIT("a  b", "a", " ", " b");
    SPLIT("end.\n\nx", "end", ".\n\n", "x");              /* punctuation takes the newlines after it */
    SPLIT("a \n b", "a", " \n", " b");                    /* \s*[\r\n]+ ends at the last newline */
    SPLIT("a\r\n\r\n  b", "a", "\r\n\r\n", " ", " b");
    SPLIT("x  ", "x", "  ");
    SPLIT("\tword", "\tword");                            /* a tab may lead a word, \r and \n may not */
    SPLIT("\nword", "\n", "word");
    SPLIT("a\xff" "b", "a", "\xff" "b");                  /* an invalid byte is punctuation */
}

/* Any bytes survive encode then decode, with both special-token modes. */
static void test_any_bytes_round_trip(void **state) {
    (void)state;
    st_rng rng;
    st_rng_seed(&rng, 17);
    static const char shards[] = "a \n'\r\t1.<|eot_id|>\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xed\xa0\xc5\xbf";
    char buf[700];
    for (int round = 0; round < 2000; round++) {
        size_t len = st_rng_next(&rng) % sizeof buf;
        for (size_t k = 0; k < len; k++) {
            uint64_t r = st_rng_next(&rng);
            buf[k] = round % 2 ? (char)r : shards[r % (sizeof shards - 1)];
        }
        for (int mode = 0; mode < 2; mode++) {
            st_error err = {0};
            int32_t *ids = NULL;
            size_t n = 0, cap = 0, blen;
            assert_int_equal(tokenizer_encode_append(llama3, buf, len, mode ? TOKENIZER_ALLOW_SPECIAL : 0, &ids, &n,
                                                     &cap, &err), ST_OK);
            char *back;
            assert_int_equal(tokenizer_decode(llama3, ids, n, &back, &blen, &err), ST_OK);
            assert_int_equal(blen, len);
            assert_memory_equal(back, buf, len);
            free(back);
            free(ids);
        }
    }
}

/* ---- refusals ---------------------------------------------------------------- */

/* A small valid tokenizer.json: the 256 byte tokens, "he" and <|eot|>; each
 * non-NULL field replaces one part (model_extra comes before the model's own
 * fields, so that it is the one read). */
typedef struct mini {
    const char *model_extra, *normalizer, *pre, *decoder, *post, *added, *merges;
} mini;

static void write_mini(const char *path, const mini *m) {
    uint32_t cp_of_byte[256];
    int16_t byte_of_cp[512];
    tok_byte_alphabet(cp_of_byte, byte_of_cp);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n");
    fprintf(f, " \"added_tokens\": %s,\n", m->added ? m->added :
            "[{\"id\": 257, \"content\": \"<|eot|>\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
            "\"normalized\": false, \"special\": true}]");
    fprintf(f, " \"normalizer\": %s,\n", m->normalizer ? m->normalizer : "null");
    fprintf(f, " \"pre_tokenizer\": %s,\n", m->pre ? m->pre : "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
            "\"trim_offsets\": true, \"use_regex\": true}");
    fprintf(f, " \"post_processor\": %s,\n", m->post ? m->post : "null");
    fprintf(f, " \"decoder\": %s,\n", m->decoder ? m->decoder : "{\"type\": \"ByteLevel\"}");
    fprintf(f, " \"model\": {%s \"type\": \"BPE\", \"dropout\": null, \"vocab\": {", m->model_extra ? m->model_extra : "");
    for (int b = 0; b < 256; b++) {
        char u[8];
        uint32_t cp = cp_of_byte[b];
        if (cp < 0x80) snprintf(u, sizeof u, "%c", (char)cp);
        else snprintf(u, sizeof u, "%c%c", (char)(0xC0 | (cp >> 6)), (char)(0x80 | (cp & 0x3F)));
        if (cp == '"' || cp == '\\') fprintf(f, "\"\\%s\": %d, ", u, b);
        else fprintf(f, "\"%s\": %d, ", u, b);
    }
    fprintf(f, "\"he\": 256}, \"merges\": %s}}\n", m->merges ? m->merges : "[\"h e\"]");
    fclose(f);
}

static st_status load_mini(const char *path, const mini *m, st_error *err) {
    write_mini(path, m);
    tokenizer *t = NULL;
    st_status st = tokenizer_load_json(&t, path, err);
    tokenizer_free(t);
    return st;
}

#define REFUSE(status, pattern, ...)                                                           \
    do {                                                                                       \
        mini m_ = {__VA_ARGS__};                                                               \
        st_status st_ = load_mini(path, &m_, &err);                                            \
        if (st_ != (status) || !strstr(err.msg, pattern) || !strstr(err.msg, path))            \
            fail_msg("line %d: got %d \"%s\", want %d naming \"%s\"", __LINE__, st_, err.msg,  \
                     (status), pattern);                                                       \
    } while (0)

static void test_refusals_name_file_and_part(void **state) {
    (void)state;
    char dir[] = "/tmp/strata_tokjson_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    st_error err = {0};

    mini ok = {0};
    tokenizer *t;
    write_mini(path, &ok);
    if (tokenizer_load_json(&t, path, &err) != ST_OK) fail_msg("the valid mini file: %s", err.msg);
    size_t n;
    int32_t *ids = enc(t, "hehe<|eot|>", &n);   /* special as text: h e merged, then bytes */
    assert_int_equal(ids[0], 256);
    assert_int_equal(ids[1], 256);
    free(ids);
    assert_int_equal(tokenizer_vocab_size(t), 258);
    tokenizer_free(t);
    /* merges as pairs, and given twice (the last rank counts) */
    mini pairs = {.merges = "[[\"h\", \"e\"], \"h e\"]"};
    assert_int_equal(load_mini(path, &pairs, &err), ST_OK);

    REFUSE(ST_EUNSUPPORTED, "normalizer of type \"NFC\"", .normalizer = "{\"type\": \"NFC\"}");
    REFUSE(ST_EUNSUPPORTED, "model.byte_fallback", .model_extra = "\"byte_fallback\": true,");
    REFUSE(ST_EUNSUPPORTED, "model.continuing_subword_prefix", .model_extra = "\"continuing_subword_prefix\": \"##\",");
    REFUSE(ST_EUNSUPPORTED, "model.dropout", .model_extra = "\"dropout\": 0.1,");
    REFUSE(ST_EUNSUPPORTED, "model type \"WordPiece\"", .model_extra = "\"type\": \"WordPiece\",");
    REFUSE(ST_EUNSUPPORTED, "decoder of type \"WordPiece\"", .decoder = "{\"type\": \"WordPiece\"}");
    REFUSE(ST_EUNSUPPORTED, "decoder of type \"null\"", .decoder = "null");
    REFUSE(ST_EUNSUPPORTED, "post_processor of type \"RobertaProcessing\"", .post = "{\"type\": \"RobertaProcessing\"}");
    REFUSE(ST_EUNSUPPORTED, "pre_tokenizer of type \"Metaspace\"", .pre = "{\"type\": \"Metaspace\"}");
    REFUSE(ST_EUNSUPPORTED, "add_prefix_space", .pre = "{\"type\": \"ByteLevel\", \"add_prefix_space\": true}");
    REFUSE(ST_EUNSUPPORTED, "regex \"\\w+|\\d\"",
           .pre = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": "
                  "\"\\\\w+|\\\\d\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
                  "\"add_prefix_space\": false, \"use_regex\": false}]}");
    REFUSE(ST_EUNSUPPORTED, "behavior other than \"Isolated\"",
           .pre = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": "
                  "\"\\\\s+\"}, \"behavior\": \"Removed\", \"invert\": false}, {\"type\": \"ByteLevel\", "
                  "\"add_prefix_space\": false, \"use_regex\": false}]}");
    REFUSE(ST_EUNSUPPORTED, "lstrip true",
           .added = "[{\"id\": 257, \"content\": \"<|eot|>\", \"lstrip\": true, \"special\": true}]");
    REFUSE(ST_ECORRUPT, "but the library gives it id 257",
           .added = "[{\"id\": 300, \"content\": \"<|eot|>\", \"special\": true}]");
    REFUSE(ST_ECORRUPT, "model.merges[1]: token \"zz\" is not in the vocabulary", .merges = "[\"h e\", \"h zz\"]");
    REFUSE(ST_ECORRUPT, "makes a token that is not in the vocabulary", .merges = "[\"h x\"]");
    REFUSE(ST_ECORRUPT, "model.merges[0] is neither", .merges = "[\"h e x\"]");
    unlink(path);
    rmdir(dir);
}

/* BOS and EOS come from the TemplateProcessing "single" template (inside a
 * Sequence too), and the document separator is the BOS, whatever the ids. */
static void test_template_gives_bos_eos_and_separator(void **state) {
    (void)state;
    char dir[] = "/tmp/strata_toktpl_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    const char *added = "[{\"id\": 257, \"content\": \"<|eot|>\", \"special\": true, \"normalized\": false},"
                        " {\"id\": 258, \"content\": \"<|bos|>\", \"special\": true, \"normalized\": false}]";
    mini m = {.added = added,
              .post = "{\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\"}, {\"type\": "
                      "\"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<|bos|>\", \"type_id\": 0}}, "
                      "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": \"<|eot|>\", "
                      "\"type_id\": 0}}], \"special_tokens\": {\"<|bos|>\": {\"id\": \"<|bos|>\", \"ids\": [258]}, "
                      "\"<|eot|>\": {\"id\": \"<|eot|>\", \"ids\": [257]}}}]}"};
    write_mini(path, &m);
    tokenizer *t;
    st_error err = {0};
    if (tokenizer_load_json(&t, path, &err) != ST_OK) fail_msg("%s", err.msg);
    assert_int_equal(tokenizer_bos_id(t), 258);
    assert_int_equal(tokenizer_eos_id(t), 257);
    assert_int_equal(tokenizer_doc_separator(t), 258);
    tokenizer_free(t);
    /* without a template: the special token with the lowest id */
    m.post = NULL;
    write_mini(path, &m);
    if (tokenizer_load_json(&t, path, &err) != ST_OK) fail_msg("%s", err.msg);
    assert_int_equal(tokenizer_bos_id(t), -1);
    assert_int_equal(tokenizer_doc_separator(t), 257);
    tokenizer_free(t);
    unlink(path);
    rmdir(dir);
}

static void test_malformed_files(void **state) {
    (void)state;
    char dir[] = "/tmp/strata_tokbad_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    st_error err = {0};
    tokenizer *t = NULL;
    assert_int_equal(tokenizer_load_json(&t, path, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, path));
    FILE *f = fopen(path, "w");
    fputs("{\n  \"model\": {\n    \"vocab\": {\"a\" 1}\n  }\n}\n", f);
    fclose(f);
    assert_int_equal(tokenizer_load_json(&t, path, &err), ST_ECORRUPT);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "line 3"));
    f = fopen(path, "w");
    fputs("{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", f);
    fclose(f);
    assert_int_equal(tokenizer_load_json(&t, path, &err), ST_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "model type \"Unigram\""));
    f = fopen(path, "w");
    fputs("[1, 2, 3]", f);
    fclose(f);
    assert_int_equal(tokenizer_load_json(&t, path, &err), ST_ECORRUPT);
    f = fopen(path, "w");
    fputs("{\"model\": {\"vocab\": {\"a\\u0000b\": 0}, \"merges\": []}}", f);
    fclose(f);
    assert_int_equal(tokenizer_load_json(&t, path, &err), ST_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "\\u0000"));
    assert_null(t);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_json_matches_library),
        cmocka_unit_test(test_llama3_matches_library),
        cmocka_unit_test(test_what_it_is),
        cmocka_unit_test(test_llama3_pre_split_rules),
        cmocka_unit_test(test_any_bytes_round_trip),
        cmocka_unit_test(test_refusals_name_file_and_part),
        cmocka_unit_test(test_template_gives_bos_eos_and_separator),
        cmocka_unit_test(test_malformed_files),
    };
    return cmocka_run_group_tests(tests, load_all, free_all);
}
