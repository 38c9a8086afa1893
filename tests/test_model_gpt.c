/* test_model_gpt.c - the GPT-2 forward and backward against the float64
 * PyTorch reference (tests/fixtures, made by tools/make_fixtures.py), in fp32
 * and in mixed precision, with and without recomputation; the edge cases of
 * the passes (a zero gradient scale, no targets, shapes past the workspace);
 * plus loading the published-checkpoint variants of the same weights. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "strata/gpt_io.h"
#include "strata/model.h"
#include "testutil.h"

typedef struct fixture {
    gpt_config cfg;
    float *params;
    safetensors_file *ref;
    int B, T;
    int32_t *inputs, *targets;   /* step 0, micro-batch 0 */
} fixture;

static void fixture_load(fixture *fx, const char *ref_name) {
    st_error err = {0};
    assert_int_equal(safetensors_open(&fx->ref, ref_name, &err), ST_OK);
    int n_head = fixture_int(fx->ref, "n_head");
    assert_int_equal(gpt_load_safetensors(FIXTURE("gpt_small_init.safetensors"), n_head, &fx->cfg, &fx->params, &err),
                     ST_OK);
    fx->B = fixture_int(fx->ref, "B");
    fx->T = fixture_int(fx->ref, "T");
    int32_t *tok = fixture_i32(fx->ref, "tokens", NULL);
    fx->inputs = malloc(sizeof(int32_t) * fx->B * fx->T);
    fx->targets = malloc(sizeof(int32_t) * fx->B * fx->T);
    for (int b = 0; b < fx->B; b++)
        for (int t = 0; t < fx->T; t++) {
            fx->inputs[b * fx->T + t] = tok[b * (fx->T + 1) + t];
            fx->targets[b * fx->T + t] = tok[b * (fx->T + 1) + t + 1];
        }
    free(tok);
}

static void fixture_free(fixture *fx) {
    safetensors_close(fx->ref);
    st_free_aligned(fx->params);
    free(fx->inputs);
    free(fx->targets);
}

static void test_config_inferred_from_shapes(void **state) {
    (void)state;
    fixture fx;
    fixture_load(&fx, FIXTURE("gpt_small_ref_fp32.safetensors"));
    assert_int_equal(fx.cfg.n_layer, 2);
    assert_int_equal(fx.cfg.d_model, 48);
    assert_int_equal(fx.cfg.n_ctx, 32);
    assert_int_equal(fx.cfg.vocab_size, 101);
    assert_int_equal(fx.cfg.padded_vocab, 128);
    /* padded vocabulary rows are zero */
    for (size_t i = (size_t)101 * 48; i < (size_t)128 * 48; i++) assert_true(fx.params[i] == 0.0f);
    fixture_free(&fx);
}

/* Forward (logits, loss) and backward (every gradient) of one micro-batch. */
static void check_against_reference(const char *ref_name, gpt_precision precision, int recompute,
                                    double loss_tol, double grad_tol) {
    fixture fx;
    fixture_load(&fx, ref_name);
    const gpt_config *c = &fx.cfg;
    st_error err = {0};
    gpt_workspace *ws;
    assert_int_equal(gpt_workspace_create(&ws, compute_backend_cpu(), c, fx.B, fx.T, recompute, precision, &err), ST_OK);
    size_t n = gpt_num_params(c);
    st_bf16 *p16 = malloc(n * sizeof *p16);
    gpt_f32_to_bf16(fx.params, p16, n);
    gpt_weights w = {.precision = precision, .f32 = fx.params, .bf16 = p16};

    float *logits = malloc(sizeof(float) * fx.B * fx.T * c->padded_vocab);
    float loss = gpt_forward(ws, w, fx.inputs, fx.targets, fx.B, fx.T, logits);
    size_t nl;
    double *ref_logits = fixture_f64(fx.ref, "logits", &nl);
    double *ref_loss = fixture_f64(fx.ref, "loss", NULL);
    assert_int_equal(nl, (size_t)fx.B * fx.T * c->vocab_size);
    /* our rows are Vp wide: compare the real columns */
    float *real = malloc(nl * sizeof *real);
    for (int r = 0; r < fx.B * fx.T; r++)
        memcpy(real + (size_t)r * c->vocab_size, logits + (size_t)r * c->padded_vocab, sizeof(float) * c->vocab_size);
    double le = rel_err_f32(real, ref_logits, nl);
    double lossrel = fabs(loss - ref_loss[0]) / fabs(ref_loss[0]);
    printf("  loss %.7f ref %.7f rel %.2e, logits rel %.2e\n", loss, ref_loss[0], lossrel, le);
    assert_true(lossrel <= loss_tol);
    assert_true(le <= grad_tol);

    float *grads = calloc(n, sizeof *grads);
    float loss2 = gpt_forward_backward(ws, w, grads, fx.inputs, fx.targets, fx.B, fx.T, 1.0f);
    assert_true(loss2 == loss);   /* same forward, bit for bit */
    double worst = compare_params(fx.ref, "grad.", c, grads, grad_tol, "gradient");
    printf("  worst gradient relative error %.2e (bound %.0e)\n", worst, grad_tol);
    assert_true(worst <= grad_tol);
    /* padded vocabulary rows get no gradient */
    for (size_t i = (size_t)c->vocab_size * c->d_model; i < (size_t)c->padded_vocab * c->d_model; i++)
        assert_true(grads[i] == 0.0f);

    free(grads); free(real); free(ref_logits); free(ref_loss); free(logits); free(p16);
    gpt_workspace_free(ws);
    fixture_free(&fx);
}

/* fp32: the bounds, 1e-5 on the loss and 1e-4 on every gradient. */
static void test_fp32_matches_reference(void **state) {
    (void)state;
    check_against_reference(FIXTURE("gpt_small_ref_fp32.safetensors"), GPT_FP32, 0, 1e-5, 1e-4);
}
static void test_fp32_recompute_matches_reference(void **state) {
    (void)state;
    check_against_reference(FIXTURE("gpt_small_ref_fp32.safetensors"), GPT_FP32, 1, 1e-5, 1e-4);
}
/* Mixed: the reference computes with the same bf16-rounded weights in
 * float64, so the only difference left is fp32 activation arithmetic, and
 * the fp32 bounds hold. */
static void test_mixed_matches_bf16_reference(void **state) {
    (void)state;
    check_against_reference(FIXTURE("gpt_small_ref_bf16.safetensors"), GPT_MIXED_BF16, 1, 1e-5, 1e-4);
}

/* Recomputation changes memory, not math: gradients are bit-identical. */
static void test_recompute_is_bit_identical(void **state) {
    (void)state;
    fixture fx;
    fixture_load(&fx, FIXTURE("gpt_small_ref_fp32.safetensors"));
    size_t n = gpt_num_params(&fx.cfg);
    float *g[2];
    for (int r = 0; r < 2; r++) {
        gpt_workspace *ws;
        st_error err = {0};
        assert_int_equal(gpt_workspace_create(&ws, compute_backend_cpu(), &fx.cfg, fx.B, fx.T, r, GPT_FP32, &err), ST_OK);
        g[r] = calloc(n, sizeof(float));
        gpt_weights w = {.precision = GPT_FP32, .f32 = fx.params};
        gpt_forward_backward(ws, w, g[r], fx.inputs, fx.targets, fx.B, fx.T, 1.0f);
        gpt_workspace_free(ws);
    }
    assert_memory_equal(g[0], g[1], n * sizeof(float));
    free(g[0]);
    free(g[1]);
    fixture_free(&fx);
}

/* ---- edge cases of the passes -------------------------------------------------
 * A zero gradient scale and a backward without targets give zero gradients
 * (not garbage from the logits or stale scratch), and micro-batches larger
 * than the workspace are refused instead of overrunning it. A model of its
 * own, with a vocabulary of 200: not a multiple of 128, so the padded
 * columns matter. */
enum { SMALL_B = 2, SMALL_T = 5 };

typedef struct small_model {
    gpt_config cfg;
    float *params, *grads;
    gpt_workspace *ws;
    int32_t tokens[SMALL_B * SMALL_T], targets[SMALL_B * SMALL_T];
} small_model;

static void small_model_create(small_model *f) {
    st_error err = {0};
    f->cfg = (gpt_config){.n_layer = 2, .n_head = 2, .d_model = 16, .n_ctx = 8, .vocab_size = 200};
    assert_int_equal(gpt_config_check(&f->cfg, &err), ST_OK);
    size_t n = gpt_num_params(&f->cfg);
    f->params = calloc(n, sizeof(float));
    f->grads = calloc(n, sizeof(float));
    assert_non_null(f->params);
    assert_non_null(f->grads);
    gpt_init_params(&f->cfg, f->params, 7);
    assert_int_equal(gpt_workspace_create(&f->ws, compute_backend_cpu(), &f->cfg, SMALL_B, SMALL_T, 1, GPT_FP32, &err), ST_OK);
    for (int i = 0; i < SMALL_B * SMALL_T; i++) {
        f->tokens[i] = (i * 37) % 200;
        f->targets[i] = i == 3 ? 199 : (i * 11 + 5) % 200;   /* the last real token included */
    }
}

static void small_model_free(small_model *f) {
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
    small_model f;
    small_model_create(&f);
    gpt_weights w = {.precision = GPT_FP32, .f32 = f.params};
    size_t n = gpt_num_params(&f.cfg);
    float loss = gpt_forward_backward(f.ws, w, f.grads, f.tokens, f.targets, SMALL_B, SMALL_T, 0.0f);
    assert_true(isfinite(loss) && loss > 0);
    assert_true(abs_sum(f.grads, n) == 0.0);
    small_model_free(&f);
}

static void test_backward_without_targets_gives_zero_gradients(void **state) {
    (void)state;
    small_model f;
    small_model_create(&f);
    gpt_weights w = {.precision = GPT_FP32, .f32 = f.params};
    size_t n = gpt_num_params(&f.cfg);
    /* A real pass first, so that the scratch holds stale gradients. */
    gpt_forward_backward(f.ws, w, f.grads, f.tokens, f.targets, SMALL_B, SMALL_T, 1.0f);
    assert_true(abs_sum(f.grads, n) > 0);
    memset(f.grads, 0, n * sizeof(float));
    float loss = gpt_forward_backward(f.ws, w, f.grads, f.tokens, NULL, SMALL_B, SMALL_T, 1.0f);
    assert_true(loss == 0.0f);
    assert_true(abs_sum(f.grads, n) == 0.0);
    small_model_free(&f);
}

static void test_larger_than_workspace_is_refused(void **state) {
    (void)state;
    small_model f;
    small_model_create(&f);
    gpt_weights w = {.precision = GPT_FP32, .f32 = f.params};
    int32_t big[(SMALL_B + 1) * (SMALL_T + 1)] = {0};
    assert_true(isnan(gpt_forward(f.ws, w, big, big, SMALL_B + 1, SMALL_T, NULL)));
    assert_true(isnan(gpt_forward(f.ws, w, big, big, SMALL_B, SMALL_T + 1, NULL)));
    assert_true(isnan(gpt_forward_backward(f.ws, w, f.grads, big, big, SMALL_B, SMALL_T + 1, 1.0f)));
    assert_true(isnan(gpt_forward(f.ws, w, big, big, 0, SMALL_T, NULL)));
    /* Smaller is fine, and the same as a workspace of that size would give. */
    float small = gpt_forward(f.ws, w, f.tokens, f.targets, 1, 3, NULL);
    assert_true(isfinite(small) && small > 0);
    small_model_free(&f);
}

/* The Hub's layouts: BF16 with a "transformer." prefix, attn.bias buffers and
 * a tied lm_head; F16 without prefix. Both hold the rounding of the F32 init. */
static void check_variant(const char *path, int bf16) {
    st_error err = {0};
    gpt_config c32, c;
    float *p32, *p;
    assert_int_equal(gpt_load_safetensors(FIXTURE("gpt_small_init.safetensors"), 4, &c32, &p32, &err), ST_OK);
    assert_int_equal(gpt_load_safetensors(path, 4, &c, &p, &err), ST_OK);
    assert_memory_equal(&c, &c32, sizeof c);
    size_t n = gpt_num_params(&c);
    for (size_t i = 0; i < n; i++) {
        float want = bf16 ? st_bf16_to_f32(st_f32_to_bf16(p32[i])) : st_f16_to_f32(st_f32_to_f16(p32[i]));
        if (p[i] != want) fail_msg("%s: element %zu is %g, expected %g", path, i, p[i], want);
    }
    st_free_aligned(p32);
    st_free_aligned(p);
}
static void test_loads_hub_bf16_layout(void **state) {
    (void)state;
    check_variant(FIXTURE("gpt_small_hf_bf16.safetensors"), 1);
}
static void test_loads_f16(void **state) {
    (void)state;
    check_variant(FIXTURE("gpt_small_f16.safetensors"), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_inferred_from_shapes),
        cmocka_unit_test(test_fp32_matches_reference),
        cmocka_unit_test(test_fp32_recompute_matches_reference),
        cmocka_unit_test(test_mixed_matches_bf16_reference),
        cmocka_unit_test(test_recompute_is_bit_identical),
        cmocka_unit_test(test_zero_grad_scale_gives_zero_gradients),
        cmocka_unit_test(test_backward_without_targets_gives_zero_gradients),
        cmocka_unit_test(test_larger_than_workspace_is_refused),
        cmocka_unit_test(test_loads_hub_bf16_layout),
        cmocka_unit_test(test_loads_f16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
