/* bench_train.c - training throughput of the in-memory trainer, and the
 * fraction of this machine's sgemm rate it achieves, measured in one run.
 *
 *   build/bench_train --model gpt2-124m --batch 4 --seq 64 --steps 5 --threads 2
 *   build/bench_train --model smollm2-135m ...      (any named shape, Llama too)
 *
 * --backend check runs the same steps on the checking backend (what its
 * protection and copies cost); the default is the CPU backend.
 *
 * Prints per-step times, then `tokens/s <value>` and the model FLOP/s as a
 * fraction of a large square sgemm's rate measured just before. */
#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/train.h"

/* GFLOP/s of C = A B for square n x n float matrices, best of reps, with
 * the CPU backend's sgemm (the one the model's products use). */
static double sgemm_gflops(int n, int reps) {
    const compute_backend *be = compute_backend_cpu();
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
    for (long i = 0; i < (long)n * n; i++) {
        a[i] = (float)(i % 7) * 0.1f;
        b[i] = (float)(i % 5) * 0.1f;
    }
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = st_now();
        be->sgemm(be, 0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double dt = st_now() - t0;
        if (dt < best) best = dt;
    }
    free(a); free(b); free(c);
    return 2.0 * n * n * (double)n / best / 1e9;
}

int main(int argc, char **argv) {
    const char *model = "gpt2-124m", *precision = "fp32", *backend = "cpu";
    int B = 4, T = 64, steps = 5, warmup = 1, threads = 2, recompute = 0, accum = 1;
    static const struct option opts[] = {
        {"model", 1, 0, 'm'}, {"batch", 1, 0, 'b'}, {"seq", 1, 0, 's'}, {"steps", 1, 0, 'n'},
        {"warmup", 1, 0, 'w'}, {"threads", 1, 0, 'j'}, {"precision", 1, 0, 'p'}, {"recompute", 0, 0, 'r'},
        {"grad-accum", 1, 0, 'a'}, {"backend", 1, 0, 'e'}, {0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'b': B = atoi(optarg); break;
        case 's': T = atoi(optarg); break;
        case 'n': steps = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 'j': threads = atoi(optarg); break;
        case 'p': precision = optarg; break;
        case 'r': recompute = 1; break;
        case 'a': accum = atoi(optarg); break;
        case 'e': backend = optarg; break;
        default: fprintf(stderr, "bench_train: bad flag\n"); return 2;
        }
    }
    omp_set_num_threads(threads);
    st_error err = {0};
    train_config tc = train_config_defaults();
    if (gpt_config_from_name(&tc.model, model, &err) != ST_OK) {
        fprintf(stderr, "bench_train: %s\n", err.msg);
        return 1;
    }
    tc.B = B;
    tc.T = T;
    tc.micro_batches = accum;
    tc.recompute = recompute;
    tc.precision = strcmp(precision, "fp32") ? GPT_MIXED_BF16 : GPT_FP32;
    if (!(tc.backend = compute_backend_named(backend))) {
        fprintf(stderr, "bench_train: unknown backend %s (cpu, check)\n", backend);
        return 2;
    }
    double gemm = sgemm_gflops(2048, 3);
    printf("sgemm 2048^3: %.1f GFLOP/s (%d threads)\n", gemm, threads);
    trainer *t;
    if (trainer_create(&t, &tc, NULL, &err) != ST_OK) {
        fprintf(stderr, "bench_train: %s\n", err.msg);
        return 1;
    }
    size_t ntok = (size_t)accum * B * (T + 1);
    int32_t *tokens = malloc(ntok * sizeof *tokens);
    st_rng r;
    st_rng_seed(&r, 1);
    for (size_t i = 0; i < ntok; i++) tokens[i] = (int32_t)(st_rng_next(&r) % (uint64_t)tc.model.vocab_size);
    double total = 0;
    for (int s = 0; s < warmup + steps; s++) {
        train_step_stats st;
        if (trainer_step(t, tokens, &st, &err) != ST_OK) {
            fprintf(stderr, "bench_train: %s\n", err.msg);
            return 1;
        }
        printf("step %d: %.3f s loss %.4f%s\n", s, st.seconds, st.loss, s < warmup ? " (warm-up, not counted)" : "");
        if (s >= warmup) total += st.seconds;
    }
    double step_s = total / steps, tok_s = (double)accum * B * T / step_s;
    double flops = gpt_train_flops(&tc.model, B, T) * accum / step_s / 1e9;
    char peak[32];
    printf("model %s B=%d T=%d accum=%d %s recompute=%d threads=%d backend=%s\n", model, B, T, accum, precision,
           recompute, threads, backend);
    printf("step %.3f s, model %.1f GFLOP/s = %.1f%% of sgemm, peak memory %s\n", step_s, flops, 100.0 * flops / gemm,
           st_format_bytes((double)st_peak_rss_bytes(), peak, sizeof peak));
    printf("tokens/s %.1f\n", tok_s);
    trainer_free(t);
    free(tokens);
    return 0;
}
