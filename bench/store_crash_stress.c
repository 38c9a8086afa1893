/* store_crash_stress.c - the long crash test of the tensor store: a child
 * process writes and commits generation after generation (tensors created,
 * rewritten and deleted, user metadata, volatile scratch tensors), and is
 * killed with SIGKILL at a random moment, many times over. After every kill
 * the store must reopen at exactly the last generation the child reported
 * committed, or the one it was committing, with every tensor's bytes equal
 * to that generation's and every chunk checksum good.
 *
 *   cmake --build build --target store_crash_stress
 *   build/store_crash_stress DIR [TRIALS=60] [SEED=1] [PATHS=3]
 *
 * DIR must exist; the store's paths are made inside it and removed after.
 * Exit status 0 when every trial passes. tests/test_store_crash.c is the
 * short version that runs with the test suite. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "strata/store.h"

#define CHUNK (256 * 1024)
#define N_FIXED 6
#define N_ROTATING 9
#define MAX_PATHS 4
/* Child-to-parent messages are generations; this bit marks "about to commit". */
#define COMMIT_STARTING (1ull << 63)

typedef struct setup {
    char dirs[MAX_PATHS][4096];
    const char *paths[MAX_PATHS];
    int n_paths;
} setup;

static int rotating_present(int j, uint64_t g) {
    return g >= 1 && (j == (int)(g % N_ROTATING) || j == (int)((g * 7 + 3) % N_ROTATING));
}

static store_key key_of(int i) {
    return i < N_FIXED ? (store_key){i % 2 ? STORE_ADAM_M : STORE_MASTER, i, 0}
                       : (store_key){STORE_OTHER, i - N_FIXED, 0};
}

/* 0.5 to 3.5 MiB, never chunk-aligned. */
static uint64_t tensor_bytes(store_key k) {
    return (uint64_t)(k.block % 4) * (1u << 20) + (512u << 10) + 4099u * (uint64_t)(k.kind + 1);
}
#define MAX_BYTES ((uint64_t)4 << 20)

static void fill(unsigned char *p, uint64_t n, store_key k, uint64_t g) {
    st_rng r;
    st_rng_seed(&r, g * 1000003u + (uint64_t)k.kind * 101 + (uint64_t)k.block);
    for (uint64_t i = 0; i < n; i += 8) {
        uint64_t v = st_rng_next(&r);
        memcpy(p + i, &v, n - i < 8 ? n - i : 8);
    }
}

static store_config config(setup *su, store_open_mode mode) {
    store_config cfg = store_default_config();
    cfg.paths = su->paths;
    cfg.n_paths = su->n_paths;
    cfg.mode = mode;
    cfg.chunk_bytes = CHUNK;
    return cfg;
}

static void child_loop(setup *su, int fd) {
    store_config cfg = config(su, STORE_OPEN_EXISTING);
    store *s;
    st_error err = {0};
    if (store_open(&cfg, &s, NULL, 0, &err) != ST_OK) {
        fprintf(stderr, "child: %s\n", err.msg);
        _exit(3);
    }
    unsigned char *buf = st_alloc_aligned(4096, MAX_BYTES);
    for (;;) {
        uint64_t g = store_generation(s) + 1;
        st_status st = ST_OK;
        for (int i = 0; i < N_FIXED + N_ROTATING && st == ST_OK; i++) {
            store_key k = key_of(i);
            int want = i < N_FIXED || rotating_present(i - N_FIXED, g);
            int have = store_has_tensor(s, k);
            if (have && !want) st = store_delete_tensor(s, k, &err);
            if (!want || st != ST_OK) continue;
            if (!have) st = store_create_tensor(s, k, tensor_bytes(k), STORE_TIER_SSD, 0, &err);
            fill(buf, tensor_bytes(k), k, g);
            if (st == ST_OK) st = store_write(s, k, buf, MAX_BYTES, &err);
        }
        store_key scratch = {STORE_ACTIVATIONS, 0, (int32_t)(g % 4)};
        if (st == ST_OK && !store_has_tensor(s, scratch))
            st = store_create_tensor(s, scratch, 1u << 20, STORE_TIER_SSD, STORE_VOLATILE, &err);
        if (st == ST_OK) st = store_write(s, scratch, buf, MAX_BYTES, &err);
        if (st == ST_OK) st = store_set_user_meta(s, &g, sizeof g, &err);
        uint64_t starting = g | COMMIT_STARTING;
        if (st == ST_OK && write(fd, &starting, sizeof starting) != (ssize_t)sizeof starting) _exit(5);
        if (st == ST_OK) st = store_commit(s, &err);
        if (st != ST_OK) {
            fprintf(stderr, "child: generation %llu: %s\n", (unsigned long long)g, err.msg);
            _exit(4);
        }
        if (write(fd, &g, sizeof g) != (ssize_t)sizeof g) _exit(5);
    }
}

/* 0 when the store holds exactly a generation in [lo, hi]; *g_out = it. */
static int check_state(setup *su, uint64_t lo, uint64_t hi, uint64_t *g_out) {
    store_config cfg = config(su, STORE_OPEN_EXISTING);
    store *s;
    st_error err = {0};
    if (store_open(&cfg, &s, NULL, 0, &err) != ST_OK) {
        fprintf(stderr, "reopen failed: %s\n", err.msg);
        return 1;
    }
    int bad = 0;
    uint64_t g = store_generation(s);
    if (g < lo || g > hi) {
        fprintf(stderr, "generation %llu, expected %llu..%llu\n", (unsigned long long)g, (unsigned long long)lo,
                (unsigned long long)hi);
        bad = 1;
    }
    size_t mn;
    const void *meta = store_user_meta(s, &mn);
    if (g > 0 && (mn != sizeof g || memcmp(meta, &g, sizeof g) != 0)) {
        fprintf(stderr, "user metadata does not say generation %llu\n", (unsigned long long)g);
        bad = 1;
    }
    int expected = 0;
    for (int i = 0; i < N_FIXED + N_ROTATING && g > 0; i++) expected += i < N_FIXED || rotating_present(i - N_FIXED, g);
    if (store_tensor_count(s) != expected) {
        fprintf(stderr, "%d tensors, expected %d\n", store_tensor_count(s), expected);
        bad = 1;
    }
    unsigned char *want = st_alloc_aligned(4096, MAX_BYTES), *got = st_alloc_aligned(4096, MAX_BYTES);
    for (int i = 0; i < N_FIXED + N_ROTATING && g > 0 && !bad; i++) {
        store_key k = key_of(i);
        int present = i < N_FIXED || rotating_present(i - N_FIXED, g);
        if (store_has_tensor(s, k) != present) {
            fprintf(stderr, "tensor %d: present %d, expected %d\n", i, !present, present);
            bad = 1;
            break;
        }
        if (!present) continue;
        fill(want, tensor_bytes(k), k, g);
        if (store_read(s, k, got, MAX_BYTES, &err) != ST_OK) {
            fprintf(stderr, "read: %s\n", err.msg);
            bad = 1;
        } else if (memcmp(want, got, tensor_bytes(k)) != 0) {
            char name[64];
            fprintf(stderr, "tensor %s does not hold generation %llu\n", store_key_name(k, name, sizeof name),
                    (unsigned long long)g);
            bad = 1;
        }
    }
    uint64_t bad_chunks = 0;
    if (!bad && store_scrub(s, &bad_chunks, &err) != ST_OK) {
        fprintf(stderr, "scrub: %llu bad chunks: %s\n", (unsigned long long)bad_chunks, err.msg);
        bad = 1;
    }
    st_free_aligned(want);
    st_free_aligned(got);
    store_close(s);
    *g_out = g;
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [TRIALS=60] [SEED=1] [PATHS=3]\n", argv[0]);
        return 2;
    }
    int trials = argc > 2 ? atoi(argv[2]) : 60;
    uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
    setup su = {.n_paths = argc > 4 ? atoi(argv[4]) : 3};
    if (trials < 1 || su.n_paths < 1 || su.n_paths > MAX_PATHS) {
        fprintf(stderr, "bad TRIALS or PATHS\n");
        return 2;
    }
    char root[3900];
    snprintf(root, sizeof root, "%.3800s/strata-crash-stress-%ld", argv[1], (long)getpid());
    if (mkdir(root, 0755) != 0) {
        perror(root);
        return 1;
    }
    for (int p = 0; p < su.n_paths; p++) {
        snprintf(su.dirs[p], sizeof su.dirs[p], "%s/path%d", root, p);
        mkdir(su.dirs[p], 0755);
        su.paths[p] = su.dirs[p];
    }
    store_config cfg = config(&su, STORE_CREATE);
    store *s;
    st_error err = {0};
    if (store_open(&cfg, &s, NULL, 0, &err) != ST_OK) {
        fprintf(stderr, "create: %s\n", err.msg);
        return 1;
    }
    store_close(s);

    st_rng r;
    st_rng_seed(&r, seed);
    uint64_t committed = 0;
    int failures = 0, in_flight_landed = 0;
    double t0 = st_now();
    for (int t = 0; t < trials; t++) {
        int fds[2];
        if (pipe(fds) != 0) return 1;
        pid_t pid = fork();
        if (pid < 0) return 1;
        if (pid == 0) {
            close(fds[0]);
            child_loop(&su, fds[1]);
        }
        close(fds[1]);
        /* A third of the kills land at random moments early (open, first
         * writes), a third late (several commits in), and a third within a
         * few milliseconds after the child starts its k-th commit. */
        uint64_t g, last = committed;
        double delay_ms;
        if (t % 3 == 2) {
            uint64_t k = 1 + st_rng_next(&r) % 3, seen = 0;
            useconds_t after = (useconds_t)(st_rng_next(&r) % 4000);
            double t_start = st_now();
            while (seen < k && read(fds[0], &g, sizeof g) == (ssize_t)sizeof g) {
                if (g & COMMIT_STARTING) seen++;
                else last = g;
            }
            usleep(after);
            delay_ms = (st_now() - t_start) * 1e3;
        } else {
            useconds_t delay = (useconds_t)(t % 3 ? 1000 + st_rng_next(&r) % 60000 : 50000 + st_rng_next(&r) % 750000);
            usleep(delay);
            delay_ms = delay / 1000.0;
        }
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        while (read(fds[0], &g, sizeof g) == (ssize_t)sizeof g)
            if (!(g & COMMIT_STARTING)) last = g;
        close(fds[0]);
        int killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        uint64_t now = 0;
        int bad = !killed || check_state(&su, last, last + 1, &now);
        if (!killed) fprintf(stderr, "trial %d: the child exited (%d) before the kill\n", t, WEXITSTATUS(status));
        failures += bad;
        in_flight_landed += !bad && now == last + 1;
        printf("trial %3d: killed after %6.1f ms%s, reported generation %4llu, reopened at %4llu: %s\n", t, delay_ms,
               t % 3 == 2 ? " (in a commit)" : "",
               (unsigned long long)last, (unsigned long long)now, bad ? "FAIL" : "ok");
        fflush(stdout);
        if (!bad) committed = now;
    }
    printf("%d trials in %.1f s, %d failures; %llu generations committed; %d kills landed between a commit's "
           "rename and its report\n",
           trials, st_now() - t0, failures, (unsigned long long)committed, in_flight_landed);
    if (!failures) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    } else {
        fprintf(stderr, "store left in %s for inspection\n", root);
    }
    return failures ? 1 : 0;
}
