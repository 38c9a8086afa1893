/* test_model_configs.c - the named model shapes: GPT-2's sizes at context
 * 1024, and the large GPT-style shapes for sizing runs by simulation
 * (gpt-6.7b ... gpt-175b: the GPT-3 paper's / OPT's depth, width and heads
 * with the GPT-2 architecture and vocabulary at context 2048), whose
 * parameter counts are within 3% of their nominal sizes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "strata/model.h"

static void test_large_shapes_and_sizes(void **state) {
    (void)state;
    static const struct {
        const char *name;
        int n_layer, n_head, d_model;
        double nominal;
    } want[] = {
        {"gpt-6.7b", 32, 32, 4096, 6.7e9},  {"gpt-13b", 40, 40, 5120, 13e9},    {"gpt-30b", 48, 56, 7168, 30e9},
        {"gpt-65b", 80, 64, 8192, 65e9},    {"gpt-175b", 96, 96, 12288, 175e9},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        gpt_config c;
        st_error err = {0};
        assert_int_equal(gpt_config_from_name(&c, want[i].name, &err), ST_OK);
        assert_int_equal(c.n_layer, want[i].n_layer);
        assert_int_equal(c.n_head, want[i].n_head);
        assert_int_equal(c.d_model, want[i].d_model);
        assert_int_equal(c.n_ctx, 2048);
        assert_int_equal(c.vocab_size, 50257);
        assert_int_equal(c.padded_vocab, 50304);
        /* GPT-2 layout: 12 C^2 + 13 C per block, tied embeddings, learned positions */
        const double C = c.d_model;
        const double expect = c.n_layer * (12 * C * C + 13 * C) + (50257.0 + 2048 + 2) * C;
        const double real = (double)gpt_num_real_params(&c);
        assert_true(real == expect);
        const double off = fabs(real / want[i].nominal - 1);
        printf("%-9s %8.3fB parameters (%+.2f%% from %.1fB)\n", want[i].name, real / 1e9,
               100 * (real / want[i].nominal - 1), want[i].nominal / 1e9);
        assert_true(off <= 0.03);
        /* every name the help text lists resolves */
        assert_non_null(strstr(gpt_config_names(), want[i].name));
    }
}

static void test_gpt2_sizes_keep_context_1024(void **state) {
    (void)state;
    static const char *names[] = {"gpt2-124m", "gpt2", "gpt2-350m", "gpt2-774m", "gpt2-1.5b", "gpt2-mini", "gpt2-tiny"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        gpt_config c;
        st_error err = {0};
        assert_int_equal(gpt_config_from_name(&c, names[i], &err), ST_OK);
        assert_int_equal(c.n_ctx, 1024);
    }
    gpt_config c;
    st_error err = {0};
    assert_int_equal(gpt_config_from_name(&c, "gpt2-124m", &err), ST_OK);
    assert_true(gpt_num_real_params(&c) == 124439808);   /* GPT-2 small, as published */
    assert_int_equal(gpt_config_from_name(&c, "gpt-7b", &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "gpt-175b"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_shapes_and_sizes),
        cmocka_unit_test(test_gpt2_sizes_keep_context_1024),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
