/* test_model_gradcheck.c - finite differences, independent of PyTorch: for
 * every parameter tensor, the directional derivative of the loss along a
 * direction within that tensor, by central differences, must match
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

static void check_seed(gpt_config c, uint64_t seed) {
    st_error err = {0};
    assert_int_equal(gpt_config_check(&c, &err), ST_OK);
    const int B = 2, T = 6;
    size_t n = gpt_num_params(&c);
    float *p = calloc(n, sizeof *p), *g = calloc(n, sizeof *g), *dir = calloc(n, sizeof *dir);
    gpt_init_params(&c, p, seed);
    /* Larger weights and non-zero biases, so that every path carries signal. */
    st_rng r;
    st_rng_seed(&r, seed + 99);
    for (size_t i = 0; i < n; i++) p[i] += 0.1f * st_rng_normal(&r);
    /* the padded vocabulary rows stay zero, in the embedding and an untied head */
    for (int u = 0; u < gpt_num_units(&c); u++)
        for (int i = 0; !gpt_unit_is_block(&c, u) && i < gpt_unit_tensor_count(&c, u); i++) {
            const gpt_tensor_info t = gpt_unit_tensor(&c, u, i);
            if (t.ndim == 2 && t.shape[0] == c.vocab_size)
                for (size_t k = (size_t)c.vocab_size * c.d_model; k < t.numel; k++)
                    p[gpt_unit_offset(&c, u) + t.offset + k] = 0;
        }
    int32_t in[12], tg[12];
    for (int i = 0; i < B * T; i++) {
        in[i] = (int32_t)(st_rng_next(&r) % (uint64_t)c.vocab_size);
        tg[i] = (int32_t)(st_rng_next(&r) % (uint64_t)c.vocab_size);
    }
    gpt_workspace *ws;
    assert_int_equal(gpt_workspace_create(&ws, compute_backend_cpu(), &c, B, T, 0, GPT_FP32, &err), ST_OK);
    gpt_weights w = {.precision = GPT_FP32, .f32 = p};
    gpt_forward_backward(ws, w, g, in, tg, B, T, 1.0f);

    int checked = 0;
    double worst = 0;
    for (int u = 0; u < gpt_num_units(&c); u++) {
        for (int i = 0; i < gpt_unit_tensor_count(&c, u); i++) {
            gpt_tensor_info ti = gpt_unit_tensor(&c, u, i);
            size_t off = gpt_unit_offset(&c, u) + ti.offset;
            const size_t real = (size_t)ti.shape[0] * (size_t)(ti.ndim == 2 ? ti.shape[1] : 1);
            double analytic = 0;
            memset(dir, 0, n * sizeof *dir);
            for (size_t k = 0; k < real; k++) {
                /* Along the signs of our own gradient, with random weights: no
                 * cancellation makes the derivative tiny, and a wrong gradient
                 * still shows, since the numeric side measures the true one. */
                float mag = 0.5f + st_rng_uniform(&r);
                dir[off + k] = g[off + k] >= 0 ? mag : -mag;
                analytic += (double)g[off + k] * dir[off + k];
            }
            /* Central differences in float32, with Richardson extrapolation
             * (4 D(h/2) - D(h)) / 3 to cancel the h^2 error term, so that h
             * can be large enough for the loss's rounding (~1e-7) not to
             * matter. */
            const float h = 4e-2f / sqrtf((float)real);
            double d[2];
            float *q = malloc(n * sizeof *q);
            for (int k2 = 0; k2 < 2; k2++) {
                float step = k2 == 0 ? h : h / 2;
                for (size_t k = 0; k < n; k++) q[k] = p[k] + step * dir[k];
                double lp = loss_at(ws, &c, q, in, tg, B, T);
                for (size_t k = 0; k < n; k++) q[k] = p[k] - step * dir[k];
                double lm = loss_at(ws, &c, q, in, tg, B, T);
                d[k2] = (lp - lm) / (2.0 * step);
            }
            free(q);
            double numeric = (4.0 * d[1] - d[0]) / 3.0;
            double rel = fabs(numeric - analytic) / fmax(fabs(analytic), 1e-3);
            if (rel > 5e-3) printf("  %s seed %d unit %d %-20s analytic %+.6e numeric %+.6e rel %.1e\n", gpt_arch_name(c.arch), (int)seed, u, ti.name, analytic, numeric, rel);
            if (rel > worst) worst = rel;
            assert_true(rel < 2e-3);
            checked++;
        }
    }
    /* every tensor of the model: its embedding, its blocks' and an untied head's */
    const int untied_head = c.arch == GPT_ARCH_LLAMA && !c.tied ? LLAMA_HEAD_TENSORS : 0;
    assert_int_equal(checked, gpt_unit_tensor_count(&c, 0) + c.n_layer * gpt_unit_tensor_count(&c, 1) + untied_head);
    printf("  %s seed %d: %d tensors, worst relative error %.1e\n", gpt_arch_name(c.arch), (int)seed, checked, worst);
    gpt_workspace_free(ws);
    free(p); free(g); free(dir);
}

static void test_directional_derivatives(void **state) {
    (void)state;
    const gpt_config gpt2 = {.n_layer = 2, .n_head = 2, .d_model = 16, .n_ctx = 8, .vocab_size = 23};
    /* Llama: grouped-query attention with an untied head and Llama 3.1's
     * rotary scaling, and multi-query attention with a tied head */
    const gpt_config llama = {.arch = GPT_ARCH_LLAMA, .n_layer = 2, .n_head = 4, .n_kv_head = 2, .d_model = 16,
                              .d_ff = 24, .n_ctx = 8, .vocab_size = 23, .norm_eps = 1e-5f, .rope_theta = 10000.0f,
                              .rope_scaling = {8.0f, 1.0f, 4.0f, 8}};
    const gpt_config mqa = {.arch = GPT_ARCH_LLAMA, .n_layer = 2, .n_head = 2, .n_kv_head = 1, .d_model = 16,
                            .d_ff = 40, .n_ctx = 8, .vocab_size = 23, .tied = 1, .norm_eps = 1e-6f,
                            .rope_theta = 500000.0f};
    for (uint64_t seed = 1; seed <= 3; seed++) {
        check_seed(gpt2, seed);
        check_seed(llama, seed);
        check_seed(mqa, seed);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_directional_derivatives)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
