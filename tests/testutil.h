/* testutil.h - helpers shared by the tests: reference fixtures and
 * norm-wise comparisons. Header-only; include after cmocka.h. */
#ifndef STRATA_TESTUTIL_H
#define STRATA_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/gpt_io.h"
#include "strata/safetensors.h"

#define FIXTURE(name) STRATA_SOURCE_DIR "/tests/fixtures/" name

/* The initial weights a reference file starts from: GPT-2's file, or the
 * Llama fixture's model directory (named by the reference's prefix). */
static inline const char *fixture_init_of(const char *ref_name) {
    if (strstr(ref_name, "llama_small")) return FIXTURE("llama_small");
    if (strstr(ref_name, "llama_tied")) return FIXTURE("llama_tied");
    return FIXTURE("gpt_small_init.safetensors");
}

/* ||a - ref|| / ||ref|| in double. */
static inline double rel_err_f32(const float *a, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Reads a fixture tensor as doubles (fails the test if absent). */
static inline double *fixture_f64(safetensors_file *f, const char *name, size_t *n) {
    const safetensors_tensor *t = safetensors_find(f, name);
    if (!t) fprintf(stderr, "fixture tensor %s missing\n", name);
    assert_non_null(t);
    double *out = malloc(t->numel * sizeof *out + 1);
    assert_non_null(out);
    st_error err = {0};
    assert_int_equal(safetensors_read_f64(f, t, out, t->numel, &err), ST_OK);
    if (n) *n = t->numel;
    return out;
}

static inline int32_t *fixture_i32(safetensors_file *f, const char *name, size_t *n) {
    const safetensors_tensor *t = safetensors_find(f, name);
    assert_non_null(t);
    int32_t *out = malloc(t->numel * sizeof *out + 1);
    assert_non_null(out);
    st_error err = {0};
    assert_int_equal(safetensors_read_i32(f, t, out, t->numel, &err), ST_OK);
    if (n) *n = t->numel;
    return out;
}

static inline int fixture_int(safetensors_file *f, const char *key) {
    const char *v = safetensors_metadata(f, key);
    assert_non_null(v);
    return atoi(v);
}

static inline double fixture_double(safetensors_file *f, const char *key) {
    const char *v = safetensors_metadata(f, key);
    assert_non_null(v);
    return atof(v);
}

/* The reference tensor "<prefix><hf name>" of every parameter compared with
 * our unit-layout floats; returns the worst norm-wise relative error and
 * prints each tensor's. skip_name: a tensor to leave out (or NULL). */
static inline double compare_params(safetensors_file *ref, const char *prefix, const gpt_config *cfg,
                                    const float *ours, double tol, const char *label) {
    double worst = 0;
    for (int u = 0; u < gpt_num_units(cfg); u++) {
        for (int i = 0; i < gpt_unit_tensor_count(cfg, u); i++) {
            gpt_tensor_info ti = gpt_unit_tensor(cfg, u, i);
            char hf[128], name[160];
            gpt_hf_tensor_name(cfg, u, ti.name, hf, sizeof hf);
            snprintf(name, sizeof name, "%s%s", prefix, hf);
            size_t n;
            double *r = fixture_f64(ref, name, &n);
            double e = rel_err_f32(ours + gpt_unit_offset(cfg, u) + ti.offset, r, n);
            if (e > worst) worst = e;
            if (e > tol) fprintf(stderr, "%s: %s relative error %.3g > %.3g\n", label, name, e, tol);
            free(r);
        }
    }
    return worst;
}

#endif
