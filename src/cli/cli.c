/* cli.c - shared command-line helpers: error printing and flag parsing. */
#include "cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("strata: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int cli_fail(const st_error *err) {
    return cli_error("%s", err->msg[0] ? err->msg : st_status_name(err->status));
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "strata %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see 'strata %s --help')\n", cmd);
    va_end(ap);
    return 2;
}

st_status cli_parse_int(const char *flag, const char *s, long min, long max, long *out, st_error *err) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end)
        return st_fail(err, ST_EINVAL, "%s: '%s' is not an integer", flag, s);
    if (v < min || v > max)
        return st_fail(err, ST_EINVAL, "%s: %ld is out of range [%ld, %ld]", flag, v, min, max);
    *out = v;
    return ST_OK;
}

st_status cli_parse_u64(const char *flag, const char *s, uint64_t *out, st_error *err) {
    char *end;
    errno = 0;
    /* strtoull skips blanks and wraps a minus sign around: " -1" is 2^64-1 */
    if (strchr(s, '-')) return st_fail(err, ST_EINVAL, "%s: '%s' must not be negative", flag, s);
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end)
        return st_fail(err, ST_EINVAL, "%s: '%s' is not a non-negative integer", flag, s);
    *out = v;
    return ST_OK;
}

st_status cli_parse_double(const char *flag, const char *s, double min, double max, double *out, st_error *err) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return st_fail(err, ST_EINVAL, "%s: '%s' is not a number", flag, s);
    if (v < min || v > max)
        return st_fail(err, ST_EINVAL, "%s: %g is out of range [%g, %g]", flag, v, min, max);
    *out = v;
    return ST_OK;
}

st_status cli_parse_size(const char *flag, const char *s, uint64_t *out, st_error *err) {
    char *end;
    errno = 0;
    if (*s == '-') return st_fail(err, ST_EINVAL, "%s: '%s' must not be negative", flag, s);
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0)
        return st_fail(err, ST_EINVAL, "%s: '%s' is not a size (examples: 4096, 1M, 2G)", flag, s);
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I')) end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end)
        return st_fail(err, ST_EINVAL, "%s: '%s' is not a size (examples: 4096, 1M, 2G)", flag, s);
    double bytes = v * mult;
    if (bytes > 9.2e18 || bytes != floor(bytes))
        return st_fail(err, ST_EINVAL, "%s: '%s' is not a whole number of bytes", flag, s);
    *out = (uint64_t)bytes;
    return ST_OK;
}

int cli_stdout_is_tty(void) { return isatty(STDOUT_FILENO); }
