/*
 * commit_policy.h - when `strata train` commits the training state
 * (--commit-every): every N steps, every so many seconds, or automatically.
 *
 * A commit costs time (a flush and a manifest switch with the state on the
 * SSD; a write of 12 bytes a parameter with it in memory) and a crash loses
 * the steps since the last one. Automatic commits (the default) balance the
 * two: as often as keeps commits at most COMMIT_AUTO_SHARE of the run's
 * time, measured from the last commit's cost, but not more often than every
 * COMMIT_AUTO_MIN_SECONDS (which is also when the first one comes, before a
 * commit's cost is known). Commits do not change the math: a run commits at
 * any steps and its losses and weights are the same.
 *
 *     commit_policy p;
 *     if (commit_policy_parse("auto", &p, &err)) ...
 *     ... after each step:
 *     if (commit_policy_due(&p, step, now - last_commit_end, last_cost)) commit();
 */
#ifndef STRATA_CLI_COMMIT_POLICY_H
#define STRATA_CLI_COMMIT_POLICY_H

#include <stddef.h>

#include "strata/base.h"

#define COMMIT_AUTO_SHARE 0.02
#define COMMIT_AUTO_MIN_SECONDS 60.0

typedef struct commit_policy {
    long every_steps;       /* > 0: every N steps */
    double every_seconds;   /* > 0: when this much time has passed since the last commit */
    int automatic;          /* seconds from the last commit's cost */
} commit_policy;            /* all zero: only with saves and at the end */

/* "auto", "0" (only with --save-every and at the end), N (steps), or a
 * time: N followed by s, m or h ("90s", "10m", "2h"). ST_EINVAL naming the
 * value otherwise. */
st_status commit_policy_parse(const char *text, commit_policy *out, st_error *err);

/* The seconds between time-based commits: every_seconds, or (automatic)
 * what keeps commits at COMMIT_AUTO_SHARE of the time given that the last
 * took last_cost seconds (< 0: none yet), at least COMMIT_AUTO_MIN_SECONDS.
 * 0 for step-based and end-only policies. */
double commit_policy_interval(const commit_policy *p, double last_cost);

/* Whether to commit after step (counted from 1), since_last seconds after
 * the last commit ended (or the run started). */
int commit_policy_due(const commit_policy *p, long step, double since_last, double last_cost);

/* One line for the start of a run: when it commits, and so what a crash
 * can lose. */
void commit_policy_describe(const commit_policy *p, long save_every, char *buf, size_t cap);

#endif
