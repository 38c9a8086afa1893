/* bench_tokenizer.c - encoding speed on one core, GPT-2's vocabulary or a
 * tokenizer.json (Llama 3's: vocab/llama3-tokenizer.json).
 *
 *   cmake --build build --target bench_tokenizer
 *   ./build/bench_tokenizer [--tokenizer FILE|DIR] [FILE] [REPEATS]
 *                                   (default: GPT-2, data/corpus/kjv.txt, 5)
 *
 * Encodes FILE REPEATS times, each time with a freshly loaded tokenizer (an
 * empty word cache, as `strata prepare` starts), and reports the median MB/s
 * (1 MB = 1e6 bytes of input text), plus the pre-split alone and the decode
 * speed for reference. Single-threaded: the tokenizer is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer_internal.h"
#include "strata/tokenizer.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const char *tok_path = NULL, *pos[2] = {NULL, NULL};
    int n_pos = 0;
    for (int k = 1; k < argc; k++) {
        if (!strcmp(argv[k], "--tokenizer") && k + 1 < argc) tok_path = argv[++k];
        else if (n_pos < 2) pos[n_pos++] = argv[k];
    }
    const char *path = pos[0] ? pos[0] : "data/corpus/kjv.txt";
    int repeats = pos[1] ? atoi(pos[1]) : 5;
    if (repeats < 1 || repeats > 100) repeats = 5;
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "bench_tokenizer: cannot open %s (run scripts/make_corpus.sh, or pass a text file)\n", path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    if (!text || fread(text, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "bench_tokenizer: cannot read %s\n", path);
        return 1;
    }
    fclose(f);

    st_error err = {0};
    double enc[100], split[100], dec[100], load[100];
    size_t n_ids = 0;
    for (int r = 0; r < repeats; r++) {
        double t0 = st_now();
        tokenizer *tok;
        if (tokenizer_load_path(&tok, tok_path, &err) != ST_OK) {
            fprintf(stderr, "bench_tokenizer: %s\n", err.msg);
            return 1;
        }
        double t1 = st_now();
        int32_t *ids;
        if (tokenizer_encode(tok, text, (size_t)size, &ids, &n_ids, &err) != ST_OK) {
            fprintf(stderr, "bench_tokenizer: %s\n", err.msg);
            return 1;
        }
        double t2 = st_now();
        size_t pieces = tokenizer_pretokenize(tok, text, (size_t)size, NULL, 0);
        double t3 = st_now();
        char *back;
        size_t blen;
        if (tokenizer_decode(tok, ids, n_ids, &back, &blen, &err) != ST_OK || blen != (size_t)size ||
            memcmp(back, text, blen)) {
            fprintf(stderr, "bench_tokenizer: decode(encode(text)) != text\n");
            return 1;
        }
        double t4 = st_now();
        (void)pieces;
        load[r] = t1 - t0;
        enc[r] = (double)size / 1e6 / (t2 - t1);
        split[r] = (double)size / 1e6 / (t3 - t2);
        dec[r] = (double)size / 1e6 / (t4 - t3);
        free(ids);
        free(back);
        tokenizer_free(tok);
    }
    qsort(enc, (size_t)repeats, sizeof(double), cmp_double);
    qsort(split, (size_t)repeats, sizeof(double), cmp_double);
    qsort(dec, (size_t)repeats, sizeof(double), cmp_double);
    qsort(load, (size_t)repeats, sizeof(double), cmp_double);
    int m = repeats / 2;
    printf("tokenizer: %s\n", tok_path ? tok_path : "GPT-2 (vocab/encoder.json, vocab.bpe)");
    printf("file: %s (%ld bytes, %zu tokens, %.2f bytes/token)\n", path, size, n_ids, (double)size / (double)n_ids);
    printf("encode:   %.1f MB/s (median of %d; min %.1f, max %.1f)\n", enc[m], repeats, enc[0], enc[repeats - 1]);
    printf("pre-split alone: %.1f MB/s\n", split[m]);
    printf("decode:   %.1f MB/s\n", dec[m]);
    printf("load vocabulary: %.0f ms\n", load[m] * 1e3);
    free(text);
    return 0;
}
