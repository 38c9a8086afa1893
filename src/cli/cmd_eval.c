/* cmd_eval.c - `strata eval`: mean next-token loss of a model on a token file. */
#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "strata/data.h"
#include "strata/gpt_io.h"

static void usage(FILE *f) {
    fprintf(f, "usage: strata eval --model FILE.safetensors --tokens FILE --batch B --seq T [flags]\n\n"
               "Mean next-token loss over the first B*T+1 tokens of FILE (B rows of T targets).\n"
               "The last line printed is 'loss <value>'.\n\n"
               "  --model FILE     weights (Hugging Face GPT-2 layout; F32, BF16 or F16)\n"
               "  --tokens FILE    token file: a strata shard or nanoGPT's raw uint16\n"
               "  --batch B        rows (default 1)\n"
               "  --seq T          tokens per row (default: the model's context)\n"
               "  --n-head N       attention heads (default: config.json beside the model, else d_model/64)\n"
               "  --precision P    fp32 (default) or mixed (bf16 weights)\n"
               "  --threads N      compute threads\n");
}

int cmd_eval(int argc, char **argv) {
    static const struct option longopts[] = {
        {"model", required_argument, NULL, 'm'}, {"tokens", required_argument, NULL, 't'},
        {"batch", required_argument, NULL, 'b'}, {"seq", required_argument, NULL, 's'},
        {"n-head", required_argument, NULL, 'n'}, {"threads", required_argument, NULL, 'j'},
        {"precision", required_argument, NULL, 'p'}, {"help", no_argument, NULL, 'h'}, {0}};
    const char *model = NULL, *tokens_path = NULL, *precision = "fp32";
    long B = 1, T = 0, n_head = 0, threads = 0;
    st_error err = {0};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        st_status s = ST_OK;
        switch (c) {
        case 'm': model = optarg; break;
        case 't': tokens_path = optarg; break;
        case 'p': precision = optarg; break;
        case 'b': s = cli_parse_int("--batch", optarg, 1, 1 << 20, &B, &err); break;
        case 's': s = cli_parse_int("--seq", optarg, 1, 1 << 20, &T, &err); break;
        case 'n': s = cli_parse_int("--n-head", optarg, 1, 4096, &n_head, &err); break;
        case 'j': s = cli_parse_int("--threads", optarg, 1, 1024, &threads, &err); break;
        case 'h': usage(stdout); return 0;
        default: return cli_usage_error("eval", "unknown or incomplete flag");
        }
        if (s != ST_OK) return cli_usage_error("eval", "%s", err.msg);
    }
    if (!model || !tokens_path) return cli_usage_error("eval", "--model and --tokens are required");
    gpt_precision prec;
    if (gpt_precision_parse(precision, &prec, &err) != ST_OK) return cli_usage_error("eval", "--%s", err.msg);
    if (threads) omp_set_num_threads((int)threads);

    int rc = 1;
    gpt_config cfg;
    float *params = NULL;
    st_bf16 *p16 = NULL;
    token_file *tf = NULL;
    gpt_workspace *ws = NULL;
    int32_t *rows = NULL, *inputs = NULL, *targets = NULL;
    if (gpt_load_safetensors(model, (int)n_head, &cfg, &params, &err) != ST_OK) goto fail;
    if (!T) T = cfg.n_ctx;
    if (T > cfg.n_ctx) {
        st_fail(&err, ST_EINVAL, "--seq %ld is longer than the context of %s (%d)", T, model, cfg.n_ctx);
        goto fail;
    }
    if (token_file_open(&tf, tokens_path, &err) != ST_OK) goto fail;
    const uint64_t need = (uint64_t)B * (uint64_t)T + 1;
    if (token_file_count(tf) < need) {
        st_fail(&err, ST_EINVAL, "%s: holds %llu tokens, --batch %ld x --seq %ld needs %llu", tokens_path,
                (unsigned long long)token_file_count(tf), B, T, (unsigned long long)need);
        goto fail;
    }
    rows = malloc(need * sizeof *rows);
    inputs = malloc((size_t)(B * T) * sizeof *inputs);
    targets = malloc((size_t)(B * T) * sizeof *targets);
    if (!rows || !inputs || !targets) {
        st_fail(&err, ST_ENOMEM, "out of memory for %llu tokens", (unsigned long long)need);
        goto fail;
    }
    if (token_file_read(tf, 0, (size_t)need, rows, cfg.vocab_size, &err) != ST_OK) goto fail;
    for (long i = 0; i < B * T; i++) {
        inputs[i] = rows[i];
        targets[i] = rows[i + 1];
    }
    if (gpt_workspace_create(&ws, compute_backend_cpu(), &cfg, (int)B, (int)T, 1, prec, &err) != ST_OK) goto fail;
    gpt_weights w = {.precision = prec, .f32 = params};
    if (prec == GPT_MIXED_BF16) {
        p16 = malloc(gpt_num_params(&cfg) * sizeof *p16);
        if (!p16) {
            st_fail(&err, ST_ENOMEM, "out of memory");
            goto fail;
        }
        gpt_f32_to_bf16(params, p16, gpt_num_params(&cfg));
        w.bf16 = p16;
    }
    double t0 = st_now();
    float loss = gpt_forward(ws, w, inputs, targets, (int)B, (int)T, NULL);
    fprintf(stderr, "%s: %d layers, d_model %d, %ld x %ld tokens in %.2f s\n", model, cfg.n_layer, cfg.d_model, B, T,
            st_now() - t0);
    printf("loss %.6f\n", loss);
    rc = 0;
    goto out;
fail:
    rc = cli_fail(&err);
out:
    gpt_workspace_free(ws);
    token_file_close(tf);
    st_free_aligned(params);
    free(p16);
    free(rows);
    free(inputs);
    free(targets);
    return rc;
}
