/* test_model_decode.c - generation with a cache of keys and values
 * (gpt_decoder, strata/model.h), for GPT-2 and Llama (grouped-query
 * attention, an untied head, Llama 3.1's rope scaling; multi-query and tied):
 * the decoder's logits after the prompt and after every step against
 * gpt_forward over the same window, across the context limit's restarts and
 * chunked prefills, on the CPU and the checking backend; greedy tokens
 * against PyTorch's (tests/fixtures/{gpt,llama}_gen_*, made by
 * tools/gpt2_generate.py); the same bits for 1, 2 and 3 threads; the bytes
 * it allocates and its misuse. */
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "strata/generate.h"
#include "strata/gpt_io.h"
#include "strata/model.h"
#include "testutil.h"

/* The decoder's logits and gpt_forward's at the last position of the same
 * window: ||dec - fwd|| / ||fwd|| over the real vocabulary. The two differ
 * only in summation order (matrix-vector loops against sgemm tiles, one
 * row's attention against a block's): float rounding, about 1e-7 of the
 * norm. A wrong cache or position is off by far more (about 1e-1). */
#define LOGITS_TOL 1e-5

typedef struct model {
    gpt_config cfg;
    float *params;
} model;

typedef enum family { GPT2, LLAMA, FAMILIES } family;
static const char *const family_name[FAMILIES] = {"gpt2", "llama"};

/* The generation fixtures' models: GPT-2's file, Llama's model directory. */
static model gen_model(family f) {
    model m;
    st_error err = {0};
    const char *path = f == LLAMA ? FIXTURE("llama_gen") : FIXTURE("gpt_gen_model.safetensors");
    assert_int_equal(gpt_load_safetensors(path, f == LLAMA ? 0 : 4, &m.cfg, &m.params, &err), ST_OK);
    return m;
}

/* A model with a context longer than a prefill chunk (GPT_DECODER_CHUNK);
 * Llama's multi-query and tied, the corners the fixture does not take. */
static model long_model(family f) {
    model m = {.cfg = {.n_layer = 2, .n_head = 4, .d_model = 32, .n_ctx = 600, .vocab_size = 101}};
    if (f == LLAMA) {
        m.cfg.arch = GPT_ARCH_LLAMA;
        m.cfg.n_kv_head = 1;
        m.cfg.d_ff = 48;
        m.cfg.tied = 1;
        m.cfg.norm_eps = 1e-6f;
        m.cfg.rope_theta = 500000.0f;
    }
    st_error err = {0};
    assert_int_equal(gpt_config_check(&m.cfg, &err), ST_OK);
    m.params = st_alloc_aligned(64, gpt_num_params(&m.cfg) * sizeof(float));
    gpt_init_params(&m.cfg, m.params, 5);
    return m;
}

static int32_t *some_tokens(int n, int vocab, uint64_t seed) {
    st_rng r;
    st_rng_seed(&r, seed);
    int32_t *t = malloc(sizeof *t * (size_t)n);
    for (int i = 0; i < n; i++) t[i] = (int32_t)(st_rng_next(&r) % (uint64_t)vocab);
    return t;
}

typedef struct against {
    const gpt_config *cfg;
    gpt_workspace *ws;
    gpt_weights w;
    float *full;       /* [max_len, Vp] */
    double worst;
    int compared;
} against;

/* The decoder's logits against gpt_forward over its window. */
static void compare(against *a, const gpt_decoder *d, const float *logits) {
    const int len = gpt_decoder_len(d), V = a->cfg->vocab_size, Vp = a->cfg->padded_vocab;
    gpt_forward(a->ws, a->w, gpt_decoder_window(d), NULL, 1, len, a->full);
    const float *row = a->full + (size_t)(len - 1) * Vp;
    double num = 0, den = 0;
    for (int v = 0; v < V; v++) {
        num += ((double)logits[v] - row[v]) * ((double)logits[v] - row[v]);
        den += (double)row[v] * row[v];
    }
    const double e = sqrt(num / den);
    if (e > a->worst) a->worst = e;
    a->compared++;
    if (e > LOGITS_TOL) fail_msg("after %d tokens in the window: logits relative error %.2e > %.0e", len, e, LOGITS_TOL);
}

/* Prefills prompt[0..n_prompt), steps through feed[0..n_feed), comparing
 * every logits row; the number of restarts must be `restarts`. */
static void decode_against_forward(const compute_backend *be, const model *m, int max_len, const int32_t *prompt,
                                   int n_prompt, const int32_t *feed, int n_feed, int restarts) {
    st_error err = {0};
    gpt_decoder *d;
    assert_int_equal(gpt_decoder_create(&d, be, &m->cfg, max_len, GPT_FP32, &err), ST_OK);
    against a = {.cfg = &m->cfg, .w = {.precision = GPT_FP32, .f32 = m->params}};
    assert_int_equal(gpt_workspace_create(&a.ws, compute_backend_cpu(), &m->cfg, 1, max_len, 0, GPT_FP32, &err), ST_OK);
    a.full = malloc(sizeof(float) * (size_t)max_len * m->cfg.padded_vocab);
    float *logits = malloc(sizeof(float) * m->cfg.padded_vocab);
    const int kept = gpt_decoder_prefill(d, a.w, prompt, (size_t)n_prompt, logits);
    assert_int_equal(kept, n_prompt < max_len ? n_prompt : max_len);
    assert_memory_equal(gpt_decoder_window(d), prompt + n_prompt - kept, sizeof(int32_t) * kept);
    compare(&a, d, logits);
    int seen = 0;
    for (int i = 0; i < n_feed; i++) {
        const int len = gpt_decoder_len(d), r = gpt_decoder_step(d, a.w, feed[i], logits);
        assert_int_equal(r, len == max_len);
        assert_int_equal(gpt_decoder_len(d), r ? gpt_decoder_keep(max_len) : len + 1);
        assert_int_equal(gpt_decoder_window(d)[gpt_decoder_len(d) - 1], feed[i]);
        seen += r;
        compare(&a, d, logits);
    }
    printf("  %s, max_len %d, prompt %d, %d steps: %d restarts, worst logits error %.1e over %d rows\n", be->name,
           max_len, n_prompt, n_feed, seen, a.worst, a.compared);
    assert_int_equal(seen, restarts);
    gpt_decoder_free(d);
    gpt_workspace_free(a.ws);
    free(a.full);
    free(logits);
}

static void decoder_matches_forward(const compute_backend *be) {
    for (family f = 0; f < FAMILIES; f++) {
        printf("  %s:\n", family_name[f]);
        model m = gen_model(f);
        int32_t *feed = some_tokens(64, m.cfg.vocab_size, 11);
        const int32_t prompt[8] = {1, 5, 7, 9, 3, 50, 77, 12};
        /* the whole context: full at 32 after 24 steps, then every 16 */
        decode_against_forward(be, &m, 32, prompt, 8, feed, 64, 3);
        /* a cache shorter than the context, a prompt longer than it */
        decode_against_forward(be, &m, 7, prompt, 8, feed, 20, 4);
        decode_against_forward(be, &m, 1, prompt, 8, feed, 3, 3);   /* every step restarts with one token */
        free(feed);
        st_free_aligned(m.params);
    }
}

static void test_decoder_matches_forward_cpu(void **state) {
    (void)state;
    decoder_matches_forward(compute_backend_cpu());
}
static void test_decoder_matches_forward_check(void **state) {
    (void)state;
    decoder_matches_forward(compute_backend_check());
}

/* Prompts longer than a prefill chunk (256 rows), and a restart that
 * prefills one and a half chunks. */
static void long_context(const compute_backend *be) {
    for (family f = 0; f < FAMILIES; f++) {
        printf("  %s:\n", family_name[f]);
        model m = long_model(f);
        int32_t *tokens = some_tokens(700, m.cfg.vocab_size, 12);
        decode_against_forward(be, &m, 600, tokens, 300, tokens + 300, 302, 1);   /* full at 600, keeps 300 */
        decode_against_forward(be, &m, 600, tokens, 700, tokens, 2, 1);           /* the last 600 of a prompt of 700 */
        free(tokens);
        st_free_aligned(m.params);
    }
}
static void test_long_context_cpu(void **state) {
    (void)state;
    long_context(compute_backend_cpu());
}
static void test_long_context_check(void **state) {
    (void)state;
    long_context(compute_backend_check());
}

/* Greedy generation equals PyTorch's, token for token: 64 tokens after a
 * prompt of 8 with a cache of the model's 32 positions (three restarts). */
static void greedy_matches_pytorch(const compute_backend *be) {
    for (family f = 0; f < FAMILIES; f++) {
        model m = gen_model(f);
        st_error err = {0};
        safetensors_file *ref;
        const char *ref_path = f == LLAMA ? FIXTURE("llama_gen_ref.safetensors") : FIXTURE("gpt_gen_ref.safetensors");
        assert_int_equal(safetensors_open(&ref, ref_path, &err), ST_OK);
        size_t n_prompt, n_new;
        int32_t *prompt = fixture_i32(ref, "prompt", &n_prompt), *want = fixture_i32(ref, "tokens", &n_new);
        gpt_decoder *d;
        assert_int_equal(gpt_decoder_create(&d, be, &m.cfg, m.cfg.n_ctx, GPT_FP32, &err), ST_OK);
        sampler *s;
        assert_int_equal(sampler_create(&s, m.cfg.vocab_size, &(sampler_params){.temperature = 0, .top_p = 1}, 1, &err),
                         ST_OK);
        gpt_weights w = {.precision = GPT_FP32, .f32 = m.params};
        float *logits = malloc(sizeof(float) * m.cfg.padded_vocab);
        int32_t *got = malloc(sizeof(int32_t) * n_new);
        gpt_decoder_prefill(d, w, prompt, n_prompt, logits);
        for (size_t i = 0; i < n_new; i++) {
            got[i] = sampler_pick(s, logits);
            gpt_decoder_step(d, w, got[i], logits);
        }
        size_t same = 0;
        while (same < n_new && got[same] == want[same]) same++;
        printf("  %s, %s: %zu of %zu greedy tokens equal PyTorch's\n", family_name[f], be->name, same, n_new);
        assert_int_equal(same, n_new);
        free(logits); free(got); free(prompt); free(want);
        sampler_free(s);
        gpt_decoder_free(d);
        safetensors_close(ref);
        st_free_aligned(m.params);
    }
}
static void test_greedy_matches_pytorch_cpu(void **state) {
    (void)state;
    greedy_matches_pytorch(compute_backend_cpu());
}
static void test_greedy_matches_pytorch_check(void **state) {
    (void)state;
    greedy_matches_pytorch(compute_backend_check());
}

/* The same logits, bit for bit, with 1, 2 and 3 threads, through a restart. */
static void test_same_bits_for_any_thread_count(void **state) {
    (void)state;
    for (family f = 0; f < FAMILIES; f++) {
        model m = gen_model(f);
        int32_t *tokens = some_tokens(40, m.cfg.vocab_size, 13);
        const int Vp = m.cfg.padded_vocab, steps = 30;
        gpt_weights w = {.precision = GPT_FP32, .f32 = m.params};
        float *got[4];
        const int threads = omp_get_max_threads();
        for (int t = 1; t <= 3; t++) {
            omp_set_num_threads(t);
            st_error err = {0};
            gpt_decoder *d;
            assert_int_equal(gpt_decoder_create(&d, compute_backend_cpu(), &m.cfg, 32, GPT_FP32, &err), ST_OK);
            got[t] = malloc(sizeof(float) * (size_t)(steps + 1) * Vp);
            gpt_decoder_prefill(d, w, tokens, 10, got[t]);
            for (int i = 0; i < steps; i++) gpt_decoder_step(d, w, tokens[10 + i % 30], got[t] + (size_t)(i + 1) * Vp);
            gpt_decoder_free(d);
        }
        omp_set_num_threads(threads);
        for (int i = 0; i <= steps; i++)   /* the real columns (padded ones are undefined) */
            for (int t = 2; t <= 3; t++)
                if (memcmp(got[1] + (size_t)i * Vp, got[t] + (size_t)i * Vp, sizeof(float) * m.cfg.vocab_size))
                    fail_msg("%s: logits %d with %d threads differ from 1 thread's", family_name[f], i, t);
        for (int t = 1; t <= 3; t++) free(got[t]);
        free(tokens);
        st_free_aligned(m.params);
    }
}

/* What create allocates, stated: the cache, one chunk's activations and
 * attention probabilities, the window; on the checking backend also the
 * mirrors of one unit's weights, the tokens and one row of logits. */
static void test_bytes(void **state) {
    (void)state;
    gpt_config c;
    st_error err = {0};
    assert_int_equal(gpt_config_from_name(&c, "gpt2-124m", &err), ST_OK);
    const size_t C = 768, L = 12, NH = 12, T = 1024, R = GPT_DECODER_CHUNK, f = 4;
    const size_t cache = 2 * L * T * C * f, acts = R * (15 * C + 2) * f, att = NH * R * T * f;
    const size_t cpu = gpt_decoder_bytes(compute_backend_cpu(), &c, 1024, GPT_FP32);
    const size_t check = gpt_decoder_bytes(compute_backend_check(), &c, 1024, GPT_FP32);
    printf("  gpt2-124m at 1024: %.1f MiB on the CPU backend (cache %.1f MiB), %.1f MiB on the checking one\n",
           cpu / 1048576.0, cache / 1048576.0, check / 1048576.0);
    assert_true(cpu >= cache + acts + att + T * 4 && cpu < cache + acts + att + T * 4 + 4096);
    const size_t mirrors = (gpt_unit_numel(&c, 0) + gpt_unit_numel(&c, 1) + (size_t)c.padded_vocab) * f + R * 4;
    assert_int_equal(check - cpu, mirrors);

    /* Llama: the cache holds the key/value heads only (3 of smollm2-135m's
     * 9); a row's activations are 4 C + 2 + (NH + 2 NKV) hs + 3 F floats */
    assert_int_equal(gpt_config_from_name(&c, "smollm2-135m", &err), ST_OK);
    const size_t LC = 576, LL = 30, LNH = 9, NKV = 3, hs = 64, F = 1536, LT = 2048;
    const size_t lcache = 2 * LL * LT * NKV * hs * f, lacts = R * (4 * LC + 2 + (LNH + 2 * NKV) * hs + 3 * F) * f;
    const size_t lcpu = gpt_decoder_bytes(compute_backend_cpu(), &c, (int)LT, GPT_FP32);
    printf("  smollm2-135m at 2048: %.1f MiB on the CPU backend (cache %.1f MiB)\n", lcpu / 1048576.0,
           lcache / 1048576.0);
    const size_t lfixed = lcache + lacts + LNH * R * LT * f + LT * 4;
    assert_true(lcpu >= lfixed && lcpu < lfixed + 4096);
}

static void test_misuse(void **state) {
    (void)state;
    model m = gen_model(GPT2);
    st_error err = {0};
    gpt_decoder *d;
    assert_int_equal(gpt_decoder_create(&d, compute_backend_cpu(), &m.cfg, 0, GPT_FP32, &err), ST_EINVAL);
    assert_int_equal(gpt_decoder_create(&d, compute_backend_cpu(), &m.cfg, 33, GPT_FP32, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "context 32"));
    assert_int_equal(gpt_decoder_create(&d, compute_backend_cpu(), &m.cfg, 32, GPT_FP32, &err), ST_OK);
    float logits[128];
    gpt_weights w = {.precision = GPT_FP32, .f32 = m.params}, bf = {.precision = GPT_MIXED_BF16};
    assert_int_equal(gpt_decoder_step(d, w, 3, logits), -1);   /* nothing prefilled */
    const int32_t t[2] = {1, 2};
    assert_int_equal(gpt_decoder_prefill(d, w, t, 0, logits), 0);
    assert_int_equal(gpt_decoder_prefill(d, bf, t, 2, logits), 0);   /* not the decoder's precision */
    assert_int_equal(gpt_decoder_prefill(d, w, t, 2, logits), 2);
    assert_int_equal(gpt_decoder_step(d, bf, 3, logits), -1);
    assert_int_equal(gpt_decoder_len(d), 2);
    gpt_decoder_free(d);
    gpt_decoder_free(NULL);
    st_free_aligned(m.params);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decoder_matches_forward_cpu),   cmocka_unit_test(test_decoder_matches_forward_check),
        cmocka_unit_test(test_long_context_cpu),              cmocka_unit_test(test_long_context_check),
        cmocka_unit_test(test_greedy_matches_pytorch_cpu),    cmocka_unit_test(test_greedy_matches_pytorch_check),
        cmocka_unit_test(test_same_bits_for_any_thread_count), cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
