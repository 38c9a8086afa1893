/* test_data_tokens.c - token shards (write, read, every kind of damage),
 * nanoGPT raw files, range and vocabulary checks, dataset_resolve. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "strata/checksum.h"
#include "strata/data.h"

typedef struct fixture {
    char dir[64];
    char path[128];
} fixture;

static int setup(void **state) {
    fixture *fx = calloc(1, sizeof *fx);
    strcpy(fx->dir, "/tmp/strata_tokens_XXXXXX");
    if (!mkdtemp(fx->dir)) return -1;
    snprintf(fx->path, sizeof fx->path, "%s/a.tok", fx->dir);
    *state = fx;
    return 0;
}

static int teardown(void **state) {
    fixture *fx = *state;
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
    int rc = system(cmd);
    free(fx);
    return rc == 0 ? 0 : -1;
}

static void write_shard_fp(const char *path, const int32_t *ids, size_t n, uint32_t vocab, uint64_t fingerprint) {
    st_error err = {0};
    token_writer *w;
    assert_int_equal(token_writer_open(&w, path, vocab, fingerprint, &err), ST_OK);
    /* in uneven pieces, to cross the writer's buffer boundaries */
    for (size_t done = 0; done < n;) {
        size_t take = n - done < 777 ? n - done : 777;
        assert_int_equal(token_writer_append(w, ids + done, take, &err), ST_OK);
        done += take;
    }
    assert_int_equal(token_writer_count(w), n);
    assert_int_equal(token_writer_commit(w, &err), ST_OK);
}

static void write_shard(const char *path, const int32_t *ids, size_t n, uint32_t vocab) {
    write_shard_fp(path, ids, n, vocab, 0);
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* Overwrites n bytes at off in an existing file. */
static void patch_file(const char *path, long off, const void *data, size_t n) {
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, data, n, off), (ssize_t)n);
    close(fd);
}

static void expect_open_error(const char *path, st_status want, const char *needle) {
    st_error err = {0};
    token_file *tf = (token_file *)1;
    assert_int_equal(token_file_open(&tf, path, TOKEN_FORMAT_AUTO, &err), want);
    assert_null(tf);
    if (!strstr(err.msg, path) || !strstr(err.msg, needle))
        fail_msg("error \"%s\" should name %s and say \"%s\"", err.msg, path, needle);
}

static void test_shard_round_trip(void **state) {
    fixture *fx = *state;
    size_t n = 3 * 1024 * 1024 / 2 + 123;   /* more than one 1 MiB write buffer */
    int32_t *ids = malloc(n * sizeof *ids), *back = malloc(n * sizeof *back);
    st_rng rng;
    st_rng_seed(&rng, 3);
    for (size_t k = 0; k < n; k++) ids[k] = (int32_t)(st_rng_next(&rng) % 50257);
    write_shard(fx->path, ids, n, 50257);

    struct stat sb;
    assert_int_equal(stat(fx->path, &sb), 0);
    assert_int_equal(sb.st_size, TOKEN_SHARD_HEADER_BYTES + 2 * n);   /* uint16 ids */

    st_error err = {0};
    token_file *tf;
    assert_int_equal(token_file_open(&tf, fx->path, TOKEN_FORMAT_AUTO, &err), ST_OK);
    assert_true(token_file_is_shard(tf));
    assert_int_equal(token_file_count(tf), n);
    assert_int_equal(token_file_vocab_size(tf), 50257);
    assert_string_equal(token_file_path(tf), fx->path);
    assert_int_equal(token_file_read(tf, 0, n, back, 50257, &err), ST_OK);
    assert_memory_equal(back, ids, n * sizeof *ids);
    assert_int_equal(token_file_read(tf, n - 5, 5, back, 0, &err), ST_OK);
    assert_memory_equal(back, ids + n - 5, 5 * sizeof *ids);
    assert_int_equal(token_file_read(tf, n, 0, back, 0, &err), ST_OK);

    /* past the end */
    assert_int_equal(token_file_read(tf, n - 5, 6, back, 0, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, fx->path));
    assert_int_equal(token_file_read(tf, UINT64_MAX, 1, back, 0, &err), ST_EINVAL);
    /* ids past a (smaller) model vocabulary: name the file and the position */
    size_t first_big = 0;
    while (ids[first_big] < 1000) first_big++;
    assert_int_equal(token_file_read(tf, 0, first_big + 1, back, 1000, &err), ST_ECORRUPT);
    char want[64];
    snprintf(want, sizeof want, "token %zu is %d", first_big, ids[first_big]);
    if (!strstr(err.msg, want) || !strstr(err.msg, fx->path)) fail_msg("got \"%s\"", err.msg);
    token_file_close(tf);

    /* no temporary file left beside it */
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", fx->path, (long)getpid());
    assert_int_not_equal(access(tmp, F_OK), 0);
    free(ids);
    free(back);
}

static void test_wide_ids_for_big_vocab(void **state) {
    fixture *fx = *state;
    int32_t ids[] = {0, 65535, 65536, 99999, 7};
    write_shard(fx->path, ids, 5, 100000);
    st_error err = {0};
    token_file *tf;
    int32_t back[5];
    assert_int_equal(token_file_open(&tf, fx->path, TOKEN_FORMAT_AUTO, &err), ST_OK);
    assert_int_equal(token_file_read(tf, 0, 5, back, 100000, &err), ST_OK);
    assert_memory_equal(back, ids, sizeof ids);
    token_file_close(tf);
}

static void test_writer_rejects_bad_ids_and_abort_leaves_nothing(void **state) {
    fixture *fx = *state;
    st_error err = {0};
    token_writer *w;
    assert_int_equal(token_writer_open(&w, fx->path, 50257, 0, &err), ST_OK);
    int32_t bad[] = {1, 2, 50257};
    assert_int_equal(token_writer_append(w, bad, 3, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "token 2 is 50257"));
    int32_t neg[] = {-1};
    assert_int_equal(token_writer_append(w, neg, 1, &err), ST_EINVAL);
    token_writer_abort(w);
    assert_int_not_equal(access(fx->path, F_OK), 0);
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", fx->path, (long)getpid());
    assert_int_not_equal(access(tmp, F_OK), 0);
    /* a directory that does not exist */
    char nowhere[160];
    snprintf(nowhere, sizeof nowhere, "%s/no/such/dir/x.tok", fx->dir);
    assert_int_equal(token_writer_open(&w, nowhere, 50257, 0, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, "no/such/dir"));
}

static void test_damaged_shards_are_refused(void **state) {
    fixture *fx = *state;
    int32_t ids[1000];
    for (int k = 0; k < 1000; k++) ids[k] = (k * 37) % 50257;
    uint8_t b;

    /* a flipped bit in the tokens */
    write_shard(fx->path, ids, 1000, 50257);
    b = 0x5a;
    patch_file(fx->path, TOKEN_SHARD_HEADER_BYTES + 1001, &b, 1);
    expect_open_error(fx->path, ST_ECORRUPT, "token checksum mismatch");

    /* a damaged magic number (in a .tok file and in any file) */
    write_shard(fx->path, ids, 1000, 50257);
    patch_file(fx->path, 3, "X", 1);
    expect_open_error(fx->path, ST_ECORRUPT, "wrong magic");
    char other[160];
    snprintf(other, sizeof other, "%s/b.bin", fx->dir);
    write_shard(other, ids, 1000, 50257);
    patch_file(other, 5, "X", 1);
    expect_open_error(other, ST_ECORRUPT, "wrong magic");

    /* a future version, version 0 */
    write_shard(fx->path, ids, 1000, 50257);
    uint8_t v[4] = {TOKEN_SHARD_VERSION + 1, 0, 0, 0};
    patch_file(fx->path, 8, v, 4);
    char newer[32];
    snprintf(newer, sizeof newer, "version %d", TOKEN_SHARD_VERSION + 1);
    expect_open_error(fx->path, ST_EUNSUPPORTED, newer);
    v[0] = 0;
    patch_file(fx->path, 8, v, 4);
    expect_open_error(fx->path, ST_ECORRUPT, "version 0");

    /* any other header byte: the header checksum */
    write_shard(fx->path, ids, 1000, 50257);
    b = 0x01;
    patch_file(fx->path, 17, &b, 1);
    expect_open_error(fx->path, ST_ECORRUPT, "header checksum");

    /* truncated: cut the last token off */
    write_shard(fx->path, ids, 1000, 50257);
    assert_int_equal(truncate(fx->path, TOKEN_SHARD_HEADER_BYTES + 1998), 0);
    expect_open_error(fx->path, ST_ECORRUPT, "truncated");
    assert_int_equal(truncate(fx->path, 20), 0);
    expect_open_error(fx->path, ST_ECORRUPT, "truncated");

    /* missing, empty, a directory */
    snprintf(other, sizeof other, "%s/missing.tok", fx->dir);
    expect_open_error(other, ST_ENOENT, "cannot open");
    write_bytes(fx->path, "", 0);
    expect_open_error(fx->path, ST_ECORRUPT, "empty");
    expect_open_error(fx->dir, ST_EINVAL, "is a directory, not a token file; name a file in it");

    /* a valid shard with the checksum recomputed after the change is fine:
     * the checks are about damage, not about the writer */
    write_shard(fx->path, ids, 1000, 50257);
    token_file *tf;
    st_error err = {0};
    assert_int_equal(token_file_open(&tf, fx->path, TOKEN_FORMAT_AUTO, &err), ST_OK);
    token_file_close(tf);
}

static void test_nanogpt_raw_files(void **state) {
    fixture *fx = *state;
    char path[160];
    snprintf(path, sizeof path, "%s/train.bin", fx->dir);
    uint16_t raw[6] = {15496, 995, 50256, 0, 1, 50255};
    write_bytes(path, raw, sizeof raw);
    st_error err = {0};
    token_file *tf;
    int32_t back[6];
    assert_int_equal(token_file_open(&tf, path, TOKEN_FORMAT_AUTO, &err), ST_OK);
    assert_false(token_file_is_shard(tf));
    assert_int_equal(token_file_count(tf), 6);
    assert_int_equal(token_file_vocab_size(tf), 0);
    assert_int_equal(token_file_read(tf, 1, 5, back, 50257, &err), ST_OK);
    for (int k = 0; k < 5; k++) assert_int_equal(back[k], raw[k + 1]);
    token_file_close(tf);

    uint16_t bad[3] = {1, 60000, 2};   /* 60000 is past GPT-2's vocabulary */
    write_bytes(path, bad, sizeof bad);
    assert_int_equal(token_file_open(&tf, path, TOKEN_FORMAT_AUTO, &err), ST_OK);
    assert_int_equal(token_file_read(tf, 0, 3, back, 50257, &err), ST_ECORRUPT);
    assert_non_null(strstr(err.msg, "token 1 is 60000"));
    assert_int_equal(token_file_read(tf, 0, 3, back, 0, &err), ST_OK);   /* unchecked */
    token_file_close(tf);

    write_bytes(path, raw, 5);   /* odd size */
    expect_open_error(path, ST_ECORRUPT, "uint16");
}

/* Raw ids carry no mark of what they are: outside *.bin they are read only
 * when the caller says the format; text is told apart. */
static void test_raw_ids_only_where_the_format_is_certain(void **state) {
    fixture *fx = *state;
    char path[160];
    snprintf(path, sizeof path, "%s/tokens.u16", fx->dir);
    uint16_t raw[4] = {15496, 11, 995, 50256};   /* "Hello, world<|endoftext|>": bytes 0 among them */
    write_bytes(path, raw, sizeof raw);
    expect_open_error(path, ST_EINVAL, "named *.bin");
    st_error err = {0};
    token_file *tf;
    assert_int_equal(token_file_open(&tf, path, TOKEN_FORMAT_U16, &err), ST_OK);
    assert_int_equal(token_file_count(tf), 4);
    token_file_close(tf);

    snprintf(path, sizeof path, "%s/notes.txt", fx->dir);
    write_bytes(path, "some notes\n", 11);   /* odd size, too: the text is what is wrong */
    expect_open_error(path, ST_EINVAL, "strata prepare");
    write_bytes(path, "more notes\n\n", 12);
    expect_open_error(path, ST_EINVAL, "strata prepare");

    /* a shard is a shard whatever the name or the format asked for */
    int32_t ids[] = {1, 2, 3};
    snprintf(path, sizeof path, "%s/shard.dat", fx->dir);
    write_shard(path, ids, 3, 50257);
    assert_int_equal(token_file_open(&tf, path, TOKEN_FORMAT_AUTO, &err), ST_OK);
    assert_true(token_file_is_shard(tf));
    token_file_close(tf);
    assert_int_equal(token_file_open(&tf, path, TOKEN_FORMAT_U16, &err), ST_OK);
    assert_true(token_file_is_shard(tf));
    token_file_close(tf);

    token_format f;
    assert_int_equal(token_format_parse("u16", &f, &err), ST_OK);
    assert_int_equal(f, TOKEN_FORMAT_U16);
    assert_int_equal(token_format_parse("auto", &f, &err), ST_OK);
    assert_int_equal(f, TOKEN_FORMAT_AUTO);
    assert_int_equal(token_format_parse("uint16", &f, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "'uint16'"));
}

/* Every id checked up front, the first one past the vocabulary named by its
 * position, also beyond the first chunk read. */
static void test_check_ids_against_the_vocabulary(void **state) {
    fixture *fx = *state;
    const size_t n = 700000;   /* more than one 1 MiB read of int32 */
    uint16_t *raw = malloc(n * sizeof *raw);
    for (size_t k = 0; k < n; k++) raw[k] = (uint16_t)(k % 101);
    raw[600001] = 101;
    char path[160];
    snprintf(path, sizeof path, "%s/big.bin", fx->dir);
    write_bytes(path, raw, n * sizeof *raw);
    free(raw);
    st_error err = {0};
    token_file *tf;
    assert_int_equal(token_file_open(&tf, path, TOKEN_FORMAT_AUTO, &err), ST_OK);
    assert_int_equal(token_file_check_ids(tf, 101, &err), ST_ECORRUPT);
    if (!strstr(err.msg, path) || !strstr(err.msg, "token 600001 is 101, past the model's vocabulary of 101"))
        fail_msg("got \"%s\"", err.msg);
    assert_int_equal(token_file_check_ids(tf, 102, &err), ST_OK);
    token_file_close(tf);

    /* a shard: no read when its vocabulary fits; its ids when it does not */
    int32_t ids[] = {5, 99, 7, 150, 3};
    write_shard(fx->path, ids, 3, 101);
    assert_int_equal(token_file_open(&tf, fx->path, TOKEN_FORMAT_AUTO, &err), ST_OK);
    assert_int_equal(token_file_check_ids(tf, 101, &err), ST_OK);
    token_file_close(tf);
    write_shard(fx->path, ids, 5, 50257);
    assert_int_equal(token_file_open(&tf, fx->path, TOKEN_FORMAT_AUTO, &err), ST_OK);
    assert_int_equal(token_file_check_ids(tf, 151, &err), ST_OK);
    assert_int_equal(token_file_check_ids(tf, 101, &err), ST_ECORRUPT);
    assert_non_null(strstr(err.msg, "token 3 is 150"));
    token_file_close(tf);
}

static void test_dataset_resolve(void **state) {
    fixture *fx = *state;
    char train[256], val[256], p[160];
    st_error err = {0};
    int32_t ids[] = {1, 2, 3};

    /* a single file: train = val */
    write_shard(fx->path, ids, 3, 50257);
    assert_int_equal(dataset_resolve(fx->path, train, val, sizeof train, &err), ST_OK);
    assert_string_equal(train, fx->path);
    assert_string_equal(val, fx->path);

    /* a directory without a dataset */
    assert_int_equal(dataset_resolve(fx->dir, train, val, sizeof train, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, "not a dataset"));

    /* nanoGPT layout */
    snprintf(p, sizeof p, "%s/train.bin", fx->dir);
    write_bytes(p, ids, 4);
    assert_int_equal(dataset_resolve(fx->dir, train, val, sizeof train, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, "no val.bin"));
    snprintf(p, sizeof p, "%s/val.bin", fx->dir);
    write_bytes(p, ids, 4);
    assert_int_equal(dataset_resolve(fx->dir, train, val, sizeof train, &err), ST_OK);
    assert_non_null(strstr(train, "/train.bin"));
    assert_non_null(strstr(val, "/val.bin"));

    /* strata layout wins over nanoGPT's */
    snprintf(p, sizeof p, "%s/train.tok", fx->dir);
    write_shard(p, ids, 3, 50257);
    snprintf(p, sizeof p, "%s/val.tok", fx->dir);
    write_shard(p, ids, 3, 50257);
    assert_int_equal(dataset_resolve(fx->dir, train, val, sizeof train, &err), ST_OK);
    assert_non_null(strstr(train, "/train.tok"));
    assert_non_null(strstr(val, "/val.tok"));

    /* too small a buffer, a missing path */
    assert_int_equal(dataset_resolve(fx->dir, train, val, 8, &err), ST_EINVAL);
    snprintf(p, sizeof p, "%s/nothing", fx->dir);
    assert_int_equal(dataset_resolve(p, train, val, sizeof train, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, p));
}

/* The header is what docs/FORMATS.md says it is. */
static void test_header_layout_matches_docs(void **state) {
    fixture *fx = *state;
    int32_t ids[] = {258, 1};
    write_shard_fp(fx->path, ids, 2, 50257, 0x0123456789abcdefull);
    uint8_t h[TOKEN_SHARD_HEADER_BYTES + 4];
    FILE *f = fopen(fx->path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(h, 1, sizeof h, f), sizeof h);
    fclose(f);
    assert_memory_equal(h, "\xff\xffSTRATA", 8);
    uint32_t u32;
    uint64_t u64;
    memcpy(&u32, h + 8, 4);  assert_int_equal(u32, 2);        /* version */
    memcpy(&u32, h + 12, 4); assert_int_equal(u32, 2);        /* bytes per token */
    memcpy(&u64, h + 16, 8); assert_int_equal(u64, 2);        /* token count */
    memcpy(&u32, h + 24, 4); assert_int_equal(u32, 50257);    /* vocabulary size */
    memcpy(&u32, h + 28, 4); assert_int_equal(u32, st_crc32c(0, h + 64, 4));
    memcpy(&u32, h + 60, 4); assert_int_equal(u32, st_crc32c(0, h, 60));
    memcpy(&u64, h + 32, 8); assert_int_equal(u64, 0x0123456789abcdefull);   /* vocabulary fingerprint */
    for (int k = 40; k < 60; k++) assert_int_equal(h[k], 0);  /* reserved */
    assert_int_equal(h[64], 2);                                /* 258, little-endian */
    assert_int_equal(h[65], 1);
}

/* Version 2 records the vocabulary's fingerprint; a version-1 shard (which
 * kept those bytes zero) still reads, with the fingerprint unknown. */
static void test_vocab_fingerprint_and_version_1(void **state) {
    fixture *fx = *state;
    int32_t ids[] = {5, 70000, 3}, back[3];
    write_shard_fp(fx->path, ids, 3, 128256, 0xfeedfacecafebeefull);
    st_error err = {0};
    token_file *tf;
    assert_int_equal(token_file_open(&tf, fx->path, TOKEN_FORMAT_AUTO, &err), ST_OK);
    assert_true(token_file_vocab_fingerprint(tf) == 0xfeedfacecafebeefull);
    assert_int_equal(token_file_vocab_size(tf), 128256);
    token_file_close(tf);

    /* the same file as version 1 wrote it: version 1, bytes 32..59 zero */
    uint8_t h[TOKEN_SHARD_HEADER_BYTES];
    FILE *f = fopen(fx->path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(h, 1, sizeof h, f), sizeof h);
    fclose(f);
    uint32_t one = 1;
    memcpy(h + 8, &one, 4);
    memset(h + 32, 0, 28);
    uint32_t crc = st_crc32c(0, h, 60);
    memcpy(h + 60, &crc, 4);
    patch_file(fx->path, 0, h, sizeof h);
    assert_int_equal(token_file_open(&tf, fx->path, TOKEN_FORMAT_AUTO, &err), ST_OK);
    assert_true(token_file_vocab_fingerprint(tf) == 0);
    assert_int_equal(token_file_read(tf, 0, 3, back, 128256, &err), ST_OK);
    assert_memory_equal(back, ids, sizeof ids);
    token_file_close(tf);

    /* a raw file records nothing */
    char raw[160];
    snprintf(raw, sizeof raw, "%s/r.bin", fx->dir);
    uint16_t r[2] = {1, 2};
    write_bytes(raw, r, sizeof r);
    assert_int_equal(token_file_open(&tf, raw, TOKEN_FORMAT_AUTO, &err), ST_OK);
    assert_true(token_file_vocab_fingerprint(tf) == 0);
    token_file_close(tf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_shard_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wide_ids_for_big_vocab, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vocab_fingerprint_and_version_1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_rejects_bad_ids_and_abort_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_shards_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nanogpt_raw_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raw_ids_only_where_the_format_is_certain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_ids_against_the_vocabulary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dataset_resolve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header_layout_matches_docs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
