/* sgemm_tiles.c - what the CPU backend's tiled products cost: each matrix
 * product of a GPT-2 model's training step (forward, input and weight
 * gradients of the block's four matmuls, the tied head's three products)
 * timed as one OpenBLAS call threaded by OpenBLAS itself (what the backend
 * did before its products were cut into tiles, whose bits changed with the
 * thread count) and as the backend's sgemm (a grid of tiles, one
 * single-threaded call each), in alternating repetitions, best of each.
 *
 *   cmake --build build --target sgemm_tiles
 *   build/sgemm_tiles --model gpt2-124m --rows 2048 --threads 2 --reps 8
 *
 * --rows is B*T. Prints one line per product and the ratio of the sums
 * weighted by how often a step runs each product (12 per layer's four
 * matmuls, the head's once per 1024 rows). */
#include <cblas.h>
#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "strata/backend.h"
#include "strata/model.h"

static float *random_matrix(size_t n) {
    float *x = malloc(n * sizeof(float));
    if (!x) abort();
    for (size_t i = 0; i < n; i++) x[i] = (float)(rand() % 2001 - 1000) * 1e-3f;
    return x;
}

int main(int argc, char **argv) {
    const char *model = "gpt2-124m";
    int rows = 2048, threads = 2, reps = 8;
    static const struct option opts[] = {
        {"model", 1, 0, 'm'}, {"rows", 1, 0, 'r'}, {"threads", 1, 0, 'j'}, {"reps", 1, 0, 'n'}, {0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'r': rows = atoi(optarg); break;
        case 'j': threads = atoi(optarg); break;
        case 'n': reps = atoi(optarg); break;
        default: fprintf(stderr, "sgemm_tiles: bad flag\n"); return 2;
        }
    }
    gpt_config cfg;
    st_error err = {0};
    if (gpt_config_from_name(&cfg, model, &err) != ST_OK) {
        fprintf(stderr, "sgemm_tiles: %s\n", err.msg);
        return 1;
    }
    omp_set_num_threads(threads);
    const compute_backend *be = compute_backend_cpu();
    const int C = cfg.d_model, V = cfg.padded_vocab, L = cfg.n_layer, H = rows < 1024 ? rows : 1024;
    const int heads = (rows + H - 1) / H;
    struct {
        const char *name;
        int ta, tb, M, N, K;
        float beta;
        int times;
    } p[] = {
        {"qkv forward", 0, 0, rows, 3 * C, C, 1, L},        {"attproj forward", 0, 0, rows, C, C, 1, L},
        {"fc forward", 0, 0, rows, 4 * C, C, 1, L},         {"fcproj forward", 0, 0, rows, C, 4 * C, 1, L},
        {"qkv dinp", 0, 1, rows, C, 3 * C, 0, L},           {"attproj dinp", 0, 1, rows, C, C, 0, L},
        {"fc dinp", 0, 1, rows, C, 4 * C, 0, L},            {"fcproj dinp", 0, 1, rows, 4 * C, C, 0, L},
        {"qkv dw", 1, 0, C, 3 * C, rows, 1, L},             {"attproj dw", 1, 0, C, C, rows, 1, L},
        {"fc dw", 1, 0, C, 4 * C, rows, 1, L},              {"fcproj dw", 1, 0, 4 * C, C, rows, 1, L},
        {"head logits", 0, 1, H, V, C, 0, heads},           {"head dlnf", 0, 0, H, C, V, 0, heads},
        {"head dwte", 1, 0, V, C, H, 1, heads},
    };
    printf("%s, %d rows, %d threads, best of %d\n", model, rows, threads, reps);
    double sum_blas = 0, sum_tiles = 0;
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
        const int M = p[i].M, N = p[i].N, K = p[i].K, lda = p[i].ta ? M : K, ldb = p[i].tb ? K : N;
        float *A = random_matrix((size_t)M * K), *B = random_matrix((size_t)K * N), *Cm = random_matrix((size_t)M * N);
        double blas = 1e30, tiles = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = st_now();
            cblas_sgemm(CblasRowMajor, p[i].ta ? CblasTrans : CblasNoTrans, p[i].tb ? CblasTrans : CblasNoTrans, M, N,
                        K, 1.0f, A, lda, B, ldb, p[i].beta, Cm, N);
            double t1 = st_now();
            be->sgemm(be, p[i].ta, p[i].tb, M, N, K, 1.0f, A, lda, B, ldb, p[i].beta, Cm, N);
            double t2 = st_now();
            if (t1 - t0 < blas) blas = t1 - t0;
            if (t2 - t1 < tiles) tiles = t2 - t1;
        }
        printf("%-16s %5d x %5d x %5d  OpenBLAS threaded %8.2f ms  tiles %8.2f ms  ratio %.3f\n", p[i].name, M, N, K,
               blas * 1e3, tiles * 1e3, tiles / blas);
        sum_blas += blas * p[i].times;
        sum_tiles += tiles * p[i].times;
        free(A);
        free(B);
        free(Cm);
    }
    printf("a step's products: OpenBLAS threaded %.3f s, tiles %.3f s, ratio %.3f\n", sum_blas, sum_tiles,
           sum_tiles / sum_blas);
    return 0;
}
