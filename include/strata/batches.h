/*
 * strata/batches.h - training batches from a token file, in order.
 *
 * A batch is `rows` sequences of T+1 consecutive tokens (inputs are the first
 * T, targets the last T); consecutive rows start T tokens apart, so every
 * token is a target exactly once per pass. At the end of the file the loader
 * wraps to the start (a new epoch). The position is plain data, so a run can
 * record it and resume exactly.
 *
 *     batch_loader bl;
 *     batch_loader_init(&bl, tf, rows, T, vocab_size, &err);
 *     batch_loader_next(&bl, rows, tokens, &err);   // tokens: rows * (T+1)
 */
#ifndef STRATA_BATCHES_H
#define STRATA_BATCHES_H

#include "strata/data.h"

typedef struct batch_loader {
    token_file *tf;
    int T;
    int vocab_size;     /* ids must be below this (checked as they are read) */
    uint64_t pos;       /* first token of the next row */
    uint64_t epoch;     /* completed passes over the file */
} batch_loader;

/* rows: the most rows one batch_loader_next call asks for. ST_EINVAL naming
 * the file and the numbers if it holds fewer than one such batch needs
 * (rows * T + 1 tokens): a smaller file would wrap within a batch, and the
 * batch would repeat its own tokens. */
st_status batch_loader_init(batch_loader *bl, token_file *tf, int rows, int T, int vocab_size, st_error *err);
st_status batch_loader_next(batch_loader *bl, int rows, int32_t *tokens, st_error *err);

#endif
