/* cmd_sample.c - `strata sample`: generate text from a model directory (a
 * run's, or one from the Hub) with its own tokenizer, the model's decoder (a
 * cache of keys and values: the prompt in one pass, then one token per step)
 * and the sampler of strata/generate.h. */
#include <omp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_flags.h"
#include "strata/data.h"
#include "strata/generate.h"
#include "strata/gpt_io.h"
#include "strata/tokenizer.h"

typedef struct sample_opts {
    const char *model, *tokenizer, *prompt;
    long tokens, top_k, n_head, threads;
    double temperature, top_p;
    uint64_t seed;
} sample_opts;

#define O(field) offsetof(sample_opts, field)
static const cli_flag sample_flags[] = {
    CLI_STRING("model", O(model), "PATH",
               "a Hugging Face model directory or safetensors file (GPT-2 or Llama;\n"
               "a run directory is one)"),
    CLI_STRING("tokenizer", O(tokenizer), "FILE|DIR",
               "a Hugging Face tokenizer.json, or a directory holding one (default:\n"
               "the model directory's tokenizer.json, else GPT-2's vocabulary)"),
    CLI_STRING("prompt", O(prompt), "TEXT", "text to continue (default: start of a document)"),
    CLI_INT("tokens", O(tokens), 1, 1 << 20, "N", "tokens to generate (default 100)"),
    CLI_DOUBLE("temperature", O(temperature), 0, 100, "X", "sampling temperature, 0 = greedy (default 0.8)"),
    CLI_INT("top-k", O(top_k), 0, 1 << 24, "K", "sample among the K most likely tokens, 0 = all (default 40)"),
    CLI_DOUBLE("top-p", O(top_p), 1e-6, 1, "P",
               "then among the fewest most likely tokens whose probability sums to\n>= P (the nucleus), in (0, 1]; 1 = all (default 1)"),
    CLI_U64("seed", O(seed), "S", "sampling seed (default 1)"),
    CLI_WEIGHTS_N_HEAD_FLAG(O(n_head)),
    CLI_THREADS_FLAG(O(threads)),
};

static const cli_spec sample_spec = {
    .command = "sample",
    .usage = "usage: strata sample --model PATH [--tokenizer FILE|DIR] [--prompt TEXT] [flags]",
    .about = "Generates text with a cache of keys and values. The text starts a document (after the\n"
            "tokenizer's document separator: GPT-2's <|endoftext|>, Llama 3's <|begin_of_text|>)\n"
            "and stops at any special token the model generates (end of text, end of turn).",
    .flags = sample_flags,
    .n_flags = CLI_COUNT(sample_flags),
};

/* The tokenizer: --tokenizer, else the model directory's tokenizer.json,
 * else GPT-2's; its ids must be the model's (a vocabulary no larger than
 * the model's, and the fingerprint the weights record, if any). */
static st_status load_tokenizer(const sample_opts *o, const hf_checkpoint *ck, tokenizer **tok, st_error *err) {
    char beside[4200];
    st_status st = tokenizer_load_path(tok, cli_model_tokenizer(o->tokenizer, hf_checkpoint_dir(ck), beside,
                                                                sizeof beside), err);
    if (st != ST_OK) return st;
    const gpt_config *cfg = hf_checkpoint_config(ck);
    if (tokenizer_vocab_size(*tok) > cfg->vocab_size)
        return st_fail(err, ST_EINVAL, "%s has %d tokens, more than the vocabulary of %s (%d): they are not its "
                       "tokenizer (--tokenizer FILE|DIR names the right one)", tokenizer_source(*tok),
                       tokenizer_vocab_size(*tok), o->model, cfg->vocab_size);
    return vocab_fingerprint_check(o->model, hf_checkpoint_vocab_fingerprint(ck), tokenizer_source(*tok),
                                   tokenizer_fingerprint(*tok), err);
}

int cmd_sample(int argc, char **argv) {
    sample_opts o = {.prompt = "", .tokens = 100, .temperature = 0.8, .top_k = 40, .top_p = 1.0, .seed = 1};
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
    int32_t *ctx = NULL, *prompt_ids = NULL;
    size_t n_prompt = 0;
    hf_checkpoint *ck = NULL;
    tokenizer *tok = NULL;
    gpt_decoder *dec = NULL;
    sampler *smp = NULL;
    if (hf_checkpoint_open(&ck, model, (int)o.n_head, &err) != ST_OK) goto fail;
    cfg = *hf_checkpoint_config(ck);
    if (load_tokenizer(&o, ck, &tok, &err) != ST_OK) goto fail;
    if (hf_checkpoint_read_all(ck, &params, &err) != ST_OK) goto fail;
    if (tokenizer_encode(tok, prompt, strlen(prompt), &prompt_ids, &n_prompt, &err) != ST_OK) goto fail;
    const int32_t start = tokenizer_doc_separator(tok);
    if (start < 0 && n_prompt == 0) {
        st_fail(&err, ST_EINVAL, "%s has no special token to start a document with: give a --prompt",
                tokenizer_source(tok));
        goto fail;
    }
    /* Only the tokenizer's ids can be printed: a model vocabulary padded
     * beyond them is sampled over the tokenizer's. */
    const int V = tokenizer_vocab_size(tok);
    const sampler_params sp = {.temperature = o.temperature, .top_k = (int)o.top_k, .top_p = o.top_p};
    if (sampler_create(&smp, V, &sp, o.seed, &err) != ST_OK) goto fail;
    ctx = malloc(sizeof *ctx * (n_prompt + 1));
    logits = malloc(sizeof *logits * (size_t)cfg.padded_vocab);
    if (!ctx || !logits) {
        st_fail(&err, ST_ENOMEM, "out of memory");
        goto fail;
    }
    size_t n = 0;
    if (start >= 0) ctx[n++] = start;   /* a document starts after the separator, as in training */
    memcpy(ctx + n, prompt_ids, n_prompt * sizeof *ctx);
    n += n_prompt;
    if (n > (size_t)cfg.n_ctx)
        fprintf(stderr, "strata sample: the prompt is %zu tokens, more than the model's context of %d: continuing "
                        "from its last %d\n", n_prompt, cfg.n_ctx, cfg.n_ctx);
    /* The cache holds what this run can reach, not the whole context (a
     * Llama 3.1 context of 128k positions would be gigabytes of keys). */
    const size_t reach = n + (size_t)o.tokens;
    const int max_len = reach < (size_t)cfg.n_ctx ? (int)reach : cfg.n_ctx;
    if (gpt_decoder_create(&dec, compute_backend_cpu(), &cfg, max_len, GPT_FP32, &err) != ST_OK) goto fail;
    gpt_weights w = {.precision = GPT_FP32, .f32 = params};
    fputs(prompt, stdout);
    fflush(stdout);
    const double t0 = st_now();
    const int kept = gpt_decoder_prefill(dec, w, ctx, n, logits);
    const double t_prompt = st_now() - t0;
    long made = 0;
    for (; made < o.tokens; made++) {
        const int32_t next = sampler_pick(smp, logits);
        if (tokenizer_is_special(tok, next)) break;   /* end of text or of a turn, or a new document */
        size_t blen;
        const char *bytes = tokenizer_token_bytes(tok, next, &blen);
        if (bytes) fwrite(bytes, 1, blen, stdout);
        fflush(stdout);   /* each token as it comes */
        if (made + 1 < o.tokens) gpt_decoder_step(dec, w, next, logits);
    }
    const double dt = st_now() - t0;
    fputc('\n', stdout);
    fflush(stdout);
    fprintf(stderr, "strata sample: %ld tokens in %.2f s, %.1f tokens/s (prompt: %d tokens in %.2f s)\n", made, dt,
            dt > 0 ? (double)made / dt : 0.0, kept, t_prompt);
    rc = 0;
    goto out;
fail:
    rc = cli_fail(&err);
out:
    hf_checkpoint_close(ck);
    gpt_decoder_free(dec);
    sampler_free(smp);
    tokenizer_free(tok);
    st_free_aligned(params);
    free(prompt_ids);
    free(ctx);
    free(logits);
    return rc;
}
