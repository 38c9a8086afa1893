/*
 * strata/trace.h - a Chrome trace event file (opens in Perfetto or
 * chrome://tracing): named lanes, and spans of time on them.
 *
 *     trace *tr;
 *     trace_open(&tr, "run.trace.json", &err);
 *     int compute = trace_lane(tr, "compute");
 *     double t0 = st_now();
 *     ... work ...
 *     trace_span(tr, compute, "forward u3 mb1", t0, st_now());
 *     trace_close(tr, &err);
 *
 * Spans are written as they come (complete events, "ph": "X"), so a run that
 * stops early leaves a readable prefix; trace_close adds the closing bracket.
 * trace_span may be called from several threads at once.
 */
#ifndef STRATA_TRACE_H
#define STRATA_TRACE_H

#include "strata/base.h"

typedef struct trace trace;

st_status trace_open(trace **out, const char *path, st_error *err);
/* A lane (a "thread" row in the viewer); returns its id. Lanes are numbered
 * in the order they are made. */
int trace_lane(trace *tr, const char *name);
/* A span from start to end, times from st_now(). NULL tr is a no-op. */
void trace_span(trace *tr, int lane, const char *name, double start, double end);
/* Writes the end of the file and closes it; reports the first write error. NULL is a no-op. */
st_status trace_close(trace *tr, st_error *err);

#endif
