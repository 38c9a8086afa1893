/* batches.c - sequential training batches with wrap-around (strata/batches.h). */
#include <inttypes.h>

#include "strata/batches.h"

st_status batch_loader_init(batch_loader *bl, token_file *tf, int rows, int T, int vocab_size, st_error *err) {
    const uint64_t need = (uint64_t)rows * (uint64_t)T + 1;
    if (token_file_count(tf) < need)
        return st_fail(err, ST_EINVAL,
                       "%s: holds %" PRIu64 " tokens, fewer than one batch of %d sequences of %d tokens needs (%d x %d "
                       "+ 1 = %" PRIu64 "); use fewer or shorter sequences per batch, or more data",
                       token_file_path(tf), token_file_count(tf), rows, T, rows, T, need);
    *bl = (batch_loader){.tf = tf, .T = T, .vocab_size = vocab_size};
    return ST_OK;
}

st_status batch_loader_next(batch_loader *bl, int rows, int32_t *tokens, st_error *err) {
    const uint64_t n = token_file_count(bl->tf), len = (uint64_t)bl->T + 1;
    for (int r = 0; r < rows; r++) {
        if (bl->pos + len > n) {
            bl->pos = 0;
            bl->epoch++;
        }
        st_status s = token_file_read(bl->tf, bl->pos, (size_t)len, tokens + (size_t)r * len, bl->vocab_size, err);
        if (s != ST_OK) return s;
        bl->pos += (uint64_t)bl->T;
    }
    return ST_OK;
}
