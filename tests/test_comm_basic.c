/* test_comm_basic.c - the comm layer in a process that mpirun did not
 * start: one rank, no MPI, every collective the identity (or a copy), no
 * bytes counted; and comm_shard_range for many sizes and rank counts.
 * tests/mpi/mpi_comm_collectives.c runs the collectives on 2 and 3 ranks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

#include "strata/base.h"
#include "strata/comm.h"

static int no_mpirun_env(void **state) {
    (void)state;
    /* So the test means the same whatever environment ctest runs in. */
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMIX_RANK");
    return 0;
}

static void test_one_rank_without_mpi(void **state) {
    (void)state;
    st_error err = {0};
    comm *c;
    assert_int_equal(comm_open(&c, &err), ST_OK);
    assert_int_equal(comm_rank(c), 0);
    assert_int_equal(comm_size(c), 1);
    assert_int_equal(comm_is_mpi(c), 0);
    /* A second comm is independent (no MPI to share). */
    comm *d;
    assert_int_equal(comm_open(&d, &err), ST_OK);
    assert_int_equal(comm_size(d), 1);
    comm_close(d);
    comm_close(c);
    comm_close(NULL);
}

static void test_one_rank_collectives_are_local(void **state) {
    (void)state;
    st_error err = {0};
    comm *c;
    assert_int_equal(comm_open(&c, &err), ST_OK);
    assert_int_equal(comm_barrier(c, &err), ST_OK);
    assert_int_equal(comm_barrier_idle(c, 0.01, &err), ST_OK);

    char msg[6] = "hello";
    assert_int_equal(comm_bcast(c, msg, sizeof msg, 0, &err), ST_OK);
    assert_string_equal(msg, "hello");
    assert_int_equal(comm_bcast(c, msg, sizeof msg, 1, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "root 1"));
    assert_int_equal(comm_bcast(c, msg, sizeof msg, -1, &err), ST_EINVAL);

    uint64_t mine = 0x0123456789abcdefull, all = 0;
    assert_int_equal(comm_allgather(c, &mine, sizeof mine, &all, &err), ST_OK);
    assert_true(all == mine);
    assert_int_equal(comm_allgather(c, &all, sizeof all, &all, &err), ST_OK);   /* in place */
    assert_true(all == mine);

    double d[3] = {0.1, -2.5, 1e300};
    assert_int_equal(comm_allreduce_sum_f64(c, d, 3, &err), ST_OK);
    assert_true(d[0] == 0.1 && d[1] == -2.5 && d[2] == 1e300);
    assert_int_equal(comm_allreduce_sum_f64(c, NULL, 0, &err), ST_OK);

    enum { N = 37 };
    float x[N], out[N];
    st_bf16 h[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)i * 0.25f - 3.0f;
        h[i] = st_f32_to_bf16(x[i]);
    }
    assert_int_equal(comm_allgather_shards_f32(c, x, N, &err), ST_OK);
    assert_int_equal(comm_allgather_shards_bf16(c, h, N, &err), ST_OK);
    for (int i = 0; i < N; i++) {
        assert_true(x[i] == (float)i * 0.25f - 3.0f);
        assert_int_equal(h[i], st_f32_to_bf16(x[i]));
    }
    assert_int_equal(comm_reduce_scatter_scratch_elems(c, N), 0);
    memset(out, 0, sizeof out);
    assert_int_equal(comm_reduce_scatter_f32(c, x, N, out, NULL, &err), ST_OK);
    assert_memory_equal(out, x, sizeof x);
    assert_int_equal(comm_reduce_scatter_f32(c, x, N, x, NULL, &err), ST_OK);   /* in place */
    assert_memory_equal(out, x, sizeof x);
    assert_int_equal(comm_reduce_scatter_f32(c, NULL, 0, NULL, NULL, &err), ST_OK);

    /* Non-blocking: the request completes in comm_wait. */
    comm_request *a, *b;
    memset(out, 0, sizeof out);
    assert_int_equal(comm_iallgather_shards_f32(c, x, N, &a, &err), ST_OK);
    assert_int_equal(comm_ireduce_scatter_f32(c, x, N, out, NULL, &b, &err), ST_OK);
    int done = 0;
    assert_int_equal(comm_test(b, &done, &err), ST_OK);
    assert_int_equal(done, 1);
    assert_int_equal(comm_wait(b, &err), ST_OK);
    assert_int_equal(comm_wait(a, &err), ST_OK);
    assert_memory_equal(out, x, sizeof x);
    assert_int_equal(comm_wait(NULL, &err), ST_OK);

    comm_counters k = comm_stats(c);
    assert_true(k.bytes_sent == 0 && k.bytes_received == 0 && k.messages_sent == 0 && k.messages_received == 0);
    comm_close(c);
}

static void test_bad_arguments(void **state) {
    (void)state;
    st_error err = {0};
    assert_int_equal(comm_open(NULL, &err), ST_EINVAL);
    assert_int_equal(comm_barrier(NULL, &err), ST_EINVAL);
    assert_int_equal(comm_barrier_idle(NULL, 0.01, &err), ST_EINVAL);
    comm *c;
    assert_int_equal(comm_open(&c, &err), ST_OK);
    comm_request *q = (comm_request *)&err;
    assert_int_equal(comm_iallgather_shards_f32(c, NULL, 5, &q, &err), ST_EINVAL);
    assert_null(q);
    float x[4] = {0};
    assert_int_equal(comm_ireduce_scatter_f32(c, x, 4, NULL, NULL, &q, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "out is NULL"));
    comm_close(c);
}

/* Every element in exactly one shard, shards in rank order, sizes n / N or
 * n / N + 1 with the larger ones first. */
static void test_shard_ranges(void **state) {
    (void)state;
    static const size_t ns[] = {0, 1, 2, 3, 5, 7, 8, 31, 64, 100, 1000, 4097, 123457, (size_t)1 << 33,
                                ((size_t)1 << 33) + 5};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        size_t n = ns[k];
        for (int N = 1; N <= 70; N++) {
            size_t next = 0, min = (size_t)-1, max = 0;
            for (int r = 0; r < N; r++) {
                size_t lo, hi;
                comm_shard_range(n, N, r, &lo, &hi);
                assert_true(lo == next);   /* contiguous, in rank order, no gap or overlap */
                assert_true(hi >= lo);
                size_t c = hi - lo;
                assert_true(c == n / (size_t)N || c == n / (size_t)N + 1);
                assert_true(c == n / (size_t)N + ((size_t)r < n % (size_t)N));
                if (c < min) min = c;
                if (c > max) max = c;
                next = hi;
            }
            assert_true(next == n);   /* covers [0, n) */
            assert_true(max - min <= 1);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_rank_without_mpi),
        cmocka_unit_test(test_one_rank_collectives_are_local),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_shard_ranges),
    };
    return cmocka_run_group_tests(tests, no_mpirun_env, NULL);
}
