/* fuzz_model_checkpoint.c - libFuzzer target for Hugging Face model
 * directories (strata/gpt_io.h): the config.json and the
 * model.safetensors.index.json that hf_checkpoint_open reads before any
 * weight.
 *
 * At start a small Llama checkpoint is saved into a temporary directory,
 * in shards with their index (hf_checkpoint_save). Each input's first byte
 * picks the file it replaces (even: config.json, odd: the index); the rest
 * is that file's content. Opening the directory must either fail with one
 * line that names what is wrong (and the status the call returned), or give
 * a config that passes gpt_config_check whose weights then read whole. The
 * saved file is put back after each input. Any broken promise aborts.
 *
 * Build and run with scripts/fuzz.sh; seeds are in fuzz/seeds/model_checkpoint/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strata/fs.h"
#include "strata/gpt_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "fuzz_model_checkpoint: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

static char dir[64];
static char *saved[2];   /* config.json and the index as saved */
static size_t saved_len[2];
static const char *const file_name[2] = {"config.json", "model.safetensors.index.json"};

static st_status zero_unit(void *ctx, int unit, float *out, st_error *err) {
    (void)err;
    const gpt_config *cfg = ctx;
    memset(out, 0, gpt_unit_numel(cfg, unit) * sizeof(float));
    return ST_OK;
}

static void cleanup(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "fuzz_model_checkpoint: could not remove %s\n", dir);
}

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/fuzz-checkpoint-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    atexit(cleanup);
    gpt_config cfg = {.arch = GPT_ARCH_LLAMA, .n_layer = 2, .n_head = 4, .n_kv_head = 2, .d_model = 16, .d_ff = 24,
                      .n_ctx = 32, .vocab_size = 40, .rope_theta = 10000.0f, .norm_eps = 1e-5f};
    st_error err = {0};
    CHECK(gpt_config_check(&cfg, &err) == ST_OK);
    const hf_save_opts o = {.dtype = SAFETENSORS_F32, .shard_bytes = 4096};
    CHECK(hf_checkpoint_save(dir, &cfg, zero_unit, &cfg, &o, &err) == ST_OK);
    for (int i = 0; i < 2; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s", dir, file_name[i]);
        CHECK(st_read_file(path, 1 << 20, &saved[i], &saved_len[i], &err) == ST_OK);
    }
}

static void put(int which, const void *bytes, size_t len) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, file_name[which]);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(len == 0 || fwrite(bytes, 1, len, f) == len);
    CHECK(fclose(f) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!saved[0]) setup();
    if (size < 1) return 0;
    const int which = data[0] & 1;
    put(which, data + 1, size - 1);

    hf_checkpoint *ck = NULL;
    st_error err = {0};
    const st_status s = hf_checkpoint_open(&ck, dir, 0, &err);
    if (s != ST_OK) {
        CHECK(ck == NULL && err.status == s && err.msg[0] && !strchr(err.msg, '\n'));
    } else {
        gpt_config cfg = *hf_checkpoint_config(ck);
        CHECK(gpt_config_check(&cfg, &err) == ST_OK);
        float *params = NULL;
        /* the shards are the saved ones: a config that opens must read them */
        const st_status r = hf_checkpoint_read_all(ck, &params, &err);
        CHECK(r == ST_OK);
        st_free_aligned(params);
        hf_checkpoint_close(ck);
    }
    put(which, saved[which], saved_len[which]);
    return 0;
}
