/* test_model_sampler.c - the sampler (strata/generate.h): greedy is the
 * argmax, top-k = 1 is greedy, top-k and top-p keep exactly the tokens they
 * should (empirical frequencies of many seeded draws against a distribution
 * computed by hand, excluded tokens never drawn), temperature reshapes, the
 * same seed gives the same tokens, and out-of-range parameters are refused. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "strata/generate.h"

static sampler *make(int vocab, double temperature, int top_k, double top_p, uint64_t seed) {
    sampler *s;
    st_error err = {0};
    const sampler_params p = {.temperature = temperature, .top_k = top_k, .top_p = top_p};
    assert_int_equal(sampler_create(&s, vocab, &p, seed, &err), ST_OK);
    return s;
}

/* Five tokens with probabilities 0.5, 0.2, 0.15, 0.1, 0.05, in scrambled
 * ids: id ID[i] has probability P[i]. */
enum { V5 = 5, DRAWS = 200000 };
static const double P[V5] = {0.5, 0.2, 0.15, 0.1, 0.05};
static const int ID[V5] = {3, 0, 4, 1, 2};

static void five_logits(float *logits) {
    for (int i = 0; i < V5; i++) logits[ID[i]] = (float)log(P[i]) + 1.5f;   /* an offset changes nothing */
}

/* Draws DRAWS tokens and checks each id's frequency against want[id]
 * (which sums to 1) within 0.01; ids with want 0 must never come. The
 * standard deviation of a frequency is at most 0.0012 here. */
static void check_frequencies(sampler *s, const float *logits, int V, const double *want, const char *what) {
    long *count = calloc((size_t)V, sizeof *count);
    for (int i = 0; i < DRAWS; i++) {
        const int32_t t = sampler_pick(s, logits);
        assert_true(t >= 0 && t < V);
        count[t]++;
    }
    for (int v = 0; v < V; v++) {
        const double f = (double)count[v] / DRAWS;
        printf("  %s: id %d drawn %.4f, want %.4f\n", what, v, f, want[v]);
        if (want[v] == 0) assert_int_equal(count[v], 0);
        else assert_true(fabs(f - want[v]) < 0.01);
    }
    free(count);
}

static void test_greedy_is_argmax(void **state) {
    (void)state;
    enum { V = 1000 };
    float logits[V];
    st_rng r;
    st_rng_seed(&r, 3);
    sampler *g = make(V, 0, 40, 0.9, 1);   /* temperature 0: greedy whatever top-k and top-p say */
    for (int trial = 0; trial < 20; trial++) {
        st_rng_normal_fill(&r, logits, V, 2.0f);
        int best = 0;
        for (int i = 1; i < V; i++)
            if (logits[i] > logits[best]) best = i;
        assert_int_equal(sampler_pick(g, logits), best);
    }
    for (int i = 0; i < V; i++) logits[i] = 1.0f;   /* ties: the first */
    logits[17] = logits[400] = 2.0f;
    assert_int_equal(sampler_pick(g, logits), 17);
    sampler_free(g);
}

static void test_top_k_1_is_greedy(void **state) {
    (void)state;
    enum { V = 500 };
    float logits[V];
    st_rng r;
    st_rng_seed(&r, 4);
    sampler *g = make(V, 0, 0, 1, 1), *k1 = make(V, 1.5, 1, 1, 9);
    for (int trial = 0; trial < 50; trial++) {
        st_rng_normal_fill(&r, logits, V, 0.1f);   /* nearly flat: sampling would wander */
        assert_int_equal(sampler_pick(k1, logits), sampler_pick(g, logits));
    }
    sampler_free(g);
    sampler_free(k1);
}

/* Nucleus 0.8: 0.5 + 0.2 < 0.8 <= 0.5 + 0.2 + 0.15, so the three most
 * likely, renormalized by 0.85; the 0.1 and 0.05 tokens never. */
static void test_top_p_keeps_exactly_the_nucleus(void **state) {
    (void)state;
    float logits[V5];
    five_logits(logits);
    double want[V5] = {0};
    for (int i = 0; i < 3; i++) want[ID[i]] = P[i] / 0.85;
    sampler *s = make(V5, 1.0, 0, 0.8, 42);
    check_frequencies(s, logits, V5, want, "top-p 0.8");
    sampler_free(s);
    /* top-p 0.4 < 0.5: the most likely token alone */
    double only[V5] = {0};
    only[ID[0]] = 1;
    s = make(V5, 1.0, 0, 0.4, 42);
    check_frequencies(s, logits, V5, only, "top-p 0.4");
    sampler_free(s);
    /* top-p 1 (off): every token at its probability */
    double all[V5];
    for (int i = 0; i < V5; i++) all[ID[i]] = P[i];
    s = make(V5, 1.0, 0, 1.0, 42);
    check_frequencies(s, logits, V5, all, "top-p 1");
    sampler_free(s);
}

/* Top-k first, then the nucleus of the renormalized top k: top-k 3 leaves
 * 0.5, 0.2, 0.15 (sum 0.85): 0.588, 0.235, 0.176; top-p 0.7 then keeps
 * 0.588 + 0.235 >= 0.7: the two, renormalized (0.714, 0.286). */
static void test_top_k_then_top_p(void **state) {
    (void)state;
    float logits[V5];
    five_logits(logits);
    double want[V5] = {0};
    for (int i = 0; i < 3; i++) want[ID[i]] = P[i] / 0.85;
    sampler *s = make(V5, 1.0, 3, 1.0, 7);
    check_frequencies(s, logits, V5, want, "top-k 3");
    sampler_free(s);
    memset(want, 0, sizeof want);
    for (int i = 0; i < 2; i++) want[ID[i]] = P[i] / 0.7;
    s = make(V5, 1.0, 3, 0.7, 7);
    check_frequencies(s, logits, V5, want, "top-k 3, top-p 0.7");
    sampler_free(s);
}

/* Temperature 2: probabilities proportional to sqrt(p). */
static void test_temperature(void **state) {
    (void)state;
    float logits[V5];
    five_logits(logits);
    double want[V5], z = 0;
    for (int i = 0; i < V5; i++) z += sqrt(P[i]);
    for (int i = 0; i < V5; i++) want[ID[i]] = sqrt(P[i]) / z;
    sampler *s = make(V5, 2.0, 0, 1.0, 5);
    check_frequencies(s, logits, V5, want, "temperature 2");
    sampler_free(s);
}

static int descending(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x > y ? -1 : x < y ? 1 : 0;
}

/* A large vocabulary: every draw lies in the nucleus computed here by
 * sorting, and the seed alone decides the tokens. */
static void test_large_vocabulary_and_seeds(void **state) {
    (void)state;
    enum { V = 50257, N = 300 };
    float *logits = malloc(sizeof(float) * V);
    st_rng r;
    st_rng_seed(&r, 8);
    st_rng_normal_fill(&r, logits, V, 3.0f);
    /* the nucleus of 0.9 at temperature 0.7, by brute force */
    double *p = malloc(sizeof(double) * V), mx = -1e300, z = 0;
    for (int i = 0; i < V; i++) mx = fmax(mx, logits[i]);
    for (int i = 0; i < V; i++) z += p[i] = exp((logits[i] - mx) / 0.7);
    double *sorted = malloc(sizeof(double) * V);
    memcpy(sorted, p, sizeof(double) * V);
    qsort(sorted, V, sizeof(double), descending);
    double cum = 0, cut = 0;
    int size = 0;
    while (cum < 0.9 * z) cum += cut = sorted[size++];
    printf("  nucleus of 0.9 over %d tokens: %d tokens\n", V, size);
    int32_t a[N], b[N], c[N];
    sampler *s1 = make(V, 0.7, 0, 0.9, 123), *s2 = make(V, 0.7, 0, 0.9, 123), *s3 = make(V, 0.7, 0, 0.9, 124);
    for (int i = 0; i < N; i++) {
        a[i] = sampler_pick(s1, logits);
        b[i] = sampler_pick(s2, logits);
        c[i] = sampler_pick(s3, logits);
        assert_true(p[a[i]] >= cut);   /* in the nucleus */
    }
    assert_memory_equal(a, b, sizeof a);        /* same seed, same tokens */
    assert_memory_not_equal(a, c, sizeof a);    /* another seed, others */
    sampler_free(s1); sampler_free(s2); sampler_free(s3);
    free(logits); free(p); free(sorted);
}

static void test_parameters_out_of_range(void **state) {
    (void)state;
    sampler *s;
    st_error err = {0};
    assert_int_equal(sampler_create(&s, 10, &(sampler_params){.temperature = -1, .top_p = 1}, 1, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "temperature"));
    assert_int_equal(sampler_create(&s, 10, &(sampler_params){.temperature = 1, .top_p = 0}, 1, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "top-p"));
    assert_int_equal(sampler_create(&s, 10, &(sampler_params){.temperature = 1, .top_p = 1.5}, 1, &err), ST_EINVAL);
    assert_int_equal(sampler_create(&s, 10, &(sampler_params){.temperature = 1, .top_k = -1, .top_p = 1}, 1, &err),
                     ST_EINVAL);
    assert_int_equal(sampler_create(&s, 0, &(sampler_params){.temperature = 1, .top_p = 1}, 1, &err), ST_EINVAL);
    sampler_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_is_argmax),           cmocka_unit_test(test_top_k_1_is_greedy),
        cmocka_unit_test(test_top_p_keeps_exactly_the_nucleus), cmocka_unit_test(test_top_k_then_top_p),
        cmocka_unit_test(test_temperature),                cmocka_unit_test(test_large_vocabulary_and_seeds),
        cmocka_unit_test(test_parameters_out_of_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
