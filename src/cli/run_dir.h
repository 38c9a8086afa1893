/*
 * run_dir.h - a training run's directory: run.json (what was asked for),
 * metrics.jsonl (one JSON object per step), model.safetensors + config.json
 * (the weights, in the Hugging Face layout) and tokenizer.json when the run
 * was given one, loss.png (the loss curve).
 *
 * One process writes a run at a time: creating or reopening a run takes
 * its lock (run.lock, holding the writer's PID) until run_dir_finish, and
 * a second writer is refused with that PID.
 *
 * A directory that already holds a run (run.json), or any file a run would
 * replace, is refused unless the caller passes overwrite, so two runs never
 * mix their metrics and weights and files that are not a run's survive.
 * Weights are written atomically (temporary file, fsync, rename): a crash
 * leaves the previous weights or the new ones, never half of each. The
 * run's training state is committed to its store (RUN_DIR/store, or the
 * directories run.json names), which --resume continues from.
 *
 * A job of several ranks has one run directory, rank 0's: the others hold
 * a NULL run_dir, for which committed, log_metrics, sync_metrics, plot and
 * finish do nothing (and succeed).
 */
#ifndef STRATA_CLI_RUN_DIR_H
#define STRATA_CLI_RUN_DIR_H

#include <stddef.h>

#include "strata/gpt_io.h"
#include "strata/model.h"

typedef struct run_dir run_dir;

/* Creates path (and parents) if needed, checks it is writable, and records
 * desc_json as run.json. ST_EEXIST naming the directory if it holds a run
 * (or metrics.jsonl, model.safetensors, config.json, loss.png) and overwrite
 * is 0. */
st_status run_dir_create(run_dir **out, const char *path, const char *desc_json, int overwrite, st_error *err);
/* Reopens the run in path to continue it: run.json must be there. Takes
 * the run's lock as run_dir_create does. */
st_status run_dir_reopen(run_dir **out, const char *path, st_error *err);
/* Cuts a reopened run back to its commit at step: metrics.jsonl keeps its
 * lines up to that step (the lines of steps after it, and a line cut short
 * by a crash, are dropped, so the file reads as if the run had never
 * stopped); temporary files a crashed save left (*.tmp) are removed.
 * Nothing is deleted when the run fails later. */
st_status run_dir_cut_to(run_dir *rd, long step, st_error *err);
/* Replaces run.json (atomically): a resumed run's settings. */
st_status run_dir_write_settings(run_dir *rd, const char *settings_json, st_error *err);
/* The run has committed training state: from now on a failure keeps the
 * run (the run it overwrote is deleted now). */
void run_dir_committed(run_dir *rd);
/* Appends one line to metrics.jsonl (printf format, no newline needed). */
st_status run_dir_log_metrics(run_dir *rd, st_error *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Makes metrics.jsonl durable: before a commit, so that after a power cut
 * the lines up to the committed step are there. */
st_status run_dir_sync_metrics(run_dir *rd, st_error *err);
/* model.safetensors (F32, Hugging Face names, the vocabulary's fingerprint
 * when not 0) and config.json; the weights are fetched one unit at a time,
 * so a model larger than memory saves too. */
st_status run_dir_save_weights(run_dir *rd, const gpt_config *cfg, gpt_unit_reader read_unit, void *ctx,
                               uint64_t vocab_fingerprint, st_error *err);
/* A copy of tokenizer_json as RUN/tokenizer.json (atomically), so that the
 * run directory is a model directory its users find the tokenizer in. */
st_status run_dir_save_tokenizer(run_dir *rd, const char *tokenizer_json, st_error *err);
/* Draws loss.png from metrics.jsonl with gnuplot; msg says what happened
 * (a missing gnuplot is reported, not an error). */
void run_dir_plot(run_dir *rd, char *msg, size_t cap);
const char *run_dir_path(const run_dir *rd);
/* How a run ended, for run_dir_finish. */
typedef enum run_end {
    RUN_SUCCEEDED,   /* done, or stopped on request after committing */
    RUN_FAILED,      /* failed after it trained: what it wrote stays (the
                        metrics say how far it got) */
    RUN_DISCARDED,   /* failed before it trained a step or committed: its
                        files are removed, so that trying again is not refused */
} run_end;
/* Ends the run and releases its lock. An overwritten run is deleted if this
 * one succeeded, and otherwise put back in place of this run's files.
 * NULL is fine. */
void run_dir_finish(run_dir *rd, run_end end);

#endif
