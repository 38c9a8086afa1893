/* bench_generate.c - greedy generation with gpt_decoder: tokens/s, and the
 * generated ids (to compare with bench/torch_generate.py's).
 *
 *   build/bench_generate --weights W.safetensors --n-head 12 --prompt 1,2,3 --new 64 --threads 2 --repeats 3
 *
 * Each repeat prefills the prompt and generates --new tokens greedily (no
 * stop at end-of-text, so both sides always make the same number); its
 * tokens/s is --new over the time from the prompt's pass to the last token,
 * prefill included, as torch_generate.py measures. Prints one line per
 * repeat, the ids of the last, the median (`tokens/s <value>`), and, with
 * --bandwidth, this process's memory read rate (a STREAM-like sum over
 * 1 GiB) just before. */
#include <getopt.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/generate.h"
#include "strata/gpt_io.h"
#include "strata/model.h"

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* GB/s of reading n floats that fit no cache (a sum over 1 GiB, four
 * 8-lane accumulators so that the adds are not the limit), best of 5. */
static double read_bandwidth(void) {
    const size_t n = (size_t)256 << 20;
    float *x = st_alloc_aligned(64, n * sizeof *x);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = (float)(i & 7);
    double best = 1e30, sink = 0;
    for (int r = 0; r < 5; r++) {
        const double t0 = st_now();
        double s = 0;
#pragma omp parallel for schedule(static) reduction(+ : s)
        for (size_t b = 0; b < n / 1024; b++) {
            const float *p = x + b * 1024;
#ifdef __AVX2__
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int i = 0; i < 1024; i += 32) {
                a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
                a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
                a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
                a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
            }
            float lanes[8];
            _mm256_storeu_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
            for (int i = 0; i < 8; i++) s += lanes[i];
#else
            for (int i = 0; i < 1024; i++) s += p[i];
#endif
        }
        const double dt = st_now() - t0;
        sink += s;
        if (dt < best) best = dt;
    }
    st_free_aligned(x);
    return sink < 0 ? 0 : (double)n * sizeof(float) / best / 1e9;
}

int main(int argc, char **argv) {
    const char *weights = NULL, *prompt_arg = "50256", *backend = "cpu";
    int n_head = 0, n_new = 64, threads = 2, repeats = 3, bandwidth = 0;
    static const struct option opts[] = {{"weights", 1, 0, 'w'}, {"n-head", 1, 0, 'h'},   {"prompt", 1, 0, 'p'},
                                         {"new", 1, 0, 'n'},     {"threads", 1, 0, 'j'},  {"repeats", 1, 0, 'r'},
                                         {"backend", 1, 0, 'e'}, {"bandwidth", 0, 0, 'b'}, {0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'w': weights = optarg; break;
        case 'h': n_head = atoi(optarg); break;
        case 'p': prompt_arg = optarg; break;
        case 'n': n_new = atoi(optarg); break;
        case 'j': threads = atoi(optarg); break;
        case 'r': repeats = atoi(optarg); break;
        case 'e': backend = optarg; break;
        case 'b': bandwidth = 1; break;
        default: fprintf(stderr, "bench_generate: bad flag\n"); return 2;
        }
    }
    const compute_backend *be = compute_backend_named(backend);
    if (!weights || n_new < 1 || repeats < 1 || !be) {
        fprintf(stderr, "bench_generate: --weights FILE is required; --new, --repeats >= 1; --backend cpu|check\n");
        return 2;
    }
    omp_set_num_threads(threads);
    if (bandwidth) printf("memory read %.1f GB/s (%d threads)\n", read_bandwidth(), threads);
    int32_t prompt[4096];
    size_t n_prompt = 0;
    for (const char *p = prompt_arg; *p && n_prompt < 4096; p = strchr(p, ',') ? strchr(p, ',') + 1 : "")
        prompt[n_prompt++] = atoi(p);
    st_error err = {0};
    gpt_config cfg;
    float *params;
    gpt_decoder *d;
    sampler *s;
    if (gpt_load_safetensors(weights, n_head, &cfg, &params, &err) != ST_OK ||
        gpt_check_tokens(&cfg, prompt, n_prompt, &err) != ST_OK ||
        gpt_decoder_create(&d, be, &cfg, cfg.n_ctx, GPT_FP32, &err) != ST_OK ||
        sampler_create(&s, cfg.vocab_size, &(sampler_params){.temperature = 0, .top_p = 1}, 1, &err) != ST_OK) {
        fprintf(stderr, "bench_generate: %s\n", err.msg);
        return 1;
    }
    printf("model: %d layers, %d heads, d_model %d, n_ctx %d, vocab %d; prompt %zu tokens, %d new; %d threads, %s "
           "backend; decoder %.1f MiB\n", cfg.n_layer, cfg.n_head, cfg.d_model, cfg.n_ctx, cfg.vocab_size, n_prompt,
           n_new, threads, be->name, gpt_decoder_bytes(be, &cfg, cfg.n_ctx, GPT_FP32) / 1048576.0);
    gpt_weights w = {.precision = GPT_FP32, .f32 = params};
    float *logits = malloc(sizeof(float) * cfg.padded_vocab);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n_new);
    double *rate = malloc(sizeof(double) * (size_t)repeats);
    for (int r = 0; r < repeats; r++) {
        const double t0 = st_now();
        gpt_decoder_prefill(d, w, prompt, n_prompt, logits);
        const double t_prompt = st_now() - t0;
        for (int i = 0; i < n_new; i++) {
            ids[i] = sampler_pick(s, logits);
            if (i + 1 < n_new) gpt_decoder_step(d, w, ids[i], logits);
        }
        const double dt = st_now() - t0;
        rate[r] = n_new / dt;
        printf("repeat %d: %.3f s (prompt %.3f s), %.2f tokens/s\n", r, dt, t_prompt, rate[r]);
    }
    printf("ids");
    for (int i = 0; i < n_new; i++) printf("%c%d", i ? ',' : ' ', ids[i]);
    qsort(rate, (size_t)repeats, sizeof *rate, cmp_double);
    printf("\ntokens/s %.2f\n", repeats % 2 ? rate[repeats / 2] : (rate[repeats / 2 - 1] + rate[repeats / 2]) / 2);
    free(logits); free(ids); free(rate);
    sampler_free(s);
    gpt_decoder_free(d);
    st_free_aligned(params);
    return 0;
}
