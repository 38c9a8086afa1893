/* fuzz_data_tokenizer.c - libFuzzer target for the GPT-2 tokenizer: any byte
 * string, invalid UTF-8 included, must encode without error and decode back
 * to exactly the same bytes; every id must be a real token. Needs the
 * vocabulary (scripts/fetch_vocab.sh, or $STRATA_VOCAB_DIR). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/tokenizer.h"

static tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    st_error err = {0};
    if (tokenizer_load_default(&tok, &err) != ST_OK) {
        fprintf(stderr, "fuzz_data_tokenizer: %s\n", err.msg);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_error err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    if (tokenizer_encode(tok, (const char *)data, size, &ids, &n, &err) != ST_OK) {
        fprintf(stderr, "encode failed: %s\n", err.msg);
        abort();
    }
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= GPT2_VOCAB_SIZE) abort();
    char *text = NULL;
    size_t len = 0;
    if (tokenizer_decode(tok, ids, n, &text, &len, &err) != ST_OK) {
        fprintf(stderr, "decode failed: %s\n", err.msg);
        abort();
    }
    if (len != size || (size && memcmp(text, data, size) != 0)) abort();
    free(ids);
    free(text);
    return 0;
}
