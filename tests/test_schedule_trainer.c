/* test_schedule_trainer.c - three AdamW steps of the in-memory trainer, with
 * warmup, cosine decay, clipping and two accumulated micro-batches, against
 * the float64 PyTorch reference; run-to-run determinism; and the argument
 * checks (AdamW settings out of range, evaluations past the micro-batch);
 * and the trainer on the checking backend, bit for bit the CPU backend's. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "strata/gpt_io.h"
#include "strata/train.h"
#include "testutil.h"

static train_config config_from(safetensors_file *ref, gpt_config model, gpt_precision p, int recompute) {
    train_config tc = train_config_defaults();
    tc.model = model;
    tc.precision = p;
    tc.recompute = recompute;
    tc.B = fixture_int(ref, "B");
    tc.T = fixture_int(ref, "T");
    tc.micro_batches = fixture_int(ref, "micro_batches");
    tc.lr = (lr_schedule){.max_lr = (float)fixture_double(ref, "max_lr"), .min_lr = (float)fixture_double(ref, "min_lr"),
                          .warmup = fixture_int(ref, "warmup"), .total = fixture_int(ref, "total_steps")};
    tc.adam = (adamw_hparams){.beta1 = (float)fixture_double(ref, "beta1"), .beta2 = (float)fixture_double(ref, "beta2"),
                              .eps = (float)fixture_double(ref, "eps"),
                              .weight_decay = (float)fixture_double(ref, "weight_decay")};
    tc.clip = (float)fixture_double(ref, "clip");
    return tc;
}

/* Runs the fixture's steps; returns the trainer for inspection. */
static trainer *run_steps(safetensors_file *ref, gpt_precision p, int recompute, train_step_stats *stats) {
    st_error err = {0};
    gpt_config cfg;
    float *init;
    assert_int_equal(gpt_load_safetensors(fixture_init_of(safetensors_path(ref)), fixture_int(ref, "n_head"), &cfg,
                                          &init, &err), ST_OK);
    train_config tc = config_from(ref, cfg, p, recompute);
    trainer *t;
    assert_int_equal(trainer_create(&t, &tc, init, &err), ST_OK);
    st_free_aligned(init);
    int32_t *tokens = fixture_i32(ref, "tokens", NULL);
    int steps = fixture_int(ref, "steps");
    size_t per_step = (size_t)tc.micro_batches * tc.B * (tc.T + 1);
    for (int s = 0; s < steps; s++) assert_int_equal(trainer_step(t, tokens + s * per_step, &stats[s], &err), ST_OK);
    free(tokens);
    return t;
}

static void check_steps(const char *ref_path, gpt_precision p, int recompute, double weight_tol) {
    st_error err = {0};
    safetensors_file *ref;
    assert_int_equal(safetensors_open(&ref, ref_path, &err), ST_OK);
    train_step_stats st[3];
    trainer *t = run_steps(ref, p, recompute, st);
    double *loss = fixture_f64(ref, "step_loss", NULL), *norm = fixture_f64(ref, "grad_norm", NULL);
    double *lr = fixture_f64(ref, "lr", NULL);
    double clip = fixture_double(ref, "clip");
    for (int s = 0; s < 3; s++) {
        printf("  step %d: loss %.7f (ref %.7f) norm %.6f (ref %.6f) lr %.3g\n", s, st[s].loss, loss[s],
               st[s].grad_norm, norm[s], st[s].lr);
        assert_true(fabs(st[s].loss - loss[s]) / loss[s] < 1e-5);
        assert_true(fabs(st[s].grad_norm - norm[s]) / norm[s] < 1e-4);
        assert_true(fabs(st[s].lr - lr[s]) / lr[s] < 1e-6);
        assert_true(norm[s] > clip);   /* the fixture exercises clipping on every step */
    }
    const gpt_config *c = &trainer_config(t)->model;
    double worst = compare_params(ref, "step3.", c, trainer_params(t), weight_tol, "weights after 3 steps");
    printf("  worst relative error of the weights after 3 steps: %.2e (bound %.0e)\n", worst, weight_tol);
    assert_true(worst <= weight_tol);
    free(loss); free(norm); free(lr);
    trainer_free(t);
    safetensors_close(ref);
}

static void test_fp32_three_steps_match_reference(void **state) {
    (void)state;
    check_steps(FIXTURE("gpt_small_ref_fp32.safetensors"), GPT_FP32, 0, 1e-4);
}

static void test_mixed_three_steps_match_reference(void **state) {
    (void)state;
    check_steps(FIXTURE("gpt_small_ref_bf16.safetensors"), GPT_MIXED_BF16, 1, 1e-4);
}

/* Llama: grouped-query attention, untied head, Llama 3.1 rope scaling; and
 * multi-query, tied. Mixed precision with and without recomputation. */
static void test_llama_three_steps_match_reference(void **state) {
    (void)state;
    check_steps(FIXTURE("llama_small_ref_fp32.safetensors"), GPT_FP32, 0, 1e-4);
    check_steps(FIXTURE("llama_small_ref_bf16.safetensors"), GPT_MIXED_BF16, 1, 1e-4);
    check_steps(FIXTURE("llama_tied_ref_fp32.safetensors"), GPT_FP32, 1, 1e-4);
    check_steps(FIXTURE("llama_tied_ref_bf16.safetensors"), GPT_MIXED_BF16, 0, 1e-4);
}

static void test_bit_identical_run_to_run(void **state) {
    (void)state;
    st_error err = {0};
    safetensors_file *ref;
    assert_int_equal(safetensors_open(&ref, FIXTURE("gpt_small_ref_fp32.safetensors"), &err), ST_OK);
    for (int p = 0; p < 2; p++) {
        train_step_stats a[3], b[3];
        trainer *t1 = run_steps(ref, (gpt_precision)p, 1, a), *t2 = run_steps(ref, (gpt_precision)p, 1, b);
        for (int s = 0; s < 3; s++) assert_memory_equal(&a[s].loss, &b[s].loss, sizeof(float));
        assert_memory_equal(trainer_params(t1), trainer_params(t2),
                            gpt_num_params(&trainer_config(t1)->model) * sizeof(float));
        trainer_free(t1);
        trainer_free(t2);
    }
    safetensors_close(ref);
}

static void test_lr_schedule_shape(void **state) {
    (void)state;
    lr_schedule s = {.max_lr = 1.0f, .min_lr = 0.1f, .warmup = 4, .total = 14};
    assert_float_equal(lr_schedule_at(&s, 0), 0.25, 1e-7);
    assert_float_equal(lr_schedule_at(&s, 3), 1.0, 1e-7);
    assert_float_equal(lr_schedule_at(&s, 8), 0.55, 1e-6);    /* halfway down the cosine */
    assert_float_equal(lr_schedule_at(&s, 13), 0.1, 1e-7);
    assert_float_equal(lr_schedule_at(&s, 1000), 0.1, 1e-7);  /* stays at min past total */
    st_error err = {0};
    lr_schedule bad = {.max_lr = -1.0f, .min_lr = 0, .warmup = 0, .total = 10};
    assert_int_equal(lr_schedule_check(&bad, &err), ST_EINVAL);
}

/* ---- argument checks ------------------------------------------------------------
 * AdamW hyperparameters out of range (a beta of 1 or more divides by zero in
 * the bias correction; NaN slips past "< 0" checks) are refused, and an
 * evaluation larger than the trainer's micro-batch does not overrun its
 * buffers. */
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
    float l = NAN;
    assert_int_equal(trainer_eval(t, tokens, 3, 4, &l, &err), ST_EINVAL);   /* B 3 > 2 */
    assert_int_equal(trainer_eval(t, tokens, 2, 8, &l, &err), ST_EINVAL);   /* T 8 > 4 */
    assert_int_equal(trainer_eval(t, tokens, 0, 4, &l, &err), ST_EINVAL);
    assert_true(isnan(l));
    assert_int_equal(trainer_eval(t, tokens, 2, 4, &l, &err), ST_OK);
    assert_true(isfinite(l) && l > 0);
    /* a token id outside the vocabulary is refused, by eval and by step */
    tokens[5] = tc.model.vocab_size;
    assert_int_equal(trainer_eval(t, tokens, 2, 4, &l, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "token 5"));
    int32_t *step_tokens = calloc((size_t)tc.micro_batches * tc.B * (tc.T + 1), sizeof *step_tokens);
    assert_non_null(step_tokens);
    step_tokens[3] = -1;
    assert_int_equal(trainer_step(t, step_tokens, NULL, &err), ST_EINVAL);
    assert_int_equal(trainer_steps_done(t), 0);
    free(step_tokens);
    trainer_free(t);
}

/* ---- on the checking backend ------------------------------------------------------
 * Compute on device copies (the trainer's parameters, gradients and moments
 * stay in host memory) gives the CPU backend's bits: losses, gradient norms,
 * an evaluation and the final weights, fp32 and mixed, clipping on and off. */
enum { BACKEND_STEPS = 3 };

typedef struct backend_run {
    train_step_stats st[BACKEND_STEPS];
    float eval;
    float *params;
} backend_run;

/* A backend's table with alloc counted (the table first, so an op's `be`
 * leads back to the counter): a trainer that ignored tc.backend would
 * compare the CPU backend with itself and pass. */
typedef struct counting_backend {
    compute_backend table;
    const compute_backend *inner;
    int *allocations;
} counting_backend;

static void *counting_alloc(const compute_backend *be, size_t bytes) {
    const counting_backend *c = (const counting_backend *)be;
    (*c->allocations)++;
    return c->inner->alloc(c->inner, bytes);
}

static void train_on(const compute_backend *inner, gpt_precision p, float clip, const int32_t *tokens,
                     backend_run *out) {
    st_error err = {0};
    int allocations = 0;
    counting_backend be = {.table = *inner, .inner = inner, .allocations = &allocations};
    be.table.alloc = counting_alloc;
    train_config tc = tiny();
    tc.model.n_layer = 2;
    tc.micro_batches = 2;
    tc.recompute = 0;
    tc.precision = p;
    tc.clip = clip;
    tc.lr = (lr_schedule){.max_lr = 1e-2f, .min_lr = 1e-3f, .warmup = 1, .total = BACKEND_STEPS};
    tc.backend = &be.table;
    trainer *t;
    assert_int_equal(trainer_create(&t, &tc, NULL, &err), ST_OK);
    assert_true(allocations > 0);   /* the workspace is on this backend */
    const size_t per_step = (size_t)tc.micro_batches * tc.B * (tc.T + 1);
    const size_t n = gpt_num_params(&trainer_config(t)->model);   /* the checked config: padded vocabulary */
    for (int s = 0; s < BACKEND_STEPS; s++)
        assert_int_equal(trainer_step(t, tokens + s * per_step, &out->st[s], &err), ST_OK);
    assert_int_equal(trainer_eval(t, tokens, tc.B, tc.T, &out->eval, &err), ST_OK);
    out->params = malloc(n * sizeof(float));
    assert_non_null(out->params);
    memcpy(out->params, trainer_params(t), n * sizeof(float));
    trainer_free(t);
}

static void test_check_backend_trains_bit_identically(void **state) {
    (void)state;
    train_config tc = tiny();
    tc.model.n_layer = 2;
    st_error err = {0};
    assert_int_equal(gpt_config_check(&tc.model, &err), ST_OK);
    const size_t ntok = (size_t)BACKEND_STEPS * 2 * tc.B * (tc.T + 1), n = gpt_num_params(&tc.model);
    int32_t *tokens = malloc(ntok * sizeof *tokens);
    assert_non_null(tokens);
    st_rng r;
    st_rng_seed(&r, 11);
    for (size_t i = 0; i < ntok; i++) tokens[i] = (int32_t)(st_rng_next(&r) % (uint64_t)tc.model.vocab_size);
    for (int p = 0; p < 2; p++)
        for (int clip = 0; clip < 2; clip++) {
            backend_run want, got;
            const float max_norm = clip ? 0.05f : 0.0f;
            train_on(compute_backend_cpu(), (gpt_precision)p, max_norm, tokens, &want);
            train_on(compute_backend_check(), (gpt_precision)p, max_norm, tokens, &got);
            printf("  %s clip %g: losses %.6f %.6f %.6f, norms %.4f %.4f %.4f\n", gpt_precision_name((gpt_precision)p),
                   (double)max_norm, want.st[0].loss, want.st[1].loss, want.st[2].loss, want.st[0].grad_norm,
                   want.st[1].grad_norm, want.st[2].grad_norm);
            for (int s = 0; s < BACKEND_STEPS; s++) {
                assert_memory_equal(&got.st[s].loss, &want.st[s].loss, sizeof(float));
                assert_memory_equal(&got.st[s].grad_norm, &want.st[s].grad_norm, sizeof(float));
                if (clip) assert_true(want.st[s].grad_norm > max_norm);   /* clipping is exercised */
            }
            assert_memory_equal(&got.eval, &want.eval, sizeof(float));
            assert_memory_equal(got.params, want.params, n * sizeof(float));
            free(want.params);
            free(got.params);
        }
    free(tokens);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32_three_steps_match_reference),
        cmocka_unit_test(test_mixed_three_steps_match_reference),
        cmocka_unit_test(test_llama_three_steps_match_reference),
        cmocka_unit_test(test_bit_identical_run_to_run),
        cmocka_unit_test(test_lr_schedule_shape),
        cmocka_unit_test(test_bad_hyperparameters_are_refused),
        cmocka_unit_test(test_eval_larger_than_micro_batch_is_refused),
        cmocka_unit_test(test_check_backend_trains_bit_identically),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
