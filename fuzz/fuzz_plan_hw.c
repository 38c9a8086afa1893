/* fuzz_plan_hw.c - libFuzzer target for hardware descriptions (strata/hw.h).
 *
 * Each input is a whole file. It must either be refused with one line naming
 * the file, or give a description that passes hw_check and, written back with
 * hw_to_json, reads again as exactly the same description. Any broken promise
 * aborts.
 *
 * Build and run with scripts/fuzz.sh; seeds are in fuzz/seeds/plan_hw/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/hw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "fuzz_plan_hw: %s:%d: %s\n", __FILE__, __LINE__, #cond);   \
            abort();                                                                   \
        }                                                                              \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hw_desc a, b;
    st_error err = {0};
    st_status s = hw_parse_json((const char *)data, size, "fuzz-input", &a, &err);
    if (s != ST_OK) {
        CHECK(s == ST_EINVAL && err.status == s);
        CHECK(strncmp(err.msg, "fuzz-input: ", 12) == 0 && !strchr(err.msg, '\n'));
        return 0;
    }
    CHECK(hw_check(&a, "fuzz-input", &err) == ST_OK);
    char *text = hw_to_json(&a);
    CHECK(text != NULL);
    s = hw_parse_json(text, strlen(text), "round-trip", &b, &err);
    if (s != ST_OK) fprintf(stderr, "fuzz_plan_hw: the written description does not read back: %s\n%s\n", err.msg, text);
    CHECK(s == ST_OK);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    free(text);
    return 0;
}
