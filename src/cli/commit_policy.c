/* commit_policy.c - when `strata train` commits (see commit_policy.h). */
#include "cli/commit_policy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

st_status commit_policy_parse(const char *text, commit_policy *out, st_error *err) {
    *out = (commit_policy){0};
    if (!strcmp(text, "auto")) {
        out->automatic = 1;
        return ST_OK;
    }
    char *end;
    errno = 0;
    const long n = strtol(text, &end, 10);
    const double unit = !*end ? 0 : !strcmp(end, "s") ? 1 : !strcmp(end, "m") ? 60 : !strcmp(end, "h") ? 3600 : -1;
    if (end == text || errno || n < 0 || unit < 0 || (unit > 0 && n == 0) || n > 1000000000L)
        return st_fail(err, ST_EINVAL,
                       "commit-every must be auto, 0 (with saves only), a number of steps or a time such as 90s, 10m "
                       "or 2h, not '%s'",
                       text);
    if (unit > 0) out->every_seconds = (double)n * unit;
    else out->every_steps = n;
    return ST_OK;
}

double commit_policy_interval(const commit_policy *p, double last_cost) {
    if (p->every_seconds > 0) return p->every_seconds;
    if (!p->automatic) return 0;
    const double by_cost = last_cost < 0 ? 0 : last_cost * (1 - COMMIT_AUTO_SHARE) / COMMIT_AUTO_SHARE;
    return by_cost > COMMIT_AUTO_MIN_SECONDS ? by_cost : COMMIT_AUTO_MIN_SECONDS;
}

int commit_policy_due(const commit_policy *p, long step, double since_last, double last_cost) {
    if (p->every_steps > 0) return step % p->every_steps == 0;
    const double interval = commit_policy_interval(p, last_cost);
    return interval > 0 && since_last >= interval;
}

void commit_policy_describe(const commit_policy *p, long save_every, char *buf, size_t cap) {
    char saves[64] = "";
    if (save_every > 0) snprintf(saves, sizeof saves, ", and with each save (every %ld steps)", save_every);
    if (p->automatic)
        snprintf(buf, cap,
                 "commits: after %.0f s of training, then as often as keeps commits under %.0f%% of the time (at "
                 "least %.0f s apart)%s: a crash loses at most the time since the last",
                 COMMIT_AUTO_MIN_SECONDS, COMMIT_AUTO_SHARE * 100, COMMIT_AUTO_MIN_SECONDS, saves);
    else if (p->every_seconds > 0)
        snprintf(buf, cap, "commits: every %.0f s%s: a crash loses at most about that much training", p->every_seconds,
                 saves);
    else if (p->every_steps > 0)
        snprintf(buf, cap, "commits: every %ld steps%s: a crash loses at most that many steps", p->every_steps, saves);
    else if (save_every > 0)
        snprintf(buf, cap, "commits: with each save (every %ld steps): a crash loses at most that many steps",
                 save_every);
    else
        snprintf(buf, cap, "commits: only at the end (--commit-every 0): a crash loses the whole run");
}
