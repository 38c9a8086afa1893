/* death_testutil.h - running code that must die (a fault, an abort) in a
 * forked child. The child gets the default handlers for those signals:
 * ASan's would turn a fault into its own report and an abort. Header-only;
 * include after cmocka.h. */
#ifndef STRATA_DEATH_TESTUTIL_H
#define STRATA_DEATH_TESTUTIL_H

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs fn(arg) in a forked child, its stderr into a file; returns the
 * signal that ended the child (0 if it exited) and its stderr in msg. */
static inline int signal_of_child(void (*fn)(void *), void *arg, char *msg, size_t msg_size) {
    FILE *log = tmpfile();
    assert_non_null(log);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        signal(SIGABRT, SIG_DFL);
        dup2(fileno(log), 2);
        fn(arg);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    rewind(log);
    size_t got = fread(msg, 1, msg_size - 1, log);
    msg[got] = '\0';
    fclose(log);
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

#endif
