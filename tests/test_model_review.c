/* test_model_review.c - edge cases of the whole-model passes found in review:
 * a zero gradient scale and a backward without targets give zero gradients
 * (not garbage from the logits or stale scratch), and micro-batches larger
 * than the workspace are refused instead of overrunning it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "strata/model.h"

enum { B = 2, T = 5 };

typedef struct fixture {
    gpt_config cfg;
    float *params, *grads;
    gpt_workspace *ws;
    int32_t tokens[B * T], targets[B * T];
} fixture;

static void setup(fixture *f) {
    st_error err = {0};
    /* vocab 200: not a multiple of 128, so the padded columns matter */
    f->cfg = (gpt_config){.n_layer = 2, .n_head = 2, .d_model = 16, .n_ctx = 8, .vocab_size = 200};
    assert_int_equal(gpt_config_check(&f->cfg, &err), ST_OK);
    size_t n = gpt_num_params(&f->cfg);
    f->params = calloc(n, sizeof(float));
    f->grads = calloc(n, sizeof(float));
    assert_non_null(f->params);
    assert_non_null(f->grads);
    gpt_init_params(&f->cfg, f->params, 7);
    assert_int_equal(gpt_workspace_create(&f->ws, &f->cfg, B, T, 1, GPT_FP32, &err), ST_OK);
    for (int i = 0; i < B * T; i++) {
        f->tokens[i] = (i * 37) % 200;
        f->targets[i] = i == 3 ? 199 : (i * 11 + 5) % 200;   /* the last real token included */
    }
}

static void teardown(fixture *f) {
    gpt_workspace_free(f->ws);
    free(f->params);
    free(f->grads);
}

static double abs_sum(const float *g, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += fabs((double)g[i]);
    return s;
}

static void test_zero_grad_scale_gives_zero_gradients(void **state) {
    (void)state;
    fixture f;
    setup(&f);
    gpt_weights w = {.precision = GPT_FP32, .f32 = f.params};
    size_t n = gpt_num_params(&f.cfg);
    float loss = gpt_forward_backward(f.ws, w, f.grads, f.tokens, f.targets, B, T, 0.0f);
    assert_true(isfinite(loss) && loss > 0);
    assert_true(abs_sum(f.grads, n) == 0.0);
    teardown(&f);
}

static void test_backward_without_targets_gives_zero_gradients(void **state) {
    (void)state;
    fixture f;
    setup(&f);
    gpt_weights w = {.precision = GPT_FP32, .f32 = f.params};
    size_t n = gpt_num_params(&f.cfg);
    /* A real pass first, so that the scratch holds stale gradients. */
    gpt_forward_backward(f.ws, w, f.grads, f.tokens, f.targets, B, T, 1.0f);
    assert_true(abs_sum(f.grads, n) > 0);
    memset(f.grads, 0, n * sizeof(float));
    float loss = gpt_forward_backward(f.ws, w, f.grads, f.tokens, NULL, B, T, 1.0f);
    assert_true(loss == 0.0f);
    assert_true(abs_sum(f.grads, n) == 0.0);
    teardown(&f);
}

static void test_larger_than_workspace_is_refused(void **state) {
    (void)state;
    fixture f;
    setup(&f);
    gpt_weights w = {.precision = GPT_FP32, .f32 = f.params};
    int32_t big[(B + 1) * (T + 1)] = {0};
    assert_true(isnan(gpt_forward(f.ws, w, big, big, B + 1, T, NULL)));
    assert_true(isnan(gpt_forward(f.ws, w, big, big, B, T + 1, NULL)));
    assert_true(isnan(gpt_forward_backward(f.ws, w, f.grads, big, big, B, T + 1, 1.0f)));
    assert_true(isnan(gpt_forward(f.ws, w, big, big, 0, T, NULL)));
    /* Smaller is fine, and the same as a workspace of that size would give. */
    float small = gpt_forward(f.ws, w, f.tokens, f.targets, 1, 3, NULL);
    assert_true(isfinite(small) && small > 0);
    teardown(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zero_grad_scale_gives_zero_gradients),
        cmocka_unit_test(test_backward_without_targets_gives_zero_gradients),
        cmocka_unit_test(test_larger_than_workspace_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
