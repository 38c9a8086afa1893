/* cmd_eval.c - `strata eval`: mean next-token loss of a model on a token file. */
#include <omp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_flags.h"
#include "strata/data.h"
#include "strata/gpt_io.h"

typedef struct eval_opts {
    const char *model, *tokens, *data_format, *precision;
    long batch, seq, n_head, threads;
} eval_opts;

#define O(field) offsetof(eval_opts, field)
static const cli_flag eval_flags[] = {
    CLI_STRING("model", O(model), "PATH", "a Hugging Face model directory or safetensors file (GPT-2 or Llama;\n"
                                        "F32, BF16 or F16)"),
    CLI_STRING("tokens", O(tokens), "FILE", "token file: a strata shard or nanoGPT's raw uint16 (*.bin)"),
    CLI_DATA_FORMAT_FLAG(O(data_format)),
    CLI_INT("batch", O(batch), 1, 1 << 20, "B", "rows (default 1)"),
    CLI_INT("seq", O(seq), 1, 1 << 20, "T", "tokens per row (default: the model's context)"),
    CLI_WEIGHTS_N_HEAD_FLAG(O(n_head)),
    CLI_STRING("precision", O(precision), "P", "fp32 (default) or mixed (bf16 weights)"),
    CLI_THREADS_FLAG(O(threads)),
};

static const cli_spec eval_spec = {
    .command = "eval",
    .usage = "usage: strata eval --model FILE.safetensors --tokens FILE --batch B --seq T [flags]",
    .about = "Mean next-token loss over the first B*T+1 tokens of FILE (B rows of T targets).\n"
             "The last line printed is 'loss <value>'.",
    .flags = eval_flags,
    .n_flags = CLI_COUNT(eval_flags),
};

int cmd_eval(int argc, char **argv) {
    eval_opts o = {.precision = "fp32", .data_format = "auto", .batch = 1};
    cli_parsed flags;
    int parsed = cli_parse_flags(&eval_spec, argc, argv, &o, &flags);
    if (parsed != CLI_PARSED) return parsed;
    const char *model = o.model, *tokens_path = o.tokens;
    long B = o.batch, T = o.seq;
    st_error err = {0};
    if (!model || !tokens_path) return cli_usage_error("eval", "--model and --tokens are required");
    gpt_precision prec;
    if (gpt_precision_parse(o.precision, &prec, &err) != ST_OK) return cli_usage_error("eval", "--%s", err.msg);
    token_format format;
    if (token_format_parse(o.data_format, &format, &err) != ST_OK) return cli_usage_error("eval", "--%s", err.msg);
    if (o.threads) omp_set_num_threads((int)o.threads);

    int rc = 1;
    gpt_config cfg;
    float *params = NULL;
    st_bf16 *p16 = NULL;
    token_file *tf = NULL;
    gpt_workspace *ws = NULL;
    int32_t *rows = NULL, *inputs = NULL, *targets = NULL;
    hf_checkpoint *ck = NULL;
    if (hf_checkpoint_open(&ck, model, (int)o.n_head, &err) != ST_OK) goto fail;
    cfg = *hf_checkpoint_config(ck);
    const uint64_t model_fp = hf_checkpoint_vocab_fingerprint(ck);
    const st_status read = hf_checkpoint_read_all(ck, &params, &err);
    hf_checkpoint_close(ck);
    if (read != ST_OK) goto fail;
    if (!T) T = cfg.n_ctx;
    if (T > cfg.n_ctx) {
        st_fail(&err, ST_EINVAL, "--seq %ld is longer than the context of %s (%d)", T, model, cfg.n_ctx);
        goto fail;
    }
    if (token_file_open(&tf, tokens_path, format, &err) != ST_OK) goto fail;
    if (vocab_fingerprint_check(tokens_path, token_file_vocab_fingerprint(tf), model, model_fp, &err) != ST_OK)
        goto fail;
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
