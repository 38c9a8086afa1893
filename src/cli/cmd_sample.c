/* cmd_sample.c - `strata sample`: generate text from a trained model. */
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_flags.h"
#include "strata/gpt_io.h"
#include "strata/tokenizer.h"

typedef struct sample_opts {
    const char *model, *prompt;
    long tokens, top_k, n_head, threads;
    double temperature;
    uint64_t seed;
} sample_opts;

#define O(field) offsetof(sample_opts, field)
static const cli_flag sample_flags[] = {
    CLI_STRING("model", O(model), "FILE", "weights (a run's model.safetensors, or a Hugging Face GPT-2 file)"),
    CLI_STRING("prompt", O(prompt), "TEXT", "text to continue (default: start of a document)"),
    CLI_INT("tokens", O(tokens), 1, 1 << 20, "N", "tokens to generate (default 100)"),
    CLI_DOUBLE("temperature", O(temperature), 0, 100, "X", "sampling temperature, 0 = greedy (default 0.8)"),
    CLI_INT("top-k", O(top_k), 0, 1 << 24, "K", "sample among the K most likely tokens, 0 = all (default 40)"),
    CLI_U64("seed", O(seed), "S", "sampling seed (default 1)"),
    CLI_WEIGHTS_N_HEAD_FLAG(O(n_head)),
    CLI_THREADS_FLAG(O(threads)),
};

static const cli_spec sample_spec = {
    .command = "sample",
    .usage = "usage: strata sample --model FILE.safetensors [--prompt TEXT] [flags]",
    .flags = sample_flags,
    .n_flags = CLI_COUNT(sample_flags),
};

/* Picks the next token from logits[V] with temperature and top-k. */
static int32_t pick_token(const float *logits, int V, double temperature, int top_k, st_rng *rng, double *probs,
                          int32_t *order) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (temperature <= 0) return best;
    /* Threshold for top-k: the k-th largest logit, by partial selection. */
    float threshold = -INFINITY;
    if (top_k > 0 && top_k < V) {
        for (int i = 0; i < V; i++) order[i] = i;
        for (int k = 0; k < top_k; k++) {   /* k passes of selection: fine for k in the tens */
            int m = k;
            for (int i = k + 1; i < V; i++)
                if (logits[order[i]] > logits[order[m]]) m = i;
            int32_t tmp = order[k];
            order[k] = order[m];
            order[m] = tmp;
        }
        threshold = logits[order[top_k - 1]];
    }
    double sum = 0;
    for (int i = 0; i < V; i++) {
        probs[i] = logits[i] >= threshold ? exp((logits[i] - logits[best]) / temperature) : 0.0;
        sum += probs[i];
    }
    double r = (double)st_rng_uniform(rng) * sum, acc = 0;
    for (int i = 0; i < V; i++) {
        acc += probs[i];
        if (probs[i] > 0 && r < acc) return i;
    }
    return best;
}

int cmd_sample(int argc, char **argv) {
    sample_opts o = {.prompt = "", .tokens = 100, .temperature = 0.8, .top_k = 40, .seed = 1};
    cli_parsed flags;
    int parsed = cli_parse_flags(&sample_spec, argc, argv, &o, &flags);
    if (parsed != CLI_PARSED) return parsed;
    const char *model = o.model, *prompt = o.prompt;
    st_error err = {0};
    if (!model) return cli_usage_error("sample", "--model is required");
    if (o.threads) omp_set_num_threads((int)o.threads);

    int rc = 1;
    gpt_config cfg;
    float *params = NULL, *logits = NULL;
    double *probs = NULL;
    int32_t *ctx = NULL, *order = NULL, *prompt_ids = NULL;
    size_t n_prompt = 0;
    tokenizer *tok = NULL;
    gpt_workspace *ws = NULL;
    if (gpt_load_safetensors(model, (int)o.n_head, &cfg, &params, &err) != ST_OK) goto fail;
    if (cfg.vocab_size < GPT2_VOCAB_SIZE) {
        st_fail(&err, ST_EINVAL, "%s: vocabulary of %d tokens is smaller than GPT-2's %d; sample needs the GPT-2 tokenizer",
                model, cfg.vocab_size, GPT2_VOCAB_SIZE);
        goto fail;
    }
    if (tokenizer_load_default(&tok, &err) != ST_OK) goto fail;
    if (tokenizer_encode(tok, prompt, strlen(prompt), &prompt_ids, &n_prompt, &err) != ST_OK) goto fail;
    const int T = cfg.n_ctx;
    ctx = malloc(sizeof *ctx * (size_t)(n_prompt + (size_t)o.tokens + 1));
    logits = malloc(sizeof *logits * (size_t)T * (size_t)cfg.padded_vocab);
    probs = malloc(sizeof *probs * (size_t)cfg.vocab_size);
    order = malloc(sizeof *order * (size_t)cfg.vocab_size);
    if (!ctx || !logits || !probs || !order) {
        st_fail(&err, ST_ENOMEM, "out of memory");
        goto fail;
    }
    size_t n = 0;
    ctx[n++] = GPT2_EOT;   /* every document starts after an end-of-text token */
    memcpy(ctx + n, prompt_ids, n_prompt * sizeof *ctx);
    n += n_prompt;
    if (gpt_workspace_create(&ws, compute_backend_cpu(), &cfg, 1, T, 1, GPT_FP32, &err) != ST_OK) goto fail;
    st_rng rng;
    st_rng_seed(&rng, o.seed);
    gpt_weights w = {.precision = GPT_FP32, .f32 = params};
    fputs(prompt, stdout);
    for (long i = 0; i < o.tokens; i++) {
        /* the last T tokens at most: a window as long as the context */
        size_t start = n > (size_t)T ? n - (size_t)T : 0;
        int len = (int)(n - start);
        gpt_forward(ws, w, ctx + start, NULL, 1, len, logits);
        int32_t next = pick_token(logits + (size_t)(len - 1) * cfg.padded_vocab, cfg.vocab_size, o.temperature,
                                  (int)o.top_k, &rng, probs, order);
        ctx[n++] = next;
        if (next == GPT2_EOT) break;
        size_t blen;
        const char *bytes = tokenizer_token_bytes(tok, next, &blen);
        if (bytes) fwrite(bytes, 1, blen, stdout);
        fflush(stdout);
    }
    fputc('\n', stdout);
    rc = 0;
    goto out;
fail:
    rc = cli_fail(&err);
out:
    gpt_workspace_free(ws);
    tokenizer_free(tok);
    st_free_aligned(params);
    free(prompt_ids);
    free(ctx);
    free(logits);
    free(probs);
    free(order);
    return rc;
}
