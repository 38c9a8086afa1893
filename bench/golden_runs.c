/* golden_runs.c - a fixed set of training runs, printed exactly: each
 * schedule x placement x alpha x clipping x precision of the executor (and
 * the in-memory trainer) trains a small model for a few steps, and one line
 * gives its losses as hexadecimal floats and a hash of its final weights.
 *
 * What it is for: a refactoring of the executor must not change a bit.
 * Record the lines before the change, run again after, compare:
 *
 *     build/golden_runs /tmp/golden-store > before.txt     (on the old tree)
 *     build/golden_runs /tmp/golden-store | diff before.txt -
 *
 * The bits depend on the machine (BLAS kernels, vector width) but not on
 * the thread count, so the comparison is on one machine and one build
 * type; it is not a CI test.
 *
 *     cmake --build build --target golden_runs
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "strata.h"

enum { STEPS = 4 };

static uint64_t fnv1a(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static train_config small_config(gpt_precision p, float clip) {
    train_config tc = train_config_defaults();
    tc.model = (gpt_config){.n_layer = 3, .n_head = 2, .d_model = 64, .n_ctx = 32, .vocab_size = 211};
    st_error err = {0};
    if (gpt_config_check(&tc.model, &err) != ST_OK) abort();
    tc.B = 2;
    tc.T = 32;
    tc.micro_batches = 3;
    tc.precision = p;
    tc.recompute = 1;
    tc.clip = clip;
    tc.lr = (lr_schedule){.max_lr = 1e-2f, .min_lr = 1e-3f, .warmup = 1, .total = STEPS};
    tc.seed = 7;
    return tc;
}

static int32_t *make_tokens(const train_config *tc) {
    size_t n = (size_t)STEPS * tc->micro_batches * tc->B * (tc->T + 1);
    int32_t *tok = malloc(n * sizeof *tok);
    st_rng r;
    st_rng_seed(&r, 13);
    for (size_t i = 0; i < n; i++) tok[i] = (int32_t)(st_rng_next(&r) % (uint64_t)tc->model.vocab_size);
    return tok;
}

static void print_run(const char *name, const float *losses, const float *w, size_t n) {
    printf("%-40s", name);
    for (int s = 0; s < STEPS; s++) printf(" %a", (double)losses[s]);
    printf(" %016llx\n", (unsigned long long)fnv1a(w, n * sizeof(float)));
}

static const char *placement_names[] = {"host", "ssd", "weights+acts", "grads+optim"};

int main(int argc, char **argv) {
    const char *root = argc > 1 ? argv[1] : "/tmp/strata-golden";
    mkdir(root, 0755);
    const double alphas[] = {0.0, 0.25};
    st_error err = {0};
    for (int p = 0; p < 2; p++)
        for (int clip = 0; clip < 2; clip++) {
            train_config tc = small_config((gpt_precision)p, clip ? 0.05f : 0.0f);
            int32_t *tok = make_tokens(&tc);
            const size_t per = (size_t)tc.micro_batches * tc.B * (tc.T + 1), n = gpt_num_params(&tc.model);
            float losses[STEPS], *w = malloc(n * sizeof *w);
            char name[128];
            /* the in-memory trainer */
            trainer *ref;
            if (trainer_create(&ref, &tc, NULL, &err) != ST_OK) goto fail;
            for (int s = 0; s < STEPS; s++) {
                train_step_stats st;
                if (trainer_step(ref, tok + s * per, &st, &err) != ST_OK) goto fail;
                losses[s] = st.loss;
            }
            snprintf(name, sizeof name, "memory %s clip%d", gpt_precision_name(tc.precision), clip);
            print_run(name, losses, trainer_params(ref), n);
            trainer_free(ref);
            for (int k = 0; k < 2; k++)
                for (int pl = 0; pl < 4; pl++)
                    for (int a = 0; a < 2; a++) {
                        char dir[256];
                        snprintf(dir, sizeof dir, "%s/store", root);
                        char cmd[600];
                        snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
                        if (system(cmd) != 0) goto fail;
                        const char *paths[1] = {dir};
                        offload_config oc = {.train = tc, .schedule = (sched_kind)k, .alpha = alphas[a]};
                        oc.store_paths = paths;
                        oc.n_store_paths = 1;
                        const int ws = pl == 1 || pl == 2, os = pl == 1 || pl == 3;
                        oc.place = (placement){.weights = ws, .optim = os, .acts = ws, .grads = os};
                        oc.segment_elems = 4096;
                        offload_trainer *t;
                        if (offload_trainer_create(&t, &oc, NULL, &err) != ST_OK) goto fail;
                        for (int s = 0; s < STEPS; s++) {
                            train_step_stats st;
                            if (offload_trainer_step(t, tok + s * per, &st, &err) != ST_OK) goto fail;
                            losses[s] = st.loss;
                        }
                        if (offload_trainer_flush(t, &err) != ST_OK) goto fail;
                        if (offload_trainer_read_params(t, w, &err) != ST_OK) goto fail;
                        offload_trainer_free(t);
                        snprintf(name, sizeof name, "%s %s a%.2f clip%d %s", k ? "horizontal" : "vertical",
                                 placement_names[pl], alphas[a], clip, gpt_precision_name(tc.precision));
                        print_run(name, losses, w, n);
                    }
            free(w);
            free(tok);
        }
    return 0;
fail:
    fprintf(stderr, "golden_runs: %s\n", err.msg);
    return 1;
}
