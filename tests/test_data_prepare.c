/* test_data_prepare.c - dataset_prepare: which files it reads and in what
 * order, that train + val put back together are exactly the documents' tokens,
 * chunked encoding of big files, and bad inputs that must fail without
 * touching what is already there. Needs vocab/ (scripts/fetch_vocab.sh). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "strata/data.h"

typedef struct fixture {
    tokenizer *tok;
    char dir[64];
} fixture;

static int vocab_size = GPT2_VOCAB_SIZE;   /* of the fixture's tokenizer, for reading shards */

static int setup_with(void **state, const char *json) {
    fixture *fx = calloc(1, sizeof *fx);
    st_error err = {0};
    char dir[PATH_MAX], path[PATH_MAX + 64];
    st_status st = tokenizer_load_default(&fx->tok, &err);
    if (!st && json) {
        tokenizer_free(fx->tok);
        st = tokenizer_find_vocab_dir(dir, sizeof dir, &err);
        snprintf(path, sizeof path, "%s/%s", dir, json);
        if (!st) st = tokenizer_load_json(&fx->tok, path, &err);
    }
    if (st) {
        fprintf(stderr, "test_data_prepare: cannot load the vocabulary: %s\n", err.msg);
        free(fx);
        return -1;
    }
    vocab_size = tokenizer_vocab_size(fx->tok);
    strcpy(fx->dir, "/tmp/strata_prepare_XXXXXX");
    if (!mkdtemp(fx->dir)) return -1;
    *state = fx;
    return 0;
}

static int setup(void **state) { return setup_with(state, NULL); }
/* Llama 3 (vocab/llama3-tokenizer.json, made by scripts/setup.sh): 128256
 * ids, so uint32 shards, and <|begin_of_text|> before each document. */
static int setup_llama3(void **state) { return setup_with(state, "llama3-tokenizer.json"); }

static int teardown(void **state) {
    fixture *fx = *state;
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
    int rc = system(cmd);
    tokenizer_free(fx->tok);
    free(fx);
    return rc == 0 ? 0 : -1;
}

static const char *path_in(const fixture *fx, const char *name) {
    static char buf[4][256];   /* a few live at once in one call */
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 256, "%s/%s", fx->dir, name);
    return p;
}

static void write_file(const char *path, const char *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) fail_msg("%s: %s", path, strerror(errno));
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    buf[size] = 0;
    fclose(f);
    *n = (size_t)size;
    return buf;
}

/* Text with the things that make chunking hard: trailing and leading spaces,
 * blank lines, tabs, non-ASCII, lines of only spaces. */
static char *make_text(uint64_t seed, size_t bytes) {
    static const char *words[] = {"the", "of", "and", "Strata", "GPU", "naïve", "café", "1999", "it's", "x",
                                  "(paren)", "--", "...", "\xe4\xb8\xad\xe6\x96\x87"};
    static const char *seps[] = {" ", " ", " ", "  ", "\n", "\n\n", " \n", "\n ", "\t", "\n   \n", ".\n"};
    st_rng rng;
    st_rng_seed(&rng, seed);
    char *s = malloc(bytes + 64);
    size_t n = 0;
    while (n < bytes) {
        const char *w = words[st_rng_next(&rng) % 14], *sep = seps[st_rng_next(&rng) % 11];
        n += (size_t)sprintf(s + n, "%s%s", w, sep);
    }
    s[n] = 0;
    return s;
}

/* [document separator] + tokens of text, appended to (*ids, *n). */
static void expect_doc(fixture *fx, const char *text, size_t len, int32_t **ids, size_t *n, size_t *cap,
                       unsigned flags) {
    st_error err = {0};
    if (*n + 1 > *cap) {
        *cap = *cap * 2 + 1024;
        *ids = realloc(*ids, *cap * sizeof **ids);
    }
    (*ids)[(*n)++] = tokenizer_doc_separator(fx->tok);
    assert_int_equal(tokenizer_encode_append(fx->tok, text, len, flags, ids, n, cap, &err), ST_OK);
}

static int32_t *read_tokens(const char *path, size_t *n) {
    st_error err = {0};
    token_file *tf;
    if (token_file_open(&tf, path, TOKEN_FORMAT_AUTO, &err) != ST_OK) fail_msg("%s", err.msg);
    *n = token_file_count(tf);
    int32_t *ids = malloc(*n * sizeof *ids);
    assert_int_equal(token_file_read(tf, 0, *n, ids, vocab_size, &err), ST_OK);
    token_file_close(tf);
    return ids;
}

/* Puts train and val back together with the block rule of meta.json and
 * compares with the expected stream. */
static void check_dataset(const char *out, const int32_t *want, size_t n_want, double f) {
    char p[300];
    size_t n_train, n_val, mlen;
    snprintf(p, sizeof p, "%s/train.tok", out);
    int32_t *train = read_tokens(p, &n_train);
    snprintf(p, sizeof p, "%s/val.tok", out);
    int32_t *val = read_tokens(p, &n_val);
    snprintf(p, sizeof p, "%s/meta.json", out);
    char *meta = read_file(p, &mlen);
    const char *b = strstr(meta, "\"split_block_tokens\": ");
    assert_non_null(b);
    size_t block = (size_t)atol(b + 22);
    assert_true(block >= 1);
    assert_int_equal(n_train + n_val, n_want);
    assert_true(n_val > 0 && n_train > 0);
    size_t ti = 0, vi = 0;
    for (size_t pos = 0; pos < n_want; pos++) {
        size_t blk = pos / block;
        int is_val = floor((double)(blk + 1) * f) > floor((double)blk * f);
        int32_t got = is_val ? val[vi++] : train[ti++];
        if (got != want[pos]) fail_msg("token %zu: got %d, want %d", pos, got, want[pos]);
    }
    assert_int_equal(ti, n_train);
    assert_int_equal(vi, n_val);
    free(train);
    free(val);
    free(meta);
}

static void test_prepare_reads_text_in_order_and_splits_exactly(void **state) {
    fixture *fx = *state;
    char in[256];
    snprintf(in, sizeof in, "%s", path_in(fx, "in"));
    assert_int_equal(mkdir(in, 0755), 0);
    assert_int_equal(mkdir(path_in(fx, "in/sub"), 0755), 0);
    char *a = make_text(1, 20000), *b = make_text(2, 30000), *c = make_text(3, 15000), *x = make_text(4, 9000);
    write_file(path_in(fx, "in/b.txt"), b, strlen(b));
    write_file(path_in(fx, "in/a.txt"), a, strlen(a));
    write_file(path_in(fx, "in/sub/c.md"), c, strlen(c));
    write_file(path_in(fx, "in/.hidden.txt"), "hidden", 6);      /* skipped: hidden */
    write_file(path_in(fx, "in/empty.txt"), "", 0);              /* skipped: empty */
    write_file(path_in(fx, "in/blob.dat"), "ab\0cd", 5);         /* skipped: binary */
    write_file(path_in(fx, "extra.txt"), x, strlen(x));

    char extra[256], out[256];
    snprintf(extra, sizeof extra, "%s", path_in(fx, "extra.txt"));
    snprintf(out, sizeof out, "%s", path_in(fx, "out"));
    const char *inputs[] = {extra, in};
    dataset_prepare_opts o = {.inputs = inputs, .n_inputs = 2, .out_dir = out, .val_fraction = 0.1};
    dataset_prepare_result r;
    st_error err = {0};
    if (dataset_prepare(fx->tok, &o, &r, &err) != ST_OK) fail_msg("%s", err.msg);
    assert_int_equal(r.files, 4);
    assert_int_equal(r.skipped, 2);   /* hidden files are not even counted */
    assert_int_equal(r.bytes, strlen(a) + strlen(b) + strlen(c) + strlen(x));

    /* documents: the explicit file, then the directory in sorted order */
    int32_t *want = NULL;
    size_t n = 0, cap = 0;
    expect_doc(fx, x, strlen(x), &want, &n, &cap, 0);
    expect_doc(fx, a, strlen(a), &want, &n, &cap, 0);
    expect_doc(fx, b, strlen(b), &want, &n, &cap, 0);
    expect_doc(fx, c, strlen(c), &want, &n, &cap, 0);
    assert_int_equal(r.train_tokens + r.val_tokens, n);
    double share = (double)r.val_tokens / (double)n;
    assert_true(share > 0.07 && share < 0.13);
    check_dataset(out, want, n, 0.1);

    /* no staging directory or temporary file left behind */
    char cmd[400];
    snprintf(cmd, sizeof cmd, "test $(ls -A '%s' | wc -l) -eq 3", out);
    assert_int_equal(system(cmd), 0);
    free(want);
    free(a); free(b); free(c); free(x);
}

/* A file bigger than one encoding chunk gives the same tokens as encoding it
 * in one piece: chunks end only where the split cannot change. */
static void test_big_file_chunks_do_not_change_tokens(void **state) {
    fixture *fx = *state;
    /* random text, and text where a careless cut would land inside a run of
     * newlines ("\n\n\n" encodes as 628 198, not 198 198 198) */
    size_t len = 3 * 1024 * 1024 + 12345;
    char *t = make_text(9, len);
    len = strlen(t);
    size_t len2 = 0, cap2 = 3 * 1024 * 1024;
    char *t2 = malloc(cap2 + 64);
    for (int k = 0; len2 < cap2; k++)
        len2 += (size_t)sprintf(t2 + len2, k % 5000 == 4999 ? "line %d\nnext\n" : "word\n\n\n", k);
    char in[256], in2[256], out[256];
    snprintf(in, sizeof in, "%s", path_in(fx, "big.txt"));
    snprintf(in2, sizeof in2, "%s", path_in(fx, "newlines.txt"));
    snprintf(out, sizeof out, "%s", path_in(fx, "out"));
    write_file(in, t, len);
    write_file(in2, t2, len2);
    const char *inputs[] = {in, in2};
    dataset_prepare_opts o = {.inputs = inputs, .n_inputs = 2, .out_dir = out, .val_fraction = 0.25};
    st_error err = {0};
    if (dataset_prepare(fx->tok, &o, NULL, &err) != ST_OK) fail_msg("%s", err.msg);
    int32_t *want = NULL;
    size_t n = 0, cap = 0;
    expect_doc(fx, t, len, &want, &n, &cap, 0);
    expect_doc(fx, t2, len2, &want, &n, &cap, 0);
    check_dataset(out, want, n, 0.25);
    free(want);
    free(t);
    free(t2);
}

static void test_allow_special_separates_documents(void **state) {
    fixture *fx = *state;
    const char *text = "first part of a long enough document<|endoftext|>second one";
    char in[256], out[256];
    snprintf(in, sizeof in, "%s", path_in(fx, "s.txt"));
    snprintf(out, sizeof out, "%s", path_in(fx, "out"));
    /* repeat so that there is enough text for a validation split */
    size_t len = strlen(text), reps = 200;
    char *big = malloc(len * reps + 1);
    for (size_t k = 0; k < reps; k++) memcpy(big + k * len, text, len);
    write_file(in, big, len * reps);
    const char *inputs[] = {in};
    dataset_prepare_opts o = {.inputs = inputs, .n_inputs = 1, .out_dir = out, .encode_flags = TOKENIZER_ALLOW_SPECIAL};
    st_error err = {0};
    if (dataset_prepare(fx->tok, &o, NULL, &err) != ST_OK) fail_msg("%s", err.msg);
    int32_t *want = NULL;
    size_t n = 0, cap = 0;
    expect_doc(fx, big, len * reps, &want, &n, &cap, TOKENIZER_ALLOW_SPECIAL);
    size_t eots = 0;
    for (size_t k = 0; k < n; k++) eots += want[k] == GPT2_EOT;
    assert_int_equal(eots, 1 + reps);
    check_dataset(out, want, n, 0.1);
    free(want);
    free(big);
}

/* meta.json names the tokenizer and its fingerprint; a vocabulary past
 * 65535 ids gets uint32 shards, read back exactly (check_dataset). */
static void test_meta_records_the_tokenizer(void **state) {
    fixture *fx = *state;
    char in[256], out[256];
    snprintf(in, sizeof in, "%s", path_in(fx, "t.txt"));
    snprintf(out, sizeof out, "%s", path_in(fx, "out"));
    char *t = make_text(5, 60000);
    write_file(in, t, strlen(t));
    const char *inputs[] = {in};
    dataset_prepare_opts o = {.inputs = inputs, .n_inputs = 1, .out_dir = out};
    st_error err = {0};
    if (dataset_prepare(fx->tok, &o, NULL, &err) != ST_OK) fail_msg("%s", err.msg);
    int32_t *want = NULL;
    size_t n = 0, cap = 0, big = 0;
    expect_doc(fx, t, strlen(t), &want, &n, &cap, 0);
    for (size_t k = 0; k < n; k++) big += want[k] > 65535;
    check_dataset(out, want, n, 0.1);

    char p[300], fp[64], line[400];
    size_t mlen;
    snprintf(p, sizeof p, "%s/meta.json", out);
    char *meta = read_file(p, &mlen);
    snprintf(fp, sizeof fp, "\"tokenizer_fingerprint\": \"%016" PRIx64 "\"", tokenizer_fingerprint(fx->tok));
    assert_non_null(strstr(meta, fp));
    snprintf(line, sizeof line, "\"tokenizer\": \"%s\"", tokenizer_name(fx->tok));
    assert_non_null(strstr(meta, line));
    snprintf(line, sizeof line, "\"vocab_size\": %d,\n  \"eot\": %d,", tokenizer_vocab_size(fx->tok),
             tokenizer_doc_separator(fx->tok));
    assert_non_null(strstr(meta, line));
    assert_non_null(strstr(meta, "\"tokenizer_source\": \""));
    assert_non_null(strstr(meta, "\"version\": 2,"));
    /* the shard's width follows the vocabulary */
    struct stat sb;
    snprintf(p, sizeof p, "%s/train.tok", out);
    assert_int_equal(stat(p, &sb), 0);
    st_error e2 = {0};
    token_file *tf;
    assert_int_equal(token_file_open(&tf, p, TOKEN_FORMAT_AUTO, &e2), ST_OK);
    size_t width = tokenizer_vocab_size(fx->tok) > 65535 ? 4 : 2;
    assert_int_equal((size_t)sb.st_size, 64 + width * token_file_count(tf));
    assert_int_equal(token_file_vocab_size(tf), (uint32_t)tokenizer_vocab_size(fx->tok));
    token_file_close(tf);
    if (width == 4) {
        assert_true(big > 0);   /* ids a uint16 shard could not hold */
        assert_non_null(strstr(meta, "\"document_separator\": \"<|begin_of_text|>\""));
    } else {
        assert_non_null(strstr(meta, "\"document_separator\": \"<|endoftext|>\""));
    }
    free(meta);
    free(want);
    free(t);
}

static void expect_fail(fixture *fx, const char *const *inputs, size_t n_inputs, const char *out, int overwrite,
                        st_status want, const char *needle) {
    dataset_prepare_opts o = {.inputs = inputs, .n_inputs = n_inputs, .out_dir = out, .overwrite = overwrite};
    st_error err = {0};
    st_status got = dataset_prepare(fx->tok, &o, NULL, &err);
    if (got != want || !strstr(err.msg, needle))
        fail_msg("got %s \"%s\", want %s with \"%s\"", st_status_name(got), err.msg, st_status_name(want), needle);
}

static void test_bad_inputs_fail_clearly_and_keep_old_data(void **state) {
    fixture *fx = *state;
    char out[256], missing[256], empty[256], blob[256], nodir[256], good[256], tiny[256], asfile[256];
    snprintf(out, sizeof out, "%s", path_in(fx, "out"));
    snprintf(missing, sizeof missing, "%s", path_in(fx, "missing.txt"));
    snprintf(empty, sizeof empty, "%s", path_in(fx, "empty.txt"));
    snprintf(blob, sizeof blob, "%s", path_in(fx, "blob.bin"));
    snprintf(nodir, sizeof nodir, "%s", path_in(fx, "notext"));
    snprintf(good, sizeof good, "%s", path_in(fx, "good.txt"));
    snprintf(tiny, sizeof tiny, "%s", path_in(fx, "tiny.txt"));
    snprintf(asfile, sizeof asfile, "%s", path_in(fx, "plainfile"));
    write_file(empty, "", 0);
    write_file(blob, "\x01\x02\0\x03", 4);
    assert_int_equal(mkdir(nodir, 0755), 0);
    write_file(path_in(fx, "notext/a.bin"), "\0\0\0", 3);
    write_file(path_in(fx, "notext/.b.txt"), "hidden", 6);
    char *g = make_text(5, 40000);
    write_file(good, g, strlen(g));
    write_file(tiny, "Hello.", 6);
    write_file(asfile, "x", 1);

    const char *in1[] = {missing};
    expect_fail(fx, in1, 1, out, 0, ST_ENOENT, missing);
    const char *in2[] = {good, empty};
    expect_fail(fx, in2, 2, out, 0, ST_EINVAL, "empty.txt: empty input file");
    const char *in3[] = {blob};
    expect_fail(fx, in3, 1, out, 0, ST_EINVAL, "blob.bin: not a text file");
    const char *in4[] = {nodir};
    expect_fail(fx, in4, 1, out, 0, ST_EINVAL, "notext: no text files");
    char emptydir[256];
    snprintf(emptydir, sizeof emptydir, "%s", path_in(fx, "emptydir"));
    assert_int_equal(mkdir(emptydir, 0755), 0);
    const char *in4b[] = {emptydir};
    expect_fail(fx, in4b, 1, out, 0, ST_EINVAL, "emptydir: no text files");
    const char *in5[] = {tiny};
    expect_fail(fx, in5, 1, out, 0, ST_EINVAL, "too few");
    expect_fail(fx, in5, 0, out, 0, ST_EINVAL, "no input");
    /* nothing was created by the failures */
    assert_int_not_equal(access(out, F_OK), 0);

    /* an output that cannot be a directory */
    const char *in6[] = {good};
    expect_fail(fx, in6, 1, asfile, 0, ST_EEXIST, "not a directory");
    char under_file[300];
    snprintf(under_file, sizeof under_file, "%s/sub", asfile);
    expect_fail(fx, in6, 1, under_file, 0, ST_EIO, under_file);

    /* a dataset already there is refused, and stays byte for byte */
    dataset_prepare_opts o = {.inputs = in6, .n_inputs = 1, .out_dir = out};
    st_error err = {0};
    assert_int_equal(dataset_prepare(fx->tok, &o, NULL, &err), ST_OK);
    char tpath[300];
    snprintf(tpath, sizeof tpath, "%s/train.tok", out);
    size_t before_n, after_n;
    char *before = read_file(tpath, &before_n);
    const char *in7[] = {nodir};
    expect_fail(fx, in6, 1, out, 0, ST_EEXIST, "--overwrite");
    expect_fail(fx, in7, 1, out, 1, ST_EINVAL, "no text files");   /* even with overwrite: inputs checked first */
    expect_fail(fx, in5, 1, out, 1, ST_EINVAL, "too few");         /* fails after encoding: still untouched */
    char *after = read_file(tpath, &after_n);
    assert_int_equal(before_n, after_n);
    assert_memory_equal(before, after, before_n);
    free(after);

    /* --overwrite replaces it */
    char *g2 = make_text(6, 50000);
    write_file(good, g2, strlen(g2));
    o.overwrite = 1;
    assert_int_equal(dataset_prepare(fx->tok, &o, NULL, &err), ST_OK);
    after = read_file(tpath, &after_n);
    assert_true(after_n != before_n || memcmp(before, after, before_n));
    free(after);
    free(before);

    /* fractions out of range */
    o.val_fraction = 0.6;
    assert_int_equal(dataset_prepare(fx->tok, &o, NULL, &err), ST_EINVAL);
    o.val_fraction = -0.1;
    assert_int_equal(dataset_prepare(fx->tok, &o, NULL, &err), ST_EINVAL);
    free(g);
    free(g2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_prepare_reads_text_in_order_and_splits_exactly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_big_file_chunks_do_not_change_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_allow_special_separates_documents, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_inputs_fail_clearly_and_keep_old_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_meta_records_the_tokenizer, setup, teardown),
        /* the same with Llama 3's tokenizer.json */
        cmocka_unit_test_setup_teardown(test_prepare_reads_text_in_order_and_splits_exactly, setup_llama3, teardown),
        cmocka_unit_test_setup_teardown(test_big_file_chunks_do_not_change_tokens, setup_llama3, teardown),
        cmocka_unit_test_setup_teardown(test_meta_records_the_tokenizer, setup_llama3, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
