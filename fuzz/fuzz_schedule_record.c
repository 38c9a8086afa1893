/* fuzz_schedule_record.c - libFuzzer target for the record a training run
 * writes beside each commit (strata/checkpoint.h's ckpt_record), which
 * `strata train --resume` and `strata export` read back from a store that
 * may be damaged or someone else's.
 *
 * Each input is a whole record. It must either be refused (ST_ENOENT for an
 * empty one, else ST_ECORRUPT) with one line, or give a record whose model
 * passes gpt_config_check and which, formatted again, parses back to exactly
 * the same record. Any broken promise aborts.
 *
 * Build and run with scripts/fuzz.sh; seeds are in fuzz/seeds/schedule_record/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "fuzz_schedule_record: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ckpt_record a, b;
    st_error err = {0};
    st_status s = ckpt_record_parse(data, size, &a, &err);
    if (s != ST_OK) {
        CHECK((s == ST_ENOENT) == (size == 0));
        CHECK(s == ST_ENOENT || s == ST_ECORRUPT);
        CHECK(err.status == s && err.msg[0] && !strchr(err.msg, '\n'));
        return 0;
    }
    gpt_config c = a.model;
    CHECK(gpt_config_check(&c, &err) == ST_OK && a.step >= 0);
    char text[1024];
    const int n = ckpt_record_format(&a, text, sizeof text);
    CHECK(n > 0);
    CHECK(ckpt_record_parse(text, (size_t)n, &b, &err) == ST_OK);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    return 0;
}
