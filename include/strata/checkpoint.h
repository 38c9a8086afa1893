/*
 * strata/checkpoint.h - a run's training state in a store, read back
 * whatever layout wrote it.
 *
 * The state a run commits (strata train --save-every, and what --resume
 * continues from) is, per unit u of the model, the fp32 master weights and
 * both Adam moments: the tensors master, adam_m and adam_v [u, i]. A unit's
 * elements are its tensors of a kind concatenated in index order. The
 * schedule executor writes them as two parts cut into segments (index
 * part * 65536 + segment, strata/offload.h); the in-memory trainer writes
 * one part; the reader does not care which: any split reads back the same.
 * Compute weights (bf16 or f32) are not part of the state: they are
 * rebuilt from the master weights, bit for bit.
 *
 *     ckpt_reader *r;
 *     if (ckpt_reader_open(&r, st, &model, &err) != ST_OK) ...   // checks every unit is complete
 *     ckpt_read_range(r, STORE_MASTER, u, lo, hi, out, &err);    // elements [lo, hi) of unit u
 *     ckpt_reader_free(r);
 *
 * Reads are cheapest in order (unit by unit, ascending ranges): the reader
 * keeps the last tensor it read of each kind. Its memory is three buffers of
 * the store's largest state tensor (ckpt_reader_bytes), allocated by open.
 */
#ifndef STRATA_CHECKPOINT_H
#define STRATA_CHECKPOINT_H

#include "strata/model.h"
#include "strata/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckpt_reader ckpt_reader;

/* Indexes the state tensors of st for model c. ST_ECORRUPT naming the unit
 * and kind when a unit's tensors of a kind do not add up to its size (a
 * store of another model, or no committed state). */
st_status ckpt_reader_open(ckpt_reader **out, store *st, const gpt_config *c, st_error *err);
/* The same for the store of rank `rank` of a run of `ranks` (strata/offload.h's
 * data parallelism): its tensors hold the rank's shard of each unit,
 * elements [lo, hi) of comm_shard_range, and ckpt_read_range takes unit
 * elements within it. ckpt_reader_open is rank 0 of 1. */
st_status ckpt_reader_open_rank(ckpt_reader **out, store *st, const gpt_config *c, int ranks, int rank,
                                st_error *err);
/* The same over the stores of every rank of a run: stores[r] holds rank
 * r's shards; ckpt_read_range then reads any unit's elements, each from
 * the rank that holds it (resuming on another number of ranks). */
st_status ckpt_reader_open_ranks(ckpt_reader **out, store *const *stores, int ranks, const gpt_config *c,
                                 st_error *err);
void ckpt_reader_free(ckpt_reader *r);
/* Elements [lo, hi) of unit u's tensor of kind (STORE_MASTER, STORE_ADAM_M
 * or STORE_ADAM_V) into out; checksums are verified as the bytes arrive. */
st_status ckpt_read_range(ckpt_reader *r, store_kind kind, int u, size_t lo, size_t hi, float *out, st_error *err);
/* Elements of unit u (what the store holds, checked equal to the model's at
 * open); of a rank's store, where its shard ends. */
st_status ckpt_unit_numel(const ckpt_reader *r, int u, size_t *n, st_error *err);
/* Staging the reader would allocate for st: three of its largest state tensor. */
uint64_t ckpt_reader_bytes(store *st);

/* Unit u's state (n floats each) written as one part in segments of seg
 * elements (tensors kind[u, j]), creating the tensors that are missing;
 * stage is 4096-aligned and holds store_padded_bytes(seg * 4) bytes. An
 * existing tensor of another size is refused (ST_EINVAL): the store holds
 * another layout. What the in-memory trainer commits. */
st_status ckpt_write_unit(store *st, int u, const float *master, const float *m, const float *v, size_t n,
                          size_t seg, void *stage, st_error *err);

/* What a training run records beside each commit (the store's user meta,
 * a JSON object): the step the state is at, the model's shape, and the
 * training data loader's position after that step (strata/batches.h). */
typedef struct ckpt_record {
    long step;
    gpt_config model;
    uint64_t data_pos, data_epoch;   /* the batch_loader's pos and epoch */
    uint64_t data_tokens;            /* tokens in the training file, to notice another dataset */
    uint64_t vocab_fingerprint;      /* the vocabulary the data was made with (tokenizer_fingerprint); 0: unknown */
    int ranks, rank;                 /* a run of several ranks: this store holds rank's shard (0 or 1: one process) */
    size_t segment;                  /* elements per state tensor (segment) the commit is cut into: a run
                                        resumed in place keeps it (train_run_commit fills it in); records
                                        from before it was kept: CKPT_SEGMENT_UNRECORDED */
} ckpt_record;
/* The segment of every commit whose record does not say: the executor's and
 * the in-memory trainer's until the executor's default became smaller. */
#define CKPT_SEGMENT_UNRECORDED ((size_t)1 << 21)
/* r as JSON into buf; returns its length (< cap), or -1 when it does not fit. */
int ckpt_record_format(const ckpt_record *r, char *buf, size_t cap);
/* Parses a record. ST_ENOENT for an empty one (no commit of a step yet);
 * ST_ECORRUPT naming a field missing, of the wrong type or out of range
 * (integers up to 2^53; the shape must pass gpt_config_check). */
st_status ckpt_record_parse(const void *text, size_t n, ckpt_record *out, st_error *err);

#ifdef __cplusplus
}
#endif
#endif
