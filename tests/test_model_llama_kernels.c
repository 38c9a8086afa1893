/* test_model_llama_kernels.c - the Llama family's kernels of the CPU backend
 * (strata/backend.h) against the float64 PyTorch reference written after
 * Hugging Face's modeling_llama.py (tests/fixtures/llama_kernels_ref.safetensors,
 * made by tools/llama_kernels_reference.py): RMSNorm, linear, rotary
 * embeddings, grouped- and multi-query attention and SwiGLU, forward and
 * backward; the rotary angles against HF's float32 cos and sin tables; the
 * rotation undone by its gradient; the embedding without positions.
 *
 * Tolerances are norm-wise relative errors, ||ours - ref|| / ||ref||, of
 * float32 kernels against float64 results from the same float32 inputs; u =
 * 2^-24 = 6.0e-8 is float32's unit roundoff. Each bound is a few times what
 * the op's roundings allow, and the measured errors are printed beside it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "strata/backend.h"
#include "testutil.h"

#define REF FIXTURE("llama_kernels_ref.safetensors")

static safetensors_file *ref;

static int open_ref(void **state) {
    st_error err = {0};
    return safetensors_open(&ref, REF, &err) == ST_OK ? 0 : -1;
}

static int close_ref(void **state) {
    safetensors_close(ref);
    return 0;
}

/* A fixture tensor as floats: the inputs are stored F32, so exactly. */
static float *ref_f32(const char *name, size_t *n) {
    size_t m;
    double *d = fixture_f64(ref, name, &m);
    float *f = malloc(m * sizeof *f + 1);
    assert_non_null(f);
    for (size_t i = 0; i < m; i++) f[i] = (float)d[i];
    free(d);
    if (n) *n = m;
    return f;
}

static double *ref_f64(const char *name, size_t want) {
    size_t n;
    double *d = fixture_f64(ref, name, &n);
    assert_int_equal(n, want);
    return d;
}

static int meta_int(const char *key) { return fixture_int(ref, key); }

/* Prints and checks one comparison. */
static void expect_close(const char *what, const float *ours, const double *want, size_t n, double bound) {
    const double e = rel_err_f32(ours, want, n);
    printf("  %-28s %.1e (bound %.0e)\n", what, e, bound);
    if (!(e <= bound)) fail_msg("%s: relative error %.3g > %.3g", what, e, bound);
}

static float *random_floats(size_t n, uint64_t seed) {
    st_rng r;
    st_rng_seed(&r, seed);
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    st_rng_normal_fill(&r, p, n, 1.0f);
    return p;
}

static const compute_backend *cpu(void) { return compute_backend_cpu(); }   /* unified: host arrays are device memory */

/* --- RMSNorm ------------------------------------------------------------------- */

/* out = x * rstd * w: the variance summed in double and rounded once, then
 * +eps, sqrt, divide, two products: each a rounding, about 4u per element
 * (rstd's error halved by the square root). dinp and dw accumulate onto
 * what they held: checked against that plus the reference. dx = r(gw) - kx
 * cancels partly, so its bound is a few u more. */
static void test_rmsnorm(void **state) {
    const int N = meta_int("rmsnorm.N"), C = meta_int("rmsnorm.C");
    const float eps = (float)fixture_double(ref, "rmsnorm.eps");
    const size_t NC = (size_t)N * C;
    float *x = ref_f32("rmsnorm.x", NULL), *w = ref_f32("rmsnorm.w", NULL), *dout = ref_f32("rmsnorm.dout", NULL);
    double *out_ref = ref_f64("rmsnorm.out", NC), *rstd_ref = ref_f64("rmsnorm.rstd", N);
    double *dx_ref = ref_f64("rmsnorm.dx", NC), *dw_ref = ref_f64("rmsnorm.dw", C);
    float *out = malloc(NC * sizeof *out), *rstd = malloc(N * sizeof *rstd);
    float *dx = random_floats(NC, 1), *dw = random_floats(C, 2);
    for (size_t i = 0; i < NC; i++) dx_ref[i] += dx[i];
    for (int i = 0; i < C; i++) dw_ref[i] += dw[i];

    cpu()->rmsnorm_forward(cpu(), out, rstd, x, w, N, C, eps);
    cpu()->rmsnorm_backward(cpu(), dx, dw, dout, x, w, rstd, N, C);
    expect_close("rmsnorm out", out, out_ref, NC, 5e-7);
    expect_close("rmsnorm rstd", rstd, rstd_ref, N, 2e-7);
    expect_close("rmsnorm dinp (+=)", dx, dx_ref, NC, 1e-6);
    expect_close("rmsnorm dw (+=)", dw, dw_ref, C, 1e-6);
    free(x); free(w); free(dout); free(out_ref); free(rstd_ref); free(dx_ref); free(dw_ref);
    free(out); free(rstd); free(dx); free(dw);
}

/* --- linear -------------------------------------------------------------------- */

/* Sums of 48 (out, dinp: 33) and 7 (dw) float32 products: about sqrt(K) u
 * = 4e-7 norm-wise at most; the bound allows twice that. dw accumulates. */
static void test_linear(void **state) {
    const int N = meta_int("linear.N"), IC = meta_int("linear.IC"), OC = meta_int("linear.OC");
    float *x = ref_f32("linear.x", NULL), *w = ref_f32("linear.w", NULL), *dout = ref_f32("linear.dout", NULL);
    double *out_ref = ref_f64("linear.out", (size_t)N * OC), *dx_ref = ref_f64("linear.dx", (size_t)N * IC);
    double *dw_ref = ref_f64("linear.dw", (size_t)OC * IC);
    float *out = malloc(sizeof(float) * N * OC), *dx = random_floats((size_t)N * IC, 3);   /* overwritten */
    float *dw = random_floats((size_t)OC * IC, 4);
    for (size_t i = 0; i < (size_t)OC * IC; i++) dw_ref[i] += dw[i];

    cpu()->linear_forward(cpu(), out, x, w, N, IC, OC);
    cpu()->linear_backward(cpu(), dx, dw, dout, x, w, N, IC, OC);
    expect_close("linear out", out, out_ref, (size_t)N * OC, 1e-6);
    expect_close("linear dinp", dx, dx_ref, (size_t)N * IC, 1e-6);
    expect_close("linear dw (+=)", dw, dw_ref, (size_t)OC * IC, 1e-6);
    /* dinp NULL: the weight gradient alone, the same bits */
    float *dw2 = random_floats((size_t)OC * IC, 4), *dw3 = random_floats((size_t)OC * IC, 4);
    cpu()->linear_backward(cpu(), NULL, dw2, dout, x, w, N, IC, OC);
    cpu()->linear_backward(cpu(), dx, dw3, dout, x, w, N, IC, OC);
    assert_memory_equal(dw2, dw3, sizeof(float) * OC * IC);
    free(x); free(w); free(dout); free(out_ref); free(dx_ref); free(dw_ref); free(out); free(dx); free(dw);
    free(dw2); free(dw3);
}

/* --- rotary embeddings ------------------------------------------------------------ */

/* Both parts of fused q|k|v rows, as the model layer will call it. */
static void rope_qk(void (*op)(const compute_backend *, float *, int, int, int, int, int, int, rope_params), float *rows,
                    int N, int T, int NH, int NKV, int hs, int pos0, float theta) {
    const int W = (NH + 2 * NKV) * hs;
    op(cpu(), rows, N, T, NH, hs, W, pos0, (rope_params){.theta = theta});                       /* q */
    op(cpu(), rows + (size_t)NH * hs, N, T, NKV, hs, W, pos0, (rope_params){.theta = theta});    /* k */
}

/* Distance in units in the last place between two finite floats of one sign or near zero. */
static long ulps(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    if (ia < 0) ia = INT32_MIN - ia;
    if (ib < 0) ib = INT32_MIN - ib;
    return labs((long)ia - (long)ib);
}

/* The kernel's cos and sin at T positions from pos0, read back by rotating
 * unit vectors: head i of a row holds e_i, so its x[i] becomes cos(angle_i)
 * and x[i + half] sin(angle_i), exactly (1 * c - 0 * s). Compared with HF's
 * float32 tables: the angles are HF's bits (the reference checks that its
 * inv_freq is the correctly rounded one the kernel computes), and the
 * kernel's cos and sin, correctly rounded from them, may differ from
 * torch's vectorized ones (within 1 ulp) in the last bit. Returns how many
 * differ. */
static int compare_rope_table(const char *name, int hs, int T, int pos0, float theta) {
    const int half = hs / 2, W = half * hs;
    char key[96];
    snprintf(key, sizeof key, "%s.cos", name);
    float *cos_hf = ref_f32(key, NULL);
    snprintf(key, sizeof key, "%s.sin", name);
    float *sin_hf = ref_f32(key, NULL);
    float *x = calloc((size_t)T * W, sizeof *x);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) x[(size_t)t * W + (size_t)i * hs + i] = 1.0f;
    cpu()->rope_forward(cpu(), x, T, T, half, hs, W, pos0, (rope_params){.theta = theta});
    int differ = 0;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            const float *h = x + (size_t)t * W + (size_t)i * hs;
            const float c = cos_hf[t * half + i], s = sin_hf[t * half + i];
            const long dc = ulps(h[i], c), ds = ulps(h[i + half], s);
            if (dc > 1 || ds > 1)
                fail_msg("%s: position %d, frequency %d: cos %.9g sin %.9g, HF's %.9g %.9g", name, pos0 + t, i, h[i],
                         h[i + half], c, s);
            differ += (dc != 0) + (ds != 0);
            for (int j = 0; j < hs; j++)   /* the rest of the head stays zero */
                if (j != i && j != i + half) assert_true(h[j] == 0.0f);
        }
    printf("  %-28s %d of %d cos and sin values 1 ulp from torch's, the rest identical\n", name, differ, 2 * T * half);
    free(cos_hf); free(sin_hf); free(x);
    return differ;
}

/* Each element: x c - y s with c and s within 1 ulp of HF's, two products
 * and a sum: about 3u. v's columns must come through untouched. */
static void test_rope(void **state) {
    const int B = meta_int("rope.B"), T = meta_int("rope.T"), NH = meta_int("rope.NH"), NKV = meta_int("rope.NKV");
    const int hs = meta_int("rope.hs"), N = B * T, W = (NH + 2 * NKV) * hs;
    const size_t n = (size_t)N * W;
    const char *cases[] = {"a", "b"};
    for (int k = 0; k < 2; k++) {
        char key[64], label[64];
        snprintf(key, sizeof key, "rope.%s.theta", cases[k]);
        const float theta = (float)fixture_double(ref, key);
        snprintf(key, sizeof key, "rope.%s.pos0", cases[k]);
        const int pos0 = meta_int(key);
        snprintf(key, sizeof key, "rope.%s.x", cases[k]);
        float *x = ref_f32(key, NULL), *x0 = ref_f32(key, NULL);
        snprintf(key, sizeof key, "rope.%s.dout", cases[k]);
        float *d = ref_f32(key, NULL), *d0 = ref_f32(key, NULL);
        snprintf(key, sizeof key, "rope.%s.out", cases[k]);
        double *out_ref = ref_f64(key, n);
        snprintf(key, sizeof key, "rope.%s.dx", cases[k]);
        double *dx_ref = ref_f64(key, n);

        rope_qk(cpu()->rope_forward, x, N, T, NH, NKV, hs, pos0, theta);
        rope_qk(cpu()->rope_backward, d, N, T, NH, NKV, hs, pos0, theta);
        snprintf(label, sizeof label, "rope %s (theta %g, pos0 %d)", cases[k], theta, pos0);
        printf("  %s\n", label);
        expect_close("  forward", x, out_ref, n, 4e-7);
        expect_close("  backward", d, dx_ref, n, 4e-7);
        for (int r = 0; r < N; r++) {   /* v is not rotated */
            const size_t v = (size_t)r * W + (size_t)(NH + NKV) * hs;
            assert_memory_equal(x + v, x0 + v, sizeof(float) * NKV * hs);
            assert_memory_equal(d + v, d0 + v, sizeof(float) * NKV * hs);
        }
        snprintf(key, sizeof key, "rope.%s", cases[k]);
        compare_rope_table(key, hs, T, pos0, theta);
        free(x); free(x0); free(d); free(d0); free(out_ref); free(dx_ref);
    }
    /* Llama 2's and Llama 3's heads (hs 128, theta 1e4 and 5e5), far into the sequence */
    const char *tables[] = {"rope_table.h128_t10000", "rope_table.h128_t500000"};
    for (int k = 0; k < 2; k++) {
        char key[96];
        snprintf(key, sizeof key, "%s.hs", tables[k]);
        const int hs128 = meta_int(key);
        snprintf(key, sizeof key, "%s.T", tables[k]);
        const int Tt = meta_int(key);
        snprintf(key, sizeof key, "%s.pos0", tables[k]);
        const int p0 = meta_int(key);
        snprintf(key, sizeof key, "%s.theta", tables[k]);
        compare_rope_table(tables[k], hs128, Tt, p0, (float)fixture_double(ref, key));
    }
}

/* Against the rotation written out in double from HF's float32 angles, at
 * shapes the fixture does not reach: heads wider than the kernel's chunk of
 * 128 frequencies (hs 600), the smallest head (hs 2), rows wider than their
 * heads, several sequences, positions far from 0. */
static void test_rope_against_naive(void **state) {
    const int shapes[][6] = {/* N, T, heads, hs, row_stride, pos0 */
                             {6, 3, 2, 600, 1300, 5}, {8, 4, 3, 2, 7, 1000}, {9, 9, 2, 64, 160, 70000}};
    const float thetas[] = {10000.0f, 500000.0f, 1000000.0f};
    for (int s = 0; s < 3; s++) {
        const int N = shapes[s][0], T = shapes[s][1], H = shapes[s][2], hs = shapes[s][3], W = shapes[s][4];
        const int pos0 = shapes[s][5], half = hs / 2;
        const size_t n = (size_t)N * W;
        float *x = random_floats(n, 20 + s), *dx = random_floats(n, 30 + s);
        double *want = malloc(n * sizeof *want), *dwant = malloc(n * sizeof *dwant);
        for (size_t i = 0; i < n; i++) want[i] = x[i], dwant[i] = dx[i];
        for (int r = 0; r < N; r++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < half; i++) {
                    const float inv = 1.0f / (float)pow(thetas[s], (double)((float)(2 * i) / (float)hs));
                    const float angle = (float)(pos0 + r % T) * inv;
                    const double c = cos(angle), sn = sin(angle);
                    const size_t lo = (size_t)r * W + (size_t)h * hs + i, hi = lo + half;
                    want[lo] = x[lo] * c - x[hi] * sn;
                    want[hi] = x[hi] * c + x[lo] * sn;
                    dwant[lo] = dx[lo] * c + dx[hi] * sn;
                    dwant[hi] = dx[hi] * c - dx[lo] * sn;
                }
        cpu()->rope_forward(cpu(), x, N, T, H, hs, W, pos0, (rope_params){.theta = thetas[s]});
        cpu()->rope_backward(cpu(), dx, N, T, H, hs, W, pos0, (rope_params){.theta = thetas[s]});
        char label[64];
        snprintf(label, sizeof label, "rope hs=%d theta=%g forward", hs, thetas[s]);
        expect_close(label, x, want, n, 4e-7);
        snprintf(label, sizeof label, "rope hs=%d theta=%g backward", hs, thetas[s]);
        expect_close(label, dx, dwant, n, 4e-7);
        free(x); free(dx); free(want); free(dwant);
    }
}

/* rope_backward rotates by minus the angle: the transpose, which undoes the
 * rotation up to cos^2 + sin^2 of float32 values (1 within about 2u) and the
 * roundings of the two passes (about 3u each): within 2^-20 of the row's
 * largest element. */
static void test_rope_backward_undoes_forward(void **state) {
    const int shapes[][6] = {/* N, T, heads, hs, row_stride, pos0 */
                             {12, 4, 3, 16, 64, 0}, {7, 7, 2, 128, 300, 100000}, {5, 1, 1, 6, 6, 77}, {6, 3, 4, 600, 2400, 5}};
    for (int s = 0; s < 4; s++) {
        const int N = shapes[s][0], T = shapes[s][1], H = shapes[s][2], hs = shapes[s][3], W = shapes[s][4];
        const int pos0 = shapes[s][5];
        const size_t n = (size_t)N * W;
        float *x = random_floats(n, 10 + s), *x0 = malloc(n * sizeof *x0);
        memcpy(x0, x, n * sizeof *x);
        cpu()->rope_forward(cpu(), x, N, T, H, hs, W, pos0, (rope_params){.theta = 10000.0f});
        assert_memory_not_equal(x, x0, n * sizeof *x);
        cpu()->rope_backward(cpu(), x, N, T, H, hs, W, pos0, (rope_params){.theta = 10000.0f});
        double worst = 0, big = 0;
        for (size_t i = 0; i < n; i++) {
            worst = fmax(worst, fabs((double)x[i] - x0[i]));
            big = fmax(big, fabs((double)x0[i]));
        }
        printf("  rope round trip N=%d T=%d heads=%d hs=%d pos0=%d: max |x' - x| %.1e of max |x| %.2f\n", N, T, H, hs,
               pos0, worst, big);
        assert_true(worst <= big * 0x1p-20);
        free(x); free(x0);
    }
}

/* --- attention ---------------------------------------------------------------------- */

/* Scores summed over hs = 16, a softmax with a 1-ulp exp and a sum over up
 * to 67 keys, the products with v over as many: about sqrt(67) u = 5e-7 at
 * most for out; dqkv adds the softmax's backward. (The naive-loop tests in
 * test_model_kernels.c allow 1e-5 at T = 150.) */
static void test_attention(void **state) {
    const char *cases[] = {"gqa", "mqa"};
    for (int k = 0; k < 2; k++) {
        char key[64];
        int s[5];
        const char *dims[] = {"B", "T", "NH", "NKV", "hs"};
        for (int j = 0; j < 5; j++) {
            snprintf(key, sizeof key, "attention.%s.%s", cases[k], dims[j]);
            s[j] = meta_int(key);
        }
        const int B = s[0], T = s[1], NH = s[2], NKV = s[3], hs = s[4], C = NH * hs, W = C + 2 * NKV * hs;
        const size_t nqkv = (size_t)B * T * W, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
        snprintf(key, sizeof key, "attention.%s.qkv", cases[k]);
        float *qkv = ref_f32(key, NULL);
        snprintf(key, sizeof key, "attention.%s.dout", cases[k]);
        float *dout = ref_f32(key, NULL);
        snprintf(key, sizeof key, "attention.%s.out", cases[k]);
        double *out_ref = ref_f64(key, nout);
        snprintf(key, sizeof key, "attention.%s.dqkv", cases[k]);
        double *dqkv_ref = ref_f64(key, nqkv);
        float *out = malloc(nout * sizeof *out), *att = malloc(natt * sizeof *att), *dpre = malloc(natt * sizeof *dpre);
        float *dqkv = random_floats(nqkv, 5);   /* overwritten */
        cpu()->attention_forward(cpu(), out, att, qkv, B, T, C, NH, NKV);
        cpu()->attention_backward(cpu(), dqkv, dpre, dout, qkv, att, B, T, C, NH, NKV);
        printf("  attention %s: B=%d T=%d NH=%d NKV=%d hs=%d\n", cases[k], B, T, NH, NKV, hs);
        expect_close("  out", out, out_ref, nout, 2e-6);
        expect_close("  dqkv", dqkv, dqkv_ref, nqkv, 2e-6);
        free(qkv); free(dout); free(out_ref); free(dqkv_ref); free(out); free(att); free(dpre); free(dqkv);
    }
}

/* --- SwiGLU ---------------------------------------------------------------------------- */

/* exp within about 1 ulp (exp8, or expf on the tail), then 1 + e, a
 * division and the products: about 5u per element. The gradient of the gate,
 * u s (1 + g (1 - s)), cancels near g = -1.28, where it is small; norm-wise
 * that costs little. The gates include -100 .. 100 (exp8's clamps) on both
 * the vector and the scalar path. */
static void test_swiglu(void **state) {
    const int N = meta_int("swiglu.N"), F = meta_int("swiglu.F");
    float *gu = ref_f32("swiglu.gu", NULL), *dout = ref_f32("swiglu.dout", NULL);
    double *out_ref = ref_f64("swiglu.out", (size_t)N * F), *dgu_ref = ref_f64("swiglu.dgu", (size_t)N * 2 * F);
    float *out = malloc(sizeof(float) * N * F), *dgu = random_floats((size_t)N * 2 * F, 6);   /* overwritten */
    cpu()->swiglu_forward(cpu(), out, gu, N, F);
    cpu()->swiglu_backward(cpu(), dgu, dout, gu, N, F);
    expect_close("swiglu out", out, out_ref, (size_t)N * F, 5e-7);
    expect_close("swiglu dgu", dgu, dgu_ref, (size_t)N * 2 * F, 5e-7);
    for (size_t i = 0; i < (size_t)N * F; i++) assert_false(isnan(out[i]));
    for (size_t i = 0; i < (size_t)N * 2 * F; i++) assert_false(isnan(dgu[i]));
    free(gu); free(dout); free(out_ref); free(dgu_ref); free(out); free(dgu);
}

/* --- embedding without positions --------------------------------------------------------- */

static void test_embed_without_positions(void **state) {
    enum { B = 2, T = 5, C = 12, VP = 16 };
    int32_t tokens[B * T] = {3, 0, 15, 3, 7, 1, 1, 2, 9, 15};
    float *wte = random_floats(VP * C, 7), out[B * T * C];
    cpu()->embed_forward(cpu(), out, tokens, wte, NULL, B, T, C, VP);
    for (int n = 0; n < B * T; n++) assert_memory_equal(out + n * C, wte + tokens[n] * C, sizeof(float) * C);
    /* dwte[tokens] += dout, nothing else, and no dwpe */
    float *dout = random_floats(B * T * C, 8), *dwte = random_floats(VP * C, 9), *want = malloc(sizeof(float) * VP * C);
    memcpy(want, dwte, sizeof(float) * VP * C);
    for (int n = 0; n < B * T; n++)
        for (int i = 0; i < C; i++) want[tokens[n] * C + i] += dout[n * C + i];
    cpu()->embed_backward(cpu(), dwte, NULL, tokens, dout, B, T, C, VP);
    assert_memory_equal(dwte, want, sizeof(float) * VP * C);
    free(wte); free(dout); free(dwte); free(want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_rope_against_naive),
        cmocka_unit_test(test_rope_backward_undoes_forward),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_embed_without_positions),
    };
    return cmocka_run_group_tests(tests, open_ref, close_ref);
}
