/* fuzz_data_tokenizer_json.c - libFuzzer target for the tokenizer.json
 * reader: any bytes must either load or fail with an error naming the input,
 * never crash or leak; a file that loads must encode any text (the input
 * itself, both special-token modes) to ids inside its vocabulary that decode
 * back to exactly that text (unless an added token matched, see below). Seeds in fuzz/seeds/data_tokenizer_json/ (small
 * valid files: GPT-2 and Llama 3 shapes over a 256-byte vocabulary). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer_internal.h"
#include "strata/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    st_error err = {0};
    tokenizer *t = NULL;
    st_status st = tok_load_json_text(&t, text, size, "fuzz.json", &err);
    if (st != ST_OK) {
        if (t || !strstr(err.msg, "fuzz.json")) abort();   /* errors name the file */
        free(text);
        return 0;
    }
    for (unsigned flags = 0; flags <= TOKENIZER_ALLOW_SPECIAL; flags++) {
        int32_t *ids = NULL;
        size_t n = 0, cap = 0, len = 0;
        if (tokenizer_encode_append(t, text, size, flags, &ids, &n, &cap, &err) != ST_OK) abort();
        for (size_t k = 0; k < n; k++)
            if (ids[k] < 0 || ids[k] >= tokenizer_vocab_size(t)) abort();
        char *back = NULL;
        if (tokenizer_decode(t, ids, n, &back, &len, &err) != ST_OK) abort();
        /* decoding gives the text back unless an added token was matched:
         * the library's ByteLevel decoder maps an added token's characters
         * of the byte alphabet back to bytes, so it may not give its text */
        if (len != size || memcmp(back, text, size) != 0) {
            int added = 0;
            for (size_t k = 0; k < n && !added; k++)
                for (int a = 0; a < t->n_added && !added; a++) added = ids[k] == t->added[a].id;
            if (!added) abort();
        }
        free(ids);
        free(back);
    }
    tokenizer_free(t);
    free(text);
    return 0;
}
