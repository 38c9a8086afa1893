/* test_model_gradcheck.c - finite differences, independent of PyTorch: for
 * every parameter tensor, the directional derivative of the loss along a
 * random direction within that tensor, by central differences, must match
 * the backward pass's gradient dotted with the direction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "strata/model.h"

static float loss_at(gpt_workspace *ws, const gpt_config *c, float *p, const int32_t *in, const int32_t *tg, int B, int T) {
    gpt_weights w = {.precision = GPT_FP32, .f32 = p};
    (void)c;
    return gpt_forward(ws, w, in, tg, B, T, NULL);
}

static void test_directional_derivatives(void **state) {
    (void)state;
    gpt_config c = {.n_layer = 2, .n_head = 2, .d_model = 16, .n_ctx = 8, .vocab_size = 23};
    st_error err = {0};
    assert_int_equal(gpt_config_check(&c, &err), ST_OK);
    const int B = 2, T = 6;
    size_t n = gpt_num_params(&c);
    float *p = calloc(n, sizeof *p), *g = calloc(n, sizeof *g), *dir = calloc(n, sizeof *dir);
    gpt_init_params(&c, p, 7);
    /* Larger weights and non-zero biases, so that every path carries signal. */
    st_rng r;
    st_rng_seed(&r, 99);
    for (size_t i = 0; i < n; i++) p[i] += 0.1f * st_rng_normal(&r);
    for (size_t i = (size_t)c.vocab_size * c.d_model; i < (size_t)c.padded_vocab * c.d_model; i++) p[i] = 0;
    int32_t in[12], tg[12];
    for (int i = 0; i < B * T; i++) {
        in[i] = (int32_t)(st_rng_next(&r) % (uint64_t)c.vocab_size);
        tg[i] = (int32_t)(st_rng_next(&r) % (uint64_t)c.vocab_size);
    }
    gpt_workspace *ws;
    assert_int_equal(gpt_workspace_create(&ws, &c, B, T, 0, GPT_FP32, &err), ST_OK);
    gpt_weights w = {.precision = GPT_FP32, .f32 = p};
    gpt_forward_backward(ws, w, g, in, tg, B, T, 1.0f);

    int checked = 0;
    for (int u = 0; u < gpt_num_units(&c); u++) {
        for (int i = 0; i < gpt_unit_tensor_count(u); i++) {
            gpt_tensor_info ti = gpt_unit_tensor(&c, u, i);
            size_t off = gpt_unit_offset(&c, u) + ti.offset;
            size_t real = (u == 0 && i == GPT_WTE) ? (size_t)c.vocab_size * c.d_model : ti.numel;
            double analytic = 0;
            memset(dir, 0, n * sizeof *dir);
            for (size_t k = 0; k < real; k++) {
                dir[off + k] = (st_rng_next(&r) & 1) ? 1.0f : -1.0f;
                analytic += (double)g[off + k] * dir[off + k];
            }
            /* Central differences in float32: a step large enough that the
             * loss's rounding (~1e-7) is small against the change. */
            const float eps = 1e-2f / sqrtf((float)real);
            float *q = malloc(n * sizeof *q);
            for (size_t k = 0; k < n; k++) q[k] = p[k] + eps * dir[k];
            double lp = loss_at(ws, &c, q, in, tg, B, T);
            for (size_t k = 0; k < n; k++) q[k] = p[k] - eps * dir[k];
            double lm = loss_at(ws, &c, q, in, tg, B, T);
            free(q);
            double numeric = (lp - lm) / (2.0 * eps);
            double rel = fabs(numeric - analytic) / fmax(fabs(analytic), 1e-3);
            printf("  unit %d %-20s analytic %+.6e numeric %+.6e rel %.1e\n", u, ti.name, analytic, numeric, rel);
            assert_true(rel < 2e-2);
            checked++;
        }
    }
    assert_int_equal(checked, GPT_EMBED_TENSORS + c.n_layer * GPT_BLOCK_TENSORS);
    gpt_workspace_free(ws);
    free(p); free(g); free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_directional_derivatives)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
