/* test_schedule_review.c - the trainer's argument checks found in review:
 * AdamW hyperparameters out of range (a beta of 1 or more divides by zero in
 * the bias correction; NaN slips past "< 0" checks) are refused, and an
 * evaluation larger than the trainer's micro-batch does not overrun its
 * buffers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "strata/train.h"

static train_config tiny(void) {
    train_config tc = train_config_defaults();
    tc.model = (gpt_config){.n_layer = 1, .n_head = 2, .d_model = 16, .n_ctx = 8, .vocab_size = 100};
    tc.B = 2;
    tc.T = 4;
    return tc;
}

static void test_bad_hyperparameters_are_refused(void **state) {
    (void)state;
    st_error err = {0};
    train_config tc = tiny();
    assert_int_equal(train_config_check(&tc, &err), ST_OK);
    const struct { float b1, b2, eps, wd, clip, min_lr; } bad[] = {
        {1.0f, 0.95f, 1e-8f, 0.1f, 1, 0}, {2.0f, 0.95f, 1e-8f, 0.1f, 1, 0}, {-0.1f, 0.95f, 1e-8f, 0.1f, 1, 0},
        {0.9f, 1.0f, 1e-8f, 0.1f, 1, 0},  {0.9f, 1.5f, 1e-8f, 0.1f, 1, 0}, {NAN, 0.95f, 1e-8f, 0.1f, 1, 0},
        {0.9f, 0.95f, -1.0f, 0.1f, 1, 0}, {0.9f, 0.95f, 1e-8f, -0.1f, 1, 0}, {0.9f, 0.95f, 1e-8f, NAN, 1, 0},
        {0.9f, 0.95f, 1e-8f, 0.1f, NAN, 0}, {0.9f, 0.95f, 1e-8f, 0.1f, 1, NAN},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tc = tiny();
        tc.adam = (adamw_hparams){.beta1 = bad[i].b1, .beta2 = bad[i].b2, .eps = bad[i].eps,
                                  .weight_decay = bad[i].wd};
        tc.clip = bad[i].clip;
        tc.lr.min_lr = bad[i].min_lr;
        err = (st_error){0};
        if (train_config_check(&tc, &err) != ST_EINVAL) fail_msg("case %zu was accepted", i);
        assert_true(err.msg[0] != 0);
    }
}

static void test_eval_larger_than_micro_batch_is_refused(void **state) {
    (void)state;
    st_error err = {0};
    train_config tc = tiny();
    trainer *t;
    assert_int_equal(trainer_create(&t, &tc, NULL, &err), ST_OK);
    int32_t tokens[4 * 9] = {0};
    for (int i = 0; i < 4 * 9; i++) tokens[i] = i % 100;
    assert_true(isnan(trainer_eval(t, tokens, 3, 4)));   /* B 3 > 2 */
    assert_true(isnan(trainer_eval(t, tokens, 2, 8)));   /* T 8 > 4 */
    assert_true(isnan(trainer_eval(t, tokens, 0, 4)));
    float l = trainer_eval(t, tokens, 2, 4);
    assert_true(isfinite(l) && l > 0);
    trainer_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_hyperparameters_are_refused),
        cmocka_unit_test(test_eval_larger_than_micro_batch_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
