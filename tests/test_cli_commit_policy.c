/* test_cli_commit_policy.c - when `strata train` commits (cli/commit_policy.h):
 * the spellings of --commit-every, step- and time-based commits, and the
 * automatic interval that keeps commits at their share of the time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cli/commit_policy.h"

static void test_parse(void **state) {
    (void)state;
    commit_policy p;
    st_error err = {0};
    assert_int_equal(commit_policy_parse("auto", &p, &err), ST_OK);
    assert_true(p.automatic);
    assert_int_equal(commit_policy_parse("0", &p, &err), ST_OK);
    assert_true(!p.automatic && p.every_steps == 0 && p.every_seconds == 0);
    assert_int_equal(commit_policy_parse("25", &p, &err), ST_OK);
    assert_int_equal(p.every_steps, 25);
    assert_int_equal(commit_policy_parse("90s", &p, &err), ST_OK);
    assert_true(p.every_seconds == 90);
    assert_int_equal(commit_policy_parse("10m", &p, &err), ST_OK);
    assert_true(p.every_seconds == 600);
    assert_int_equal(commit_policy_parse("2h", &p, &err), ST_OK);
    assert_true(p.every_seconds == 7200);
    const char *bad[] = {"", "-1", "0s", "5x", "m", "1.5m", "auto ", "10mm", "99999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(commit_policy_parse(bad[i], &p, &err), ST_EINVAL);
        assert_non_null(strstr(err.msg, "commit-every must be auto"));
    }
}

static void test_steps_and_time(void **state) {
    (void)state;
    commit_policy p;
    st_error err = {0};
    assert_int_equal(commit_policy_parse("5", &p, &err), ST_OK);
    assert_false(commit_policy_due(&p, 4, 1e9, -1));
    assert_true(commit_policy_due(&p, 5, 0, -1));
    assert_true(commit_policy_due(&p, 10, 0, 100));
    assert_int_equal(commit_policy_parse("30s", &p, &err), ST_OK);
    assert_false(commit_policy_due(&p, 1, 29.9, 1000));   /* a fixed time, whatever a commit costs */
    assert_true(commit_policy_due(&p, 1, 30, 1000));
    assert_int_equal(commit_policy_parse("0", &p, &err), ST_OK);
    assert_false(commit_policy_due(&p, 100, 1e9, 0.1));
}

static void test_auto(void **state) {
    (void)state;
    commit_policy p;
    st_error err = {0};
    assert_int_equal(commit_policy_parse("auto", &p, &err), ST_OK);
    /* the first commit comes after the minimum, when no cost is known */
    assert_true(commit_policy_interval(&p, -1) == COMMIT_AUTO_MIN_SECONDS);
    assert_false(commit_policy_due(&p, 1, COMMIT_AUTO_MIN_SECONDS - 1, -1));
    assert_true(commit_policy_due(&p, 1, COMMIT_AUTO_MIN_SECONDS, -1));
    /* cheap commits: never closer than the minimum */
    assert_true(commit_policy_interval(&p, 0.01) == COMMIT_AUTO_MIN_SECONDS);
    /* costly commits: their share of (interval + commit) is the target share */
    for (double cost = 2; cost < 1000; cost *= 3) {
        const double interval = commit_policy_interval(&p, cost);
        assert_true(interval >= COMMIT_AUTO_MIN_SECONDS);
        const double share = cost / (interval + cost);
        assert_true(share <= COMMIT_AUTO_SHARE + 1e-12);
        if (interval > COMMIT_AUTO_MIN_SECONDS) assert_true(share > COMMIT_AUTO_SHARE - 1e-9);
    }
    assert_false(commit_policy_due(&p, 1, 400, 10));   /* 10 s commits: every 490 s */
    assert_true(commit_policy_due(&p, 1, 490, 10));
}

static void test_describe(void **state) {
    (void)state;
    commit_policy p;
    st_error err = {0};
    char line[320];
    assert_int_equal(commit_policy_parse("0", &p, &err), ST_OK);
    commit_policy_describe(&p, 0, line, sizeof line);
    assert_non_null(strstr(line, "a crash loses the whole run"));
    commit_policy_describe(&p, 50, line, sizeof line);
    assert_non_null(strstr(line, "every 50 steps"));
    assert_int_equal(commit_policy_parse("7", &p, &err), ST_OK);
    commit_policy_describe(&p, 0, line, sizeof line);
    assert_non_null(strstr(line, "every 7 steps"));
    assert_int_equal(commit_policy_parse("auto", &p, &err), ST_OK);
    commit_policy_describe(&p, 0, line, sizeof line);
    assert_non_null(strstr(line, "under 2% of the time"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_steps_and_time),
        cmocka_unit_test(test_auto),
        cmocka_unit_test(test_describe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
