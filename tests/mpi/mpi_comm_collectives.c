/* mpi_comm_collectives.c - the comm layer's collectives on several ranks,
 * run by ctest under mpirun with 2 and 3 ranks (CMakeLists.txt, MPI tests).
 *
 * Every rank's inputs are a function of (rank, element, case), so each rank
 * computes locally, in rank order, what every collective must give, and
 * holds the result to it bit for bit: the shard all-gathers (f32, bf16),
 * the reduce-scatter (separate and in place, scratch given or not), the
 * deterministic sum of doubles (and that every rank has the same bits), on
 * sizes that do not divide by the rank count, smaller than it, and zero;
 * the non-blocking forms with compute between start and wait, several
 * outstanding, waited out of order and on another thread; messages split
 * at a few bytes; the byte and message counters against the formulas
 * in strata/comm.h; and the barrier that waits asleep. A rank whose check fails ends the job (MPI_Abort) once
 * cmocka has printed the failure, so the other ranks never wait forever in
 * a collective it left. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <time.h>

#include "strata/base.h"
#include "strata/comm.h"

#include "mpi_testutil.h"

static int g_teardown_failed;   /* cmocka does not count a group teardown's failure */

static int group_teardown(void **state) {
    (void)state;
    abort_if_failed();
    comm_close(C);   /* the last comm over MPI: MPI_Finalize */
    /* MPI starts once per process: a later open says so. */
    comm *again = NULL;
    st_error err = {0};
    if (comm_open(&again, &err) != ST_EUNSUPPORTED || !strstr(err.msg, "finalized")) {
        fprintf(stderr, "rank %d: comm_open after MPI_Finalize: want ST_EUNSUPPORTED, got \"%s\"\n", R, err.msg);
        comm_close(again);
        g_teardown_failed = 1;   /* cmocka does not count a group teardown's failure */
    }
    return 0;
}


/* ---- inputs ---------------------------------------------------------------- */

/* Rank r's value of element i in case k: signs and exponents spread over
 * 2^-12 .. 2^12, so that sums in another order round differently. */
static float value(int r, size_t i, uint64_t k) {
    st_rng g;
    st_rng_seed(&g, (k * 1000003u + (uint64_t)r) * 2654435761u + i);
    float m = st_rng_uniform(&g) + 0.5f;
    int e = (int)(st_rng_next(&g) % 25) - 12;
    return (st_rng_next(&g) & 1 ? -1.0f : 1.0f) * ldexpf(m, e);
}

static int owner_of(size_t n, size_t i) {
    for (int p = 0; p < N; p++) {
        size_t lo, hi;
        comm_shard_range(n, N, p, &lo, &hi);
        if (i >= lo && i < hi) return p;
    }
    return -1;
}

/* The sizes every collective is tried on: zero, fewer elements than ranks,
 * sizes that do not divide by 2 or 3, and larger ones. */
static size_t sizes[16];
static int n_sizes;
static void make_sizes(void) {
    size_t s[] = {0, 1, (size_t)N - 1, (size_t)N, (size_t)N + 1, 2 * (size_t)N + 1, 7, 1000, 4099, 100003};
    n_sizes = 0;
    for (size_t k = 0; k < sizeof s / sizeof s[0]; k++) {
        int dup = 0;
        for (int j = 0; j < n_sizes; j++) dup |= sizes[j] == s[k];
        if (!dup) sizes[n_sizes++] = s[k];
    }
}

static void my_range(size_t n, size_t *lo, size_t *hi) { comm_shard_range(n, N, R, lo, hi); }

/* The counters this rank must have moved for one operation (strata/comm.h). */
typedef struct expect { uint64_t sent, recv, msent, mrecv; } expect;
static uint64_t msgs(size_t elems, size_t esize, size_t max_msg) {
    size_t k = max_msg / esize ? max_msg / esize : 1;
    return (elems + k - 1) / k;
}
static expect expect_allgather_shards(size_t n, size_t e, size_t max_msg) {
    size_t lo, hi;
    my_range(n, &lo, &hi);
    expect x = {(uint64_t)(N - 1) * (hi - lo) * e, (uint64_t)(n - (hi - lo)) * e, 0, 0};
    for (int p = 0; p < N; p++) {
        if (p == R) continue;
        size_t plo, phi;
        comm_shard_range(n, N, p, &plo, &phi);
        x.msent += msgs(hi - lo, e, max_msg);
        x.mrecv += msgs(phi - plo, e, max_msg);
    }
    return x;
}
static expect expect_reduce_scatter(size_t n, size_t max_msg) {
    expect a = expect_allgather_shards(n, 4, max_msg);   /* the same messages, the other way */
    expect x = {a.recv, a.sent, a.mrecv, a.msent};
    return x;
}
static expect add(expect a, expect b) {
    expect x = {a.sent + b.sent, a.recv + b.recv, a.msent + b.msent, a.mrecv + b.mrecv};
    return x;
}
static void check_counters(comm_counters before, expect want) {
    comm_counters now = comm_stats(C);
    assert_true(now.bytes_sent - before.bytes_sent == want.sent);
    assert_true(now.bytes_received - before.bytes_received == want.recv);
    assert_true(now.messages_sent - before.messages_sent == want.msent);
    assert_true(now.messages_received - before.messages_received == want.mrecv);
}

/* ---- references, computed locally in rank order ------------------------------- */

static float *whole_array(size_t n, uint64_t k) {   /* element i from its owner */
    float *a = malloc(n * sizeof *a + 4);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++) a[i] = value(owner_of(n, i), i, k);
    return a;
}

/* acc = x_0; acc += x_1; ... over [lo, hi) */
static float *rank_order_sum(size_t n, size_t lo, size_t hi, uint64_t k) {
    float *a = malloc((hi - lo) * sizeof *a + 4);
    assert_non_null(a);
    for (size_t i = lo; i < hi; i++) {
        float acc = value(0, i, k);
        for (int p = 1; p < N; p++) acc += value(p, i, k);
        a[i - lo] = acc;
    }
    return a;
}

/* x filled with this rank's own shard of case k and garbage elsewhere. */
static void fill_my_shard(float *x, size_t n, uint64_t k) {
    size_t lo, hi;
    my_range(n, &lo, &hi);
    for (size_t i = 0; i < n; i++) x[i] = i >= lo && i < hi ? value(R, i, k) : NAN;
}
static void fill_my_shard_bf16(st_bf16 *x, size_t n, uint64_t k) {
    size_t lo, hi;
    my_range(n, &lo, &hi);
    for (size_t i = 0; i < n; i++) x[i] = i >= lo && i < hi ? st_f32_to_bf16(value(R, i, k)) : 0xffff;
}
static void fill_mine(float *x, size_t n, uint64_t k) {
    for (size_t i = 0; i < n; i++) x[i] = value(R, i, k);
}

/* ---- tests ---------------------------------------------------------------------- */

static void test_ranks_and_bcast(void **state) {
    (void)state;
    const char *env = getenv("OMPI_COMM_WORLD_SIZE");
    if (env) assert_int_equal(N, atoi(env));
    assert_true(N >= 2);
    int *all = calloc((size_t)N, sizeof *all);
    assert_non_null(all);
    CHECK_OK(comm_allgather(C, &R, sizeof R, all, ERR));
    for (int p = 0; p < N; p++) assert_int_equal(all[p], p);
    all[R] = -1;
    CHECK_OK(comm_allgather(C, all + R, sizeof *all, all, ERR));   /* in place */
    for (int p = 0; p < N; p++) assert_int_equal(all[p], -1);
    free(all);

    for (int root = 0; root < N; root++) {
        char buf[40];
        memset(buf, 'x', sizeof buf);
        if (R == root) snprintf(buf, sizeof buf, "from rank %d", root);
        comm_counters before = comm_stats(C);
        CHECK_OK(comm_bcast(C, buf, sizeof buf, root, ERR));
        char want[40];
        memset(want, 'x', sizeof want);
        snprintf(want, sizeof want, "from rank %d", root);
        assert_memory_equal(buf, want, sizeof buf);
        expect e = R == root ? (expect){(uint64_t)(N - 1) * sizeof buf, 0, (uint64_t)N - 1, 0}
                             : (expect){0, sizeof buf, 0, 1};
        check_counters(before, e);
    }
    /* A second comm shares MPI and has its own messages: a collective on it
     * between two on C does not disturb C's. */
    comm *D;
    CHECK_OK(comm_open(&D, ERR));
    assert_int_equal(comm_is_mpi(D), 1);
    assert_int_equal(comm_rank(D), R);
    assert_int_equal(comm_size(D), N);
    int x = R * 10, y = R * 100;
    comm_request *qc;
    float f[1] = {0};
    CHECK_OK(comm_iallgather_shards_f32(C, f, 1, &qc, ERR));
    CHECK_OK(comm_bcast(D, &x, sizeof x, N - 1, ERR));
    CHECK_OK(comm_bcast(C, &y, sizeof y, 0, ERR));
    CHECK_OK(comm_wait(qc, ERR));
    assert_int_equal(x, (N - 1) * 10);
    assert_int_equal(y, 0);
    comm_close(D);

    st_error err = {0};
    char b = 0;
    assert_int_equal(comm_bcast(C, &b, 1, N, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "is not a rank"));
    comm_counters before = comm_stats(C);
    CHECK_OK(comm_barrier(C, ERR));
    check_counters(before, (expect){0, 0, 0, 0});
    PASSED();
}

static void test_allgather_shards(void **state) {
    (void)state;
    make_sizes();
    for (int s = 0; s < n_sizes; s++) {
        size_t n = sizes[s];
        uint64_t k = 100 + (uint64_t)s;
        float *want = whole_array(n, k);
        float *x = malloc(n * sizeof *x + 4);
        st_bf16 *h = malloc(n * sizeof *h + 2);
        assert_true(x && h);
        fill_my_shard(x, n, k);
        comm_counters before = comm_stats(C);
        CHECK_OK(comm_allgather_shards_f32(C, x, n, ERR));
        assert_memory_equal(x, want, n * sizeof *x);
        check_counters(before, expect_allgather_shards(n, 4, (size_t)1 << 30));

        fill_my_shard_bf16(h, n, k);
        before = comm_stats(C);
        CHECK_OK(comm_allgather_shards_bf16(C, h, n, ERR));
        for (size_t i = 0; i < n; i++) assert_int_equal(h[i], st_f32_to_bf16(want[i]));
        check_counters(before, expect_allgather_shards(n, 2, (size_t)1 << 30));
        free(x);
        free(h);
        free(want);
    }
    PASSED();
}

static void test_reduce_scatter(void **state) {
    (void)state;
    make_sizes();
    for (int s = 0; s < n_sizes; s++) {
        size_t n = sizes[s], lo, hi;
        uint64_t k = 200 + (uint64_t)s;
        my_range(n, &lo, &hi);
        float *want = rank_order_sum(n, lo, hi, k);
        float *x = malloc(n * sizeof *x + 4), *x0 = malloc(n * sizeof *x + 4);
        float *out = malloc((hi - lo) * sizeof *out + 4);
        size_t se = comm_reduce_scatter_scratch_elems(C, n);
        assert_true(se == (size_t)(N - 1) * (hi - lo));
        float *scratch = malloc(se * sizeof *scratch + 4);
        assert_true(x && x0 && out && scratch);
        fill_mine(x, n, k);
        memcpy(x0, x, n * sizeof *x);

        /* Into a separate out, the layer's scratch. */
        comm_counters before = comm_stats(C);
        CHECK_OK(comm_reduce_scatter_f32(C, x, n, out, NULL, ERR));
        assert_memory_equal(out, want, (hi - lo) * sizeof *out);
        assert_memory_equal(x, x0, n * sizeof *x);   /* x untouched */
        check_counters(before, expect_reduce_scatter(n, (size_t)1 << 30));

        /* In place, the caller's scratch: only x[lo, hi) changes. */
        CHECK_OK(comm_reduce_scatter_f32(C, x, n, x + lo, scratch, ERR));
        assert_memory_equal(x + lo, want, (hi - lo) * sizeof *x);
        assert_memory_equal(x, x0, lo * sizeof *x);
        assert_memory_equal(x + hi, x0 + hi, (n - hi) * sizeof *x);
        free(x);
        free(x0);
        free(out);
        free(scratch);
        free(want);
    }
    PASSED();
}

/* The reference is only worth something if order matters: with three or
 * more ranks, adding the same values in reverse rank order changes some
 * sums (with two, a + b = b + a in IEEE arithmetic). */
static void test_reference_depends_on_order(void **state) {
    (void)state;
    size_t n = 100003, differ = 0;
    for (size_t i = 0; i < n; i++) {
        float fwd = value(0, i, 7), rev = value(N - 1, i, 7);
        for (int p = 1; p < N; p++) fwd += value(p, i, 7);
        for (int p = N - 2; p >= 0; p--) rev += value(p, i, 7);
        differ += fwd != rev;
    }
    if (N >= 3) assert_true(differ > 0);
    PASSED();
}

static volatile double g_sink;
/* About `ms` milliseconds of arithmetic; with `poll`, comm_test on q now and then. */
static void compute(int ms, comm_request *q, int poll) {
    double t0 = st_now(), acc = 0;
    while (st_now() - t0 < ms * 1e-3) {
        for (int i = 0; i < 20000; i++) acc += sqrt((double)i + acc * 1e-9);
        if (poll) {
            int done;
            CHECK_OK(comm_test(q, &done, ERR));
        }
    }
    g_sink = acc;
}

static void test_nonblocking_with_compute_between(void **state) {
    (void)state;
    for (int poll = 0; poll <= 1; poll++) {
        size_t n = 100003 + (size_t)poll, lo, hi;
        uint64_t k = 300 + (uint64_t)poll;
        my_range(n, &lo, &hi);
        float *want_ag = whole_array(n, k);
        float *want_rs = rank_order_sum(n, lo, hi, k + 1);
        float *ag = malloc(n * sizeof *ag), *rs = malloc(n * sizeof *rs), *out = malloc((hi - lo) * 4 + 4);
        st_bf16 *h = malloc(n * sizeof *h);
        assert_true(ag && rs && out && h);
        fill_my_shard(ag, n, k);
        fill_my_shard_bf16(h, n, k);
        fill_mine(rs, n, k + 1);

        /* Three outstanding at once, waited in another order than started. */
        comm_counters before = comm_stats(C);
        comm_request *qa, *qh, *qr;
        CHECK_OK(comm_iallgather_shards_f32(C, ag, n, &qa, ERR));
        CHECK_OK(comm_ireduce_scatter_f32(C, rs, n, out, NULL, &qr, ERR));
        CHECK_OK(comm_iallgather_shards_bf16(C, h, n, &qh, ERR));
        compute(30, qa, poll);
        CHECK_OK(comm_wait(qr, ERR));
        assert_memory_equal(out, want_rs, (hi - lo) * sizeof *out);
        compute(10, qh, poll);
        CHECK_OK(comm_wait(qh, ERR));
        CHECK_OK(comm_wait(qa, ERR));
        assert_memory_equal(ag, want_ag, n * sizeof *ag);
        for (size_t i = 0; i < n; i++) assert_int_equal(h[i], st_f32_to_bf16(want_ag[i]));
        size_t m = (size_t)1 << 30;
        check_counters(before, add(add(expect_allgather_shards(n, 4, m), expect_allgather_shards(n, 2, m)),
                                   expect_reduce_scatter(n, m)));
        free(ag);
        free(rs);
        free(out);
        free(h);
        free(want_ag);
        free(want_rs);
    }
    PASSED();
}

/* A request waited for on another thread while this one starts and
 * completes the next operation (the layer serializes the MPI calls). */
typedef struct waiter { comm_request *q; st_status s; char msg[512]; } waiter;
static void *wait_thread(void *arg) {
    waiter *w = arg;
    st_error err = {0};
    w->s = comm_wait(w->q, &err);
    memcpy(w->msg, err.msg, sizeof w->msg);
    return NULL;
}

static void test_wait_on_another_thread(void **state) {
    (void)state;
    size_t n = 54321, lo, hi;
    my_range(n, &lo, &hi);
    float *rs = malloc(n * sizeof *rs), *ag = malloc(n * sizeof *ag);
    assert_true(rs && ag);
    float *want_rs = rank_order_sum(n, lo, hi, 400), *want_ag = whole_array(n, 401);
    for (int round = 0; round < 5; round++) {
        fill_mine(rs, n, 400);
        fill_my_shard(ag, n, 401);
        waiter w = {0};
        CHECK_OK(comm_ireduce_scatter_f32(C, rs, n, rs + lo, NULL, &w.q, ERR));
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, wait_thread, &w), 0);
        CHECK_OK(comm_allgather_shards_f32(C, ag, n, ERR));
        double d = R + 1;
        CHECK_OK(comm_allreduce_sum_f64(C, &d, 1, ERR));
        assert_true(d == N * (N + 1) / 2.0);
        pthread_join(t, NULL);
        if (w.s) fprintf(stderr, "rank %d: %s\n", R, w.msg);
        assert_int_equal(w.s, ST_OK);
        assert_memory_equal(rs + lo, want_rs, (hi - lo) * sizeof *rs);
        assert_memory_equal(ag, want_ag, n * sizeof *ag);
    }
    free(rs);
    free(ag);
    free(want_rs);
    free(want_ag);
    PASSED();
}

static double value_f64(int r, size_t i) {
    st_rng g;
    st_rng_seed(&g, 0x5eed0000u + (uint64_t)r * 7919u + i);
    return ((double)st_rng_uniform(&g) - 0.5) * ldexp(1.0, (int)(st_rng_next(&g) % 81) - 40);
}

static void test_allreduce_f64_rank_order_and_same_everywhere(void **state) {
    (void)state;
    size_t ns[] = {0, 1, 2, 3, 1000, 70001};
    for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
        size_t n = ns[s];
        double *x = malloc(n * sizeof *x + 8), *want = malloc(n * sizeof *x + 8);
        assert_true(x && want);
        for (size_t i = 0; i < n; i++) {
            x[i] = value_f64(R, i);
            double acc = value_f64(0, i);
            for (int p = 1; p < N; p++) acc += value_f64(p, i);
            want[i] = acc;
        }
        comm_counters before = comm_stats(C);
        CHECK_OK(comm_allreduce_sum_f64(C, x, n, ERR));
        assert_memory_equal(x, want, n * sizeof *x);
        uint64_t b = (uint64_t)(N - 1) * 8 * n, m = n ? (uint64_t)(N - 1) : 0;
        check_counters(before, (expect){b, b, m, m});

        /* The same bits on every rank: a checksum of the result, gathered. */
        uint64_t h = 1469598103934665603ull, *all = calloc((size_t)N, sizeof *all);
        assert_non_null(all);
        const unsigned char *p = (const unsigned char *)x;
        for (size_t i = 0; i < n * sizeof *x; i++) h = (h ^ p[i]) * 1099511628211ull;
        CHECK_OK(comm_allgather(C, &h, sizeof h, all, ERR));
        for (int q = 0; q < N; q++) assert_true(all[q] == all[0]);
        free(all);
        free(x);
        free(want);
    }
    PASSED();
}

/* Messages of at most 12 bytes: every piece split, results unchanged. */
static void test_small_messages(void **state) {
    (void)state;
    size_t m = 12;
    comm_set_max_message(C, m);
    size_t ns[] = {0, 1, (size_t)N + 1, 97};
    for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
        size_t n = ns[s], lo, hi;
        my_range(n, &lo, &hi);
        uint64_t k = 500 + s;
        float *want_ag = whole_array(n, k), *want_rs = rank_order_sum(n, lo, hi, k);
        float *x = malloc(n * sizeof *x + 4);
        st_bf16 *h = malloc(n * sizeof *h + 2);
        assert_true(x && h);
        comm_counters before = comm_stats(C);
        fill_my_shard(x, n, k);
        CHECK_OK(comm_allgather_shards_f32(C, x, n, ERR));
        assert_memory_equal(x, want_ag, n * sizeof *x);
        fill_my_shard_bf16(h, n, k);
        CHECK_OK(comm_allgather_shards_bf16(C, h, n, ERR));
        for (size_t i = 0; i < n; i++) assert_int_equal(h[i], st_f32_to_bf16(want_ag[i]));
        fill_mine(x, n, k);
        CHECK_OK(comm_reduce_scatter_f32(C, x, n, x + lo, NULL, ERR));
        assert_memory_equal(x + lo, want_rs, (hi - lo) * sizeof *x);
        check_counters(before, add(add(expect_allgather_shards(n, 4, m), expect_allgather_shards(n, 2, m)),
                                   expect_reduce_scatter(n, m)));

        char buf[29];
        memset(buf, R == 1 ? 'b' : '?', sizeof buf);
        before = comm_stats(C);
        CHECK_OK(comm_bcast(C, buf, sizeof buf, 1, ERR));
        for (size_t i = 0; i < sizeof buf; i++) assert_int_equal(buf[i], 'b');
        uint64_t per = (sizeof buf + m - 1) / m;   /* 3 messages of at most 12 bytes */
        check_counters(before, R == 1 ? (expect){(uint64_t)(N - 1) * sizeof buf, 0, (uint64_t)(N - 1) * per, 0}
                                      : (expect){0, sizeof buf, 0, per});
        free(x);
        free(h);
        free(want_ag);
        free(want_rs);
    }
    comm_set_max_message(C, (size_t)1 << 30);
    PASSED();
}

/* Over the job, every byte sent was received. */
static void test_counters_balance(void **state) {
    (void)state;
    comm_counters mine = comm_stats(C), *all = calloc((size_t)N, sizeof *all);
    assert_non_null(all);
    CHECK_OK(comm_allgather(C, &mine, sizeof mine, all, ERR));
    uint64_t sent = 0, recv = 0, ms = 0, mr = 0;
    for (int p = 0; p < N; p++) {
        sent += all[p].bytes_sent;
        recv += all[p].bytes_received;
        ms += all[p].messages_sent;
        mr += all[p].messages_received;
    }
    assert_true(sent == recv && ms == mr && sent > 0);
    free(all);
    PASSED();
}

/* An error is a value naming the rank, the operation and the peer: rank 0
 * breaks the contract by gathering 8 bytes while the others send 16, so
 * its receives are truncated; the others' succeed. */
static void test_error_names_rank_and_operation(void **state) {
    (void)state;
    size_t b = R == 0 ? 8 : 16;
    unsigned char mine[16], *all = malloc(16 * (size_t)N);
    assert_non_null(all);
    memset(mine, R, sizeof mine);
    st_error err = {0};
    st_status s = comm_allgather(C, mine, b, all, &err);
    if (R == 0) {
        assert_int_equal(s, ST_EIO);
        char want[64];
        snprintf(want, sizeof want, "comm: rank 0 of %d: allgather: MPI_Irecv from rank ", N);
        if (!strstr(err.msg, want)) fprintf(stderr, "rank 0: unexpected message: %s\n", err.msg);
        assert_non_null(strstr(err.msg, want));
        assert_non_null(strstr(err.msg, "TRUNCATE"));
    } else {
        if (s) fprintf(stderr, "rank %d: %s\n", R, err.msg);
        assert_int_equal(s, ST_OK);
    }
    free(all);
    CHECK_OK(comm_barrier(C, ERR));   /* the ranks are in step again */
    PASSED();
}

/* comm_barrier_idle waits for the last rank, asleep: rank 0 comes 0.4 s
 * late; the others return no sooner, having used a small share of that
 * time on their cores (a spinning wait would use all of it). */
static void test_idle_barrier_sleeps(void **state) {
    (void)state;
    const double late = 0.4;
    struct timespec cpu0, cpu1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
    const double t0 = st_now();
    if (R == 0) {
        const struct timespec nap = {0, (long)(late * 1e9)};
        nanosleep(&nap, NULL);
    }
    CHECK_OK(comm_barrier_idle(C, 0.01, ERR));
    const double waited = st_now() - t0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
    const double cpu = (double)(cpu1.tv_sec - cpu0.tv_sec) + 1e-9 * (double)(cpu1.tv_nsec - cpu0.tv_nsec);
    if (R != 0) {
        if (waited < 0.9 * late || cpu > 0.25 * late)
            fprintf(stderr, "rank %d: waited %.3f s, using %.3f s of CPU\n", R, waited, cpu);
        assert_true(waited >= 0.9 * late);
        assert_true(cpu <= 0.25 * late);
    }
    CHECK_OK(comm_barrier(C, ERR));
    PASSED();
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, test_setup, test_teardown)
    const struct CMUnitTest tests[] = {
        T(test_ranks_and_bcast),
        T(test_allgather_shards),
        T(test_reduce_scatter),
        T(test_reference_depends_on_order),
        T(test_nonblocking_with_compute_between),
        T(test_wait_on_another_thread),
        T(test_allreduce_f64_rank_order_and_same_everywhere),
        T(test_small_messages),
        T(test_counters_balance),
        T(test_error_names_rank_and_operation),
        T(test_idle_barrier_sleeps),
    };
    int failed = cmocka_run_group_tests(tests, group_setup, group_teardown);
    return failed ? failed : g_teardown_failed;
}
