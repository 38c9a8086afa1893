/* test_model_gpt.c - the GPT-2 forward and backward against the float64
 * PyTorch reference (tests/fixtures, made by tools/make_fixtures.py), in fp32
 * and in mixed precision, with and without recomputation; the edge cases of
 * the passes (a zero gradient scale, no targets, shapes past the workspace);
 * the checking backend bit for bit against the CPU backend's, and each
 * backend's workspace bytes; plus loading the published-checkpoint variants
 * of the same weights. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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
    assert_int_equal(gpt_load_safetensors(fixture_init_of(ref_name), n_head, &fx->cfg, &fx->params, &err), ST_OK);
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

/* Llama, as Hugging Face's LlamaForCausalLM computes it: grouped-query
 * attention, an untied head and Llama 3.1's rotary scaling; and multi-query
 * attention with a tied head at Llama 3's rotary base. The same bounds as
 * GPT-2's: the only difference left from the float64 reference is fp32
 * arithmetic (the rotary angles included, computed in fp32 as HF does). */
static void test_llama_config_from_directory(void **state) {
    (void)state;
    fixture fx;
    fixture_load(&fx, FIXTURE("llama_small_ref_fp32.safetensors"));
    const gpt_config *c = &fx.cfg;
    assert_int_equal(c->arch, GPT_ARCH_LLAMA);
    assert_int_equal(c->n_layer, 2);
    assert_int_equal(c->n_head, 4);
    assert_int_equal(c->n_kv_head, 2);
    assert_int_equal(c->d_model, 48);
    assert_int_equal(c->d_ff, 80);
    assert_int_equal(c->tied, 0);
    assert_true(c->rope_theta == 10000.0f && c->norm_eps == 1e-5f);
    assert_true(c->rope_scaling.factor == 8.0f && c->rope_scaling.original_context == 32);
    /* unit 0 is the embedding, the last unit the untied head (norm, lm_head);
     * the padded rows of both matrices are zero */
    assert_int_equal(gpt_num_units(c), 4);
    assert_int_equal(gpt_head_unit(c), 3);
    assert_int_equal(gpt_unit_tensor_count(c, 0), 1);
    assert_int_equal(gpt_unit_tensor_count(c, 3), LLAMA_HEAD_TENSORS);
    const gpt_tensor_info head = gpt_unit_tensor(c, 3, LLAMA_HEAD);
    assert_string_equal(head.name, "lm_head.weight");
    assert_int_equal(head.numel, (size_t)128 * 48);
    assert_int_equal(gpt_unit_offset(c, 3) + gpt_unit_numel(c, 3), gpt_num_params(c));
    const size_t head_at = gpt_unit_offset(c, 3) + head.offset;
    for (size_t i = (size_t)101 * 48; i < (size_t)128 * 48; i++) assert_true(fx.params[i] == 0.0f);
    for (size_t i = head_at + (size_t)101 * 48; i < head_at + head.numel; i++) assert_true(fx.params[i] == 0.0f);
    int real_rows_set = 0;   /* the head was read into them */
    for (size_t i = head_at; i < head_at + (size_t)101 * 48; i++) real_rows_set |= fx.params[i] != 0.0f;
    assert_true(real_rows_set);
    assert_int_equal(gpt_num_real_params(c), 46800);   /* the reference's count */
    fixture_free(&fx);
    fixture_load(&fx, FIXTURE("llama_tied_ref_fp32.safetensors"));
    assert_int_equal(fx.cfg.tied, 1);
    assert_int_equal(fx.cfg.n_kv_head, 1);
    assert_int_equal(gpt_unit_tensor_count(&fx.cfg, 0), 2);   /* embedding and the final norm */
    assert_int_equal(gpt_num_units(&fx.cfg), fx.cfg.n_layer + 1);
    assert_int_equal(gpt_head_unit(&fx.cfg), 0);
    assert_int_equal(gpt_num_real_params(&fx.cfg), 35040);
    fixture_free(&fx);
}
static void test_llama_fp32_matches_reference(void **state) {
    (void)state;
    check_against_reference(FIXTURE("llama_small_ref_fp32.safetensors"), GPT_FP32, 0, 1e-5, 1e-4);
    check_against_reference(FIXTURE("llama_tied_ref_fp32.safetensors"), GPT_FP32, 0, 1e-5, 1e-4);
}
static void test_llama_fp32_recompute_matches_reference(void **state) {
    (void)state;
    check_against_reference(FIXTURE("llama_small_ref_fp32.safetensors"), GPT_FP32, 1, 1e-5, 1e-4);
    check_against_reference(FIXTURE("llama_tied_ref_fp32.safetensors"), GPT_FP32, 1, 1e-5, 1e-4);
}
static void test_llama_mixed_matches_bf16_reference(void **state) {
    (void)state;
    check_against_reference(FIXTURE("llama_small_ref_bf16.safetensors"), GPT_MIXED_BF16, 1, 1e-5, 1e-4);
    check_against_reference(FIXTURE("llama_tied_ref_bf16.safetensors"), GPT_MIXED_BF16, 0, 1e-5, 1e-4);
}

/* Recomputation changes memory, not math: gradients are bit-identical. */
static void check_recompute_is_bit_identical(const char *ref_name) {
    fixture fx;
    fixture_load(&fx, ref_name);
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
static void test_recompute_is_bit_identical(void **state) {
    (void)state;
    check_recompute_is_bit_identical(FIXTURE("gpt_small_ref_fp32.safetensors"));
    check_recompute_is_bit_identical(FIXTURE("llama_small_ref_fp32.safetensors"));
    check_recompute_is_bit_identical(FIXTURE("llama_tied_ref_fp32.safetensors"));
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

/* ---- the checking backend ------------------------------------------------------
 * The whole-model passes on a backend that is not unified (device copies of
 * each unit's weights and gradients and of the token ids, logits through
 * scratch and to_host) give the CPU backend's bits: losses, logits and
 * gradients, accumulated onto gradients that are not zero. */

typedef struct pass_outputs {
    float loss, loss_logits_only, loss_fb[2];
    float *logits, *logits_only, *grads;
} pass_outputs;

/* On be: a forward with targets and logits, a forward for logits only, and
 * two forward-backwards accumulating into grads (which start non-zero), at
 * b x t in a workspace of B x T. */
static void run_passes(const compute_backend *be, const gpt_config *c, gpt_weights w, int B, int T, int b, int t,
                       int recompute, const int32_t *tokens, const int32_t *targets, pass_outputs *o) {
    st_error err = {0};
    gpt_workspace *ws;
    assert_int_equal(gpt_workspace_create(&ws, be, c, B, T, recompute, w.precision, &err), ST_OK);
    const size_t n = gpt_num_params(c), nl = (size_t)b * t * c->padded_vocab;
    o->logits = malloc(nl * sizeof(float));
    o->logits_only = malloc(nl * sizeof(float));
    o->grads = malloc(n * sizeof(float));
    assert_true(o->logits && o->logits_only && o->grads);
    /* the padded columns are undefined: the same bits in both runs */
    memset(o->logits, 0, nl * sizeof(float));
    memset(o->logits_only, 0, nl * sizeof(float));
    for (size_t i = 0; i < n; i++) o->grads[i] = (float)(i % 13) * 1e-3f;
    o->loss = gpt_forward(ws, w, tokens, targets, b, t, o->logits);
    o->loss_logits_only = gpt_forward(ws, w, tokens, NULL, b, t, o->logits_only);
    o->loss_fb[0] = gpt_forward_backward(ws, w, o->grads, tokens, targets, b, t, 0.5f);
    o->loss_fb[1] = gpt_forward_backward(ws, w, o->grads, tokens, targets, b, t, 1.0f);
    gpt_workspace_free(ws);
}

static void check_backend_matches_cpu(const gpt_config *c, const float *params, int B, int T, int b, int t,
                                      gpt_precision precision, int recompute) {
    const size_t n = gpt_num_params(c), nl = (size_t)b * t * c->padded_vocab;
    st_bf16 *p16 = malloc(n * sizeof *p16);
    int32_t *tokens = malloc(sizeof(int32_t) * b * t), *targets = malloc(sizeof(int32_t) * b * t);
    assert_true(p16 && tokens && targets);
    gpt_f32_to_bf16(params, p16, n);
    gpt_weights w = {.precision = precision, .f32 = params, .bf16 = p16};
    st_rng r;
    st_rng_seed(&r, 5);
    for (int i = 0; i < b * t; i++) {
        tokens[i] = (int32_t)(st_rng_next(&r) % (uint64_t)c->vocab_size);
        targets[i] = (int32_t)(st_rng_next(&r) % (uint64_t)c->vocab_size);
    }
    pass_outputs want, got;
    run_passes(compute_backend_cpu(), c, w, B, T, b, t, recompute, tokens, targets, &want);
    run_passes(compute_backend_check(), c, w, B, T, b, t, recompute, tokens, targets, &got);
    printf("  %s recompute %d, %d x %d in %d x %d: loss %.7f\n", gpt_precision_name(precision), recompute, b, t, B,
           T, want.loss);
    assert_true(isfinite(want.loss) && want.loss > 0);
    assert_memory_equal(&got.loss, &want.loss, sizeof(float));
    assert_memory_equal(&got.loss_logits_only, &want.loss_logits_only, sizeof(float));
    assert_memory_equal(got.loss_fb, want.loss_fb, sizeof want.loss_fb);
    assert_memory_equal(got.logits, want.logits, nl * sizeof(float));
    assert_memory_equal(got.logits_only, want.logits_only, nl * sizeof(float));
    assert_memory_equal(got.grads, want.grads, n * sizeof(float));
    pass_outputs *both[2] = {&want, &got};
    for (int k = 0; k < 2; k++) {
        free(both[k]->logits);
        free(both[k]->logits_only);
        free(both[k]->grads);
    }
    free(p16);
    free(tokens);
    free(targets);
}

static void test_check_backend_matches_cpu(void **state) {
    (void)state;
    const char *refs[] = {FIXTURE("gpt_small_ref_fp32.safetensors"), FIXTURE("llama_small_ref_fp32.safetensors"),
                          FIXTURE("llama_tied_ref_fp32.safetensors")};
    for (int k = 0; k < 3; k++) {
        fixture fx;
        fixture_load(&fx, refs[k]);
        for (int p = 0; p < 2; p++)
            for (int r = 0; r < 2; r++) {
                check_backend_matches_cpu(&fx.cfg, fx.params, fx.B, fx.T, fx.B, fx.T, (gpt_precision)p, r);
                /* a micro-batch smaller than the workspace */
                check_backend_matches_cpu(&fx.cfg, fx.params, fx.B, fx.T, 1, fx.T - 3, (gpt_precision)p, r);
            }
        fixture_free(&fx);
    }
}

/* More rows than the head computes at once: logits leave in two chunks. */
static void test_check_backend_matches_cpu_over_head_chunks(void **state) {
    (void)state;
    st_error err = {0};
    gpt_config c = {.n_layer = 1, .n_head = 2, .d_model = 16, .n_ctx = 640, .vocab_size = 200};
    assert_int_equal(gpt_config_check(&c, &err), ST_OK);
    float *params = malloc(gpt_num_params(&c) * sizeof(float));
    assert_non_null(params);
    gpt_init_params(&c, params, 3);
    assert_true(2 * 600 > GPT_HEAD_CHUNK_ROWS);
    check_backend_matches_cpu(&c, params, 2, 600, 2, 600, GPT_FP32, 1);
    check_backend_matches_cpu(&c, params, 2, 600, 2, 600, GPT_MIXED_BF16, 0);
    free(params);
}

/* The CPU backend allocates the device buffers it always did; the extra
 * buffers of a backend that is not unified exist only there. */
static void test_workspace_bytes_per_backend(void **state) {
    (void)state;
    st_error err = {0};
    gpt_config c;
    assert_int_equal(gpt_config_from_name(&c, "gpt2-tiny", &err), ST_OK);
    const int B = 4, T = 64;
    const size_t N = (size_t)B * T, NC = N * c.d_model, f = sizeof(float);
    const size_t u0 = gpt_unit_numel(&c, 0), u1 = gpt_unit_numel(&c, 1);
    size_t scratch = gpt_block_scratch_numel(&c, B, T), head = gpt_head_scratch_numel(&c, B, T);
    if (head > scratch) scratch = head;
    size_t host = 0;
    for (int p = 0; p < 2; p++)
        for (int r = 0; r < 2; r++) {
            const size_t acts = gpt_block_acts_numel(&c, B, T) * (r ? 1 : (size_t)c.n_layer);
            const size_t cpu_device = ((c.n_layer + 1) * NC + acts + scratch + NC + (p ? u0 + u1 : 0)) * f;
            const size_t cpu = gpt_workspace_bytes(compute_backend_cpu(), &c, B, T, r, (gpt_precision)p);
            const size_t check = gpt_workspace_bytes(compute_backend_check(), &c, B, T, r, (gpt_precision)p);
            /* what is left is the workspace's host struct, the same every time */
            if (p == 0 && r == 0) host = cpu - cpu_device;
            assert_int_equal(cpu - cpu_device, host);
            assert_true(host < 1024);
            /* weights as f32 (fp32: copied in; mixed: the widening buffers, already
             * counted) and, mixed, their bf16 staging; gradients; token ids */
            const size_t extra = (p ? (u0 > u1 ? u0 : u1) * sizeof(st_bf16) : (u0 + u1) * f) + (u0 + u1) * f +
                                 2 * N * sizeof(int32_t);
            assert_int_equal(check - cpu, extra);
        }
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

typedef struct unit_source { const gpt_config *cfg; const float *params; } unit_source;
static st_status read_unit_from(void *ctx, int u, float *out, st_error *err) {
    (void)err;
    const unit_source *src = ctx;
    memcpy(out, src->params + gpt_unit_offset(src->cfg, u), gpt_unit_numel(src->cfg, u) * sizeof(float));
    return ST_OK;
}

/* The vocabulary's fingerprint rides in the file's metadata; files from
 * elsewhere have none (0), and a damaged value is refused. */
static void test_vocab_fingerprint_in_metadata(void **state) {
    (void)state;
    st_error err = {0};
    gpt_config c;
    float *p;
    assert_int_equal(gpt_load_safetensors(FIXTURE("gpt_small_init.safetensors"), 4, &c, &p, &err), ST_OK);
    hf_checkpoint *ck;
    assert_int_equal(hf_checkpoint_open(&ck, FIXTURE("gpt_small_init.safetensors"), 4, &err), ST_OK);
    assert_true(hf_checkpoint_vocab_fingerprint(ck) == 0);
    hf_checkpoint_close(ck);
    char path[64];
    snprintf(path, sizeof path, "/tmp/strata_fp_%d.safetensors", (int)getpid());
    const uint64_t want = 0x8000000000000001ull;   /* the top bit too: no trip through a double */
    unit_source src = {&c, p};
    assert_int_equal(gpt_save_safetensors_by_unit(path, &c, read_unit_from, &src, SAFETENSORS_F32, want, &err), ST_OK);
    assert_int_equal(hf_checkpoint_open(&ck, path, 4, &err), ST_OK);
    assert_true(hf_checkpoint_vocab_fingerprint(ck) == want);
    hf_checkpoint_close(ck);
    float *back;
    gpt_config cb;
    assert_int_equal(gpt_load_safetensors(path, 4, &cb, &back, &err), ST_OK);   /* loads as before */
    st_free_aligned(back);
    /* the same file with a damaged value */
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    char head[4096];
    size_t n = fread(head, 1, sizeof head, f);
    char *at = NULL;
    for (size_t k = 0; k + 16 <= n && !at; k++)
        if (!memcmp(head + k, "8000000000000001", 16)) at = head + k;
    assert_non_null(at);
    at[15] = 'x';
    fseek(f, 0, SEEK_SET);
    assert_int_equal(fwrite(head, 1, n, f), n);
    fclose(f);
    assert_int_equal(hf_checkpoint_open(&ck, path, 4, &err), ST_ECORRUPT);
    assert_non_null(strstr(err.msg, GPT_META_VOCAB_FINGERPRINT));
    unlink(path);
    st_free_aligned(p);
}

/* A checkpoint directory written and read back: sharded (several files and
 * the index), then one file, which removes the shards; the weights bit for
 * bit; and what a directory may not hold. */
/* Returns how many safetensors files the save wrote: 1 unsharded, else more. */
static int save_and_reopen(const char *dir, const gpt_config *c, const float *params, uint64_t shard_bytes) {
    st_error err = {0};
    unit_source src = {c, params};
    hf_save_opts o = {.dtype = SAFETENSORS_F32, .shard_bytes = shard_bytes, .vocab_fingerprint = 0x1234};
    assert_int_equal(hf_checkpoint_save(dir, c, read_unit_from, &src, &o, &err), ST_OK);
    int files = 0;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c safetensors$ > '%s/count'", dir, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/count", dir);
    FILE *f = fopen(cmd, "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%d", &files), 1);
    fclose(f);
    unlink(cmd);
    if (shard_bytes) assert_true(files > 1);
    else assert_int_equal(files, 1);
    gpt_config back;
    float *p;
    assert_int_equal(gpt_load_safetensors(dir, 0, &back, &p, &err), ST_OK);
    assert_true(gpt_config_same(&back, c));
    assert_memory_equal(p, params, gpt_num_params(c) * sizeof(float));
    st_free_aligned(p);
    hf_checkpoint *ck;
    assert_int_equal(hf_checkpoint_open(&ck, dir, 0, &err), ST_OK);
    assert_true(hf_checkpoint_vocab_fingerprint(ck) == 0x1234);
    hf_checkpoint_close(ck);
    return files;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_open_error(const char *path, st_status want, const char *needle) {
    st_error err = {0};
    hf_checkpoint *ck = NULL;
    assert_int_equal(hf_checkpoint_open(&ck, path, 0, &err), want);
    assert_null(ck);
    if (!strstr(err.msg, needle)) fail_msg("error \"%s\" should say \"%s\"", err.msg, needle);
}

static void test_checkpoint_directories(void **state) {
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/strata_ckpt_%d", (int)getpid());
    const char *refs[] = {FIXTURE("llama_small_ref_fp32.safetensors"), FIXTURE("llama_tied_ref_fp32.safetensors"),
                          FIXTURE("gpt_small_ref_fp32.safetensors")};
    for (int k = 0; k < 3; k++) {
        fixture fx;
        fixture_load(&fx, refs[k]);
        /* shards of at most 40 KB: the embedding unit's matrices alone are over it */
        save_and_reopen(dir, &fx.cfg, fx.params, 40000);
        char index[128];
        snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
        assert_int_equal(access(index, F_OK), 0);
        save_and_reopen(dir, &fx.cfg, fx.params, 0);   /* the shards and the index are gone */
        assert_int_not_equal(access(index, F_OK), 0);
        fixture_free(&fx);
    }

    /* What a directory may not hold. Starting from a good Llama one: */
    fixture fx;
    fixture_load(&fx, FIXTURE("llama_small_ref_fp32.safetensors"));
    const int shards = save_and_reopen(dir, &fx.cfg, fx.params, 40000);
    char path[160], cmd[400];
    snprintf(path, sizeof path, "%s/config.json", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s.good'", path, path);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "sed -i 's/\"attention_bias\": false/\"attention_bias\": true/' '%s'", path);
    assert_int_equal(system(cmd), 0);
    expect_open_error(dir, ST_EUNSUPPORTED, "attention_bias");
    snprintf(cmd, sizeof cmd, "sed 's/\"hidden_act\": \"silu\"/\"hidden_act\": \"gelu\"/' '%s.good' > '%s'", path, path);
    assert_int_equal(system(cmd), 0);
    expect_open_error(dir, ST_EUNSUPPORTED, "hidden_act");
    snprintf(cmd, sizeof cmd, "sed 's/\"model_type\": \"llama\"/\"model_type\": \"qwen2\"/' '%s.good' > '%s'", path,
             path);
    assert_int_equal(system(cmd), 0);
    expect_open_error(dir, ST_EUNSUPPORTED, "qwen2");
    write_text(path, "{\"model_type\": \"llama\", \"hidden_size\": 48}");
    expect_open_error(dir, ST_ECORRUPT, "missing \"intermediate_size\"");
    write_text(path, "{not json");
    expect_open_error(dir, ST_ECORRUPT, "not a JSON object");
    /* a shape config.json does not match */
    snprintf(cmd, sizeof cmd, "sed 's/\"num_key_value_heads\": 2/\"num_key_value_heads\": 4/' '%s.good' > '%s'", path,
             path);
    assert_int_equal(system(cmd), 0);
    expect_open_error(dir, ST_ECORRUPT, "k_proj.weight has shape");
    /* without config.json, a Llama file cannot say its heads */
    unlink(path);
    expect_open_error(dir, ST_EINVAL, "needs its config.json");
    snprintf(cmd, sizeof cmd, "cp '%s.good' '%s'", path, path);
    assert_int_equal(system(cmd), 0);
    /* the index names a shard that is not there, or a path out of the directory */
    char shard3[64], shard2[64];
    snprintf(shard3, sizeof shard3, "model-00003-of-%05d.safetensors", shards);
    snprintf(shard2, sizeof shard2, "model-00002-of-%05d.safetensors", shards);
    snprintf(path, sizeof path, "%s/%s", dir, shard3);
    snprintf(cmd, sizeof cmd, "mv '%s' '%s.away'", path, path);
    assert_int_equal(system(cmd), 0);
    expect_open_error(dir, ST_ENOENT, shard3);
    snprintf(cmd, sizeof cmd, "mv '%s.away' '%s'", path, path);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    snprintf(cmd, sizeof cmd, "sed -i 's|\"%s\"|\"../x.safetensors\"|' '%s'", shard2, path);
    assert_int_equal(system(cmd), 0);
    expect_open_error(dir, ST_ECORRUPT, "not a .safetensors file in the directory");
    fixture_free(&fx);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_inferred_from_shapes),
        cmocka_unit_test(test_fp32_matches_reference),
        cmocka_unit_test(test_fp32_recompute_matches_reference),
        cmocka_unit_test(test_mixed_matches_bf16_reference),
        cmocka_unit_test(test_recompute_is_bit_identical),
        cmocka_unit_test(test_llama_config_from_directory),
        cmocka_unit_test(test_llama_fp32_matches_reference),
        cmocka_unit_test(test_llama_fp32_recompute_matches_reference),
        cmocka_unit_test(test_llama_mixed_matches_bf16_reference),
        cmocka_unit_test(test_zero_grad_scale_gives_zero_gradients),
        cmocka_unit_test(test_backward_without_targets_gives_zero_gradients),
        cmocka_unit_test(test_larger_than_workspace_is_refused),
        cmocka_unit_test(test_check_backend_matches_cpu),
        cmocka_unit_test(test_check_backend_matches_cpu_over_head_chunks),
        cmocka_unit_test(test_workspace_bytes_per_backend),
        cmocka_unit_test(test_loads_hub_bf16_layout),
        cmocka_unit_test(test_loads_f16),
        cmocka_unit_test(test_vocab_fingerprint_in_metadata),
        cmocka_unit_test(test_checkpoint_directories),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
