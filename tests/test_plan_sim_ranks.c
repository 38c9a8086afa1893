/* test_plan_sim_ranks.c - the simulator's CPU ranks (strata/sim.h, issue
 * 14): one rank is today's simulation exactly; a collective's time worked
 * out by hand over shared memory, the network and both; a gather started
 * ahead overlaps compute and one that cannot start ahead does not; a
 * reduce-scatter does not hold compute up, the step's end waits for it,
 * and a third one waits for a slot; the bytes per iteration are comm.h's
 * table; the description's cluster fields are read, written and checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "sim_testutil.h"
#include "strata/comm.h"

/* The simulator tests' machine, with a node's 4 cores for its ranks to share. */
static hw_desc machine(void) {
    hw_desc hw = cpu_machine(1);
    hw.cores = 4;
    return hw;
}

/* Two ranks on the node, shared memory slow enough to see and faster than
 * a forward, 0.1 ms a collective. */
static hw_desc slow_pair(void) {
    hw_desc hw = machine();
    hw.ranks_per_node = 2;
    hw.shm_gbps = 0.2;
    hw.shm_latency_s = 1e-4;
    return hw;
}

/* rank 0's shard of unit u over N ranks, in elements */
static size_t shard0(const sim_config *c, int u, int N) {
    size_t lo, hi;
    comm_shard_range(gpt_unit_numel(&c->model, u), N, 0, &lo, &hi);
    return hi - lo;
}

static void test_one_rank_is_today(void **state) {
    (void)state;
    hw_desc plain = machine(), cl = machine();
    cl.nodes = 1;
    cl.ranks_per_node = 2;
    cl.shm_gbps = 3;
    st_error err = {0};
    for (int sched = 0; sched < 2; sched++)
        for (int ssd = 0; ssd < 2; ssd++) {
            sim_config c = config("gpt2-tiny", 2, 64, 4);
            c.schedule = (sched_kind)sched;
            c.alpha = 0.25;
            c.clipping = 0;
            c.place.weights = c.place.optim = c.place.acts = ssd;
            sim_result a, b;
            assert_int_equal(sim_run(&plain, &c, &a, &err), ST_OK);
            c.ranks = 1;   /* one rank of a cluster description */
            assert_int_equal(sim_run(&cl, &c, &b, &err), ST_OK);
            assert_true(a.iter_s == b.iter_s && a.first_iter_s == b.first_iter_s && a.wait_s == b.wait_s);
            assert_int_equal(b.ranks, 1);
            assert_true(b.comm_sent == 0 && b.comm_received == 0);
            assert_true(a.total_read == b.total_read && a.total_written == b.total_written);
        }
}

/* LOAD u1, GATHER u1: the gather alone, then the step's sum of 2 doubles. */
static double gather_list_s(const hw_desc *hw, sim_config *c, sim_result *out) {
    sched_list l = {0};
    int ld = add(&l, TASK_LOAD_WEIGHTS, 1, -1, -1);
    add(&l, TASK_GATHER_WEIGHTS, 1, -1, ld);
    *out = run1(hw, c, &l);
    sched_list_free(&l);
    return out->iter_s;
}

static void test_gather_by_hand(void **state) {
    (void)state;
    sim_result r;
    sim_config c = config("gpt2-tiny", 1, 16, 1);
    const double n1 = (double)gpt_unit_numel(&c.model, 1);
    /* one node, 2 ranks: rank 0 copies rank 1's shard at half the node's shm rate */
    hw_desc hw = machine();
    hw.ranks_per_node = 2;
    hw.shm_gbps = 1;
    hw.shm_latency_s = 1e-3;
    c.ranks = 2;
    const double bw = 0.5e9, c1 = n1 - (double)shard0(&c, 1, 2);
    assert_close(gather_list_s(&hw, &c, &r), (1e-3 + c1 * 4 / bw) + (1e-3 + 16 / bw));
    assert_true(r.wait_on[SIM_INTERCONNECT] > 0.99 * r.iter_s);
    /* two nodes, a rank each: the larger of what it sends and receives, over the network */
    hw = machine();
    hw.nodes = 2;
    hw.network_gbps = 2;
    hw.network_latency_s = 2e-3;
    const double c0 = (double)shard0(&c, 1, 2);
    assert_close(gather_list_s(&hw, &c, &r), (2e-3 + c0 * 4 / 2e9) + (2e-3 + 16 / 2e9));
    /* two nodes of two: rank 1 over shared memory and ranks 2, 3 over the network, side by side */
    hw.ranks_per_node = 2;
    hw.shm_gbps = 1;
    c.ranks = 4;
    size_t lo, hi, peers = 0;
    for (int q = 2; q < 4; q++) comm_shard_range((size_t)n1, 4, q, &lo, &hi), peers += hi - lo;
    const size_t mine = shard0(&c, 1, 4);
    comm_shard_range((size_t)n1, 4, 1, &lo, &hi);
    const double shm = (double)(hi - lo) * 4 / 0.5e9;
    const double net = (double)(2 * mine > peers ? 2 * mine : peers) * 4 / 1e9;
    const double sum = 2e-3 + fmax(16 / 0.5e9, 32 / 1e9);
    assert_close(gather_list_s(&hw, &c, &r), 2e-3 + fmax(shm, net) + sum);
}

/* LOAD u1, GATHER u1, FWD u1, LOAD u2 (after FWD u1 when `late`), GATHER u2, FWD u2 */
static double two_units_s(const hw_desc *hw, sim_config *c, int late, sim_result *out) {
    sched_list l = {0};
    int ld = add(&l, TASK_LOAD_WEIGHTS, 1, -1, -1);
    int g = add(&l, TASK_GATHER_WEIGHTS, 1, -1, ld);
    int f = add(&l, TASK_BLOCK_FORWARD, 1, 0, g);
    ld = add(&l, TASK_LOAD_WEIGHTS, 2, -1, late ? f : -1);
    g = add(&l, TASK_GATHER_WEIGHTS, 2, -1, ld);
    add(&l, TASK_BLOCK_FORWARD, 2, 0, g);
    *out = run1(hw, c, &l);
    sched_list_free(&l);
    return out->iter_s;
}

static void test_gather_ahead_overlaps(void **state) {
    (void)state;
    sim_config c = config("gpt2-tiny", 8, 128, 1);
    c.ranks = 2;
    hw_desc hw = slow_pair();
    hw_desc rank;
    hw_rank_share(&hw, 2, &rank);
    const double bw = 0.1e9;
    const double g = 1e-4 + (double)(gpt_unit_numel(&c.model, 1) - shard0(&c, 1, 2)) * 4 / bw;
    sched_list l = {0};
    add(&l, TASK_BLOCK_FORWARD, 1, 0, -1);
    const double fwd = task_s(&rank, &c, &l, 0);
    sched_list_free(&l);
    assert_true(fwd > g);
    const double tail = 1e-4 + 16 / bw;
    sim_result a, b;
    /* ahead: u2's gather starts once u1's is done, beside u1's forward */
    assert_close(two_units_s(&hw, &c, 0, &a), g + fwd + fwd + tail);
    /* its load waits for u1's forward: the gather cannot start ahead */
    assert_close(two_units_s(&hw, &c, 1, &b), g + fwd + g + fwd + tail);
    assert_true(b.wait_on[SIM_INTERCONNECT] > a.wait_on[SIM_INTERCONNECT]);
}

static void test_reduce_scatter(void **state) {
    (void)state;
    sim_config c = config("gpt2-mini", 8, 128, 1);
    c.ranks = 2;
    hw_desc hw = slow_pair();
    hw_desc rank;
    hw_rank_share(&hw, 2, &rank);
    const double bw = 0.1e9, B = (double)shard0(&c, 1, 2) * 4;
    /* latency, then the sum (2 pieces read, 1 written), into the accumulator (read, written) and
       its squares (read again) */
    const double F = 1e-4 + 6 * B / (rank.other_gbps * 1e9);
    const double red = F + B / bw, tail = 1e-4 + 16 / bw;
    /* REDUCE u1 then a forward: compute does not wait for it; the step's end does */
    sched_list l = {0};
    add(&l, TASK_REDUCE_GRADS, 1, -1, -1);
    add(&l, TASK_BLOCK_FORWARD, 1, 0, -1);
    const double fwd = task_s(&rank, &c, &l, 1);
    sim_result r = run1(&hw, &c, &l);
    assert_close(r.iter_s, fmax(fwd, red) + tail);
    sched_list_free(&l);
    /* three in a row: the third waits for a slot (LAYOUT_REDUCE_SLOTS 2) */
    memset(&l, 0, sizeof l);
    for (int u = 1; u <= 3; u++) add(&l, TASK_REDUCE_GRADS, u, -1, -1);
    r = run1(&hw, &c, &l);
    assert_int_equal(LAYOUT_REDUCE_SLOTS, 2);
    /* the first two side by side (their latencies, then sharing the rate), the third alone */
    assert_true(gpt_unit_numel(&c.model, 1) == gpt_unit_numel(&c.model, 2));
    assert_close(r.iter_s, (F + 2 * B / bw) + (F + B / bw) + tail);
    sched_list_free(&l);
}

/* Bytes per iteration: strata/comm.h's table over the list's collectives and the step's sums. */
static void test_bytes_formula(void **state) {
    (void)state;
    st_error err = {0};
    const int Ns[3] = {2, 3, 4};
    for (int k = 0; k < 3; k++)
        for (int sched = 0; sched < 2; sched++)
            for (int clip = 0; clip < 2; clip++) {
                const int N = Ns[k];
                hw_desc hw = machine();
                hw.nodes = N == 4 ? 2 : 1;
                hw.ranks_per_node = N == 4 ? 2 : N;
                hw.shm_gbps = 5;
                hw.network_gbps = 10;
                sim_config c = config("gpt2-tiny", 1, 32, 2);
                c.precision = clip ? GPT_MIXED_BF16 : GPT_FP32;
                c.schedule = (sched_kind)sched;
                c.clipping = clip;
                c.alpha = clip ? 0 : 0.25;
                c.place.optim = 1;
                c.ranks = N;
                sim_result r;
                assert_int_equal(sim_run(&hw, &c, &r, &err), ST_OK);
                assert_int_equal(r.ranks, N);
                /* the steady list, as the simulator builds it */
                layout_params lp = sim_layout_params(&c);
                sched_params sp = layout_sched_params(&lp);
                sched_list l;
                assert_int_equal(sched_build(&sp, sched_defers(&sp), &l, &err), ST_OK);
                const uint64_t wsz = c.precision == GPT_MIXED_BF16 ? 2 : 4;
                uint64_t sent = 0, recv = 0;
                int gathers = 0, reduces = 0;
                for (int i = 0; i < l.n; i++) {
                    const sched_task *t = &l.tasks[i];
                    const uint64_t n = gpt_unit_numel(&c.model, t->unit >= 0 ? t->unit : 0), c0 = shard0(&c, t->unit >= 0 ? t->unit : 0, N);
                    if (t->op == TASK_GATHER_WEIGHTS) sent += (N - 1) * c0 * wsz, recv += (n - c0) * wsz, gathers++;
                    if (t->op == TASK_REDUCE_GRADS) sent += (n - c0) * 4, recv += (uint64_t)(N - 1) * c0 * 4, reduces++;
                    if (t->op == TASK_GRAD_NORM) sent += (N - 1) * 8, recv += (N - 1) * 8;
                }
                sent += (N - 1) * 16, recv += (N - 1) * 16;   /* loss and norm */
                /* vertical: each unit once; horizontal: once per micro-batch (ZeRO-Infinity's) */
                assert_int_equal(reduces, gpt_num_units(&c.model) * (sched == SCHED_HORIZONTAL ? c.micro_batches : 1));
                assert_true(gathers >= gpt_num_units(&c.model));
                assert_true(r.comm_sent == sent);
                assert_true(r.comm_received == recv);
                sched_list_free(&l);
            }
}

static void test_whole_runs(void **state) {
    (void)state;
    st_error err = {0};
    hw_desc hw = machine();
    hw.ranks_per_node = 2;
    hw.shm_gbps = 2;
    for (int sched = 0; sched < 2; sched++)
        for (int ssd = 0; ssd < 2; ssd++) {
            sim_config c = config("gpt2-tiny", 2, 64, 2);
            c.schedule = (sched_kind)sched;
            c.place.weights = c.place.optim = c.place.acts = ssd;
            sim_result r, one;
            assert_int_equal(sim_run(&hw, &c, &r, &err), ST_OK);   /* the description's 2 ranks */
            assert_int_equal(r.ranks, 2);
            assert_int_equal(r.ranks_per_node, 2);
            assert_true(r.iter_s > 0 && r.interconnect_busy > 0 && r.comm_sent > 0);
            c.ranks = 1;
            assert_int_equal(sim_run(&hw, &c, &one, &err), ST_OK);
            /* each rank's micro-batches at half the node's rates: twice one process's time for them, but for
               the gradient's sum of squares, which a rank takes of its shard as its reduce-scatter ends, and
               (horizontal) a fresh gradient buffer zeroed for every micro-batch after the first */
            double n = 0;
            for (int u = 0; u < gpt_num_units(&c.model); u++) n += (double)gpt_unit_numel(&c.model, u);
            const double squares = 4 * n / (hw.other_gbps * 1e9);
            const double zeroed = sched == SCHED_HORIZONTAL ? (c.micro_batches - 1) * squares : 0;
            assert_true(fabs(r.work_compute_s - 2 * (one.work_compute_s - squares + zeroed)) <= 1e-9 * one.work_compute_s);
            if (ssd) assert_true(r.total_read < one.total_read);   /* each rank reads its shard of the weights */
            sim_roofline rf;
            c.ranks = 0;
            assert_int_equal(sim_roofline_bound(&hw, &c, &rf, &err), ST_OK);
            assert_true(rf.interconnect_s > 0 && rf.bound_s <= r.iter_s * 1.0001);
        }
    /* gradients on the SSD: each rank parks its shard of the sums (vertical: the deferred share;
       horizontal: between micro-batches) */
    sim_config c = config("gpt2-tiny", 2, 64, 2);
    c.alpha = 0.25;
    sim_result r, in_memory;
    for (int sched = 0; sched < 2; sched++) {
        c.schedule = (sched_kind)sched;
        c.place.grads = 0;
        assert_int_equal(sim_run(&hw, &c, &in_memory, &err), ST_OK);
        c.place.grads = 1;
        assert_int_equal(sim_run(&hw, &c, &r, &err), ST_OK);
        assert_true(r.total_written > in_memory.total_written && r.total_read > in_memory.total_read);
    }
    /* ranks that do not fit the nodes are refused */
    hw.nodes = 2;
    hw.network_gbps = 1;
    c.place.grads = 0;
    c.ranks = 3;
    assert_int_equal(sim_run(&hw, &c, &r, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "3 ranks on the description's 2 nodes"));
    hw.nodes = 1;
    hw.ranks_per_node = 1;
    hw.shm_gbps = 0;
    c.ranks = 2;
    assert_int_equal(sim_run(&hw, &c, &r, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "cluster.shm_gbps"));
}

static void parse_fails(const char *text, const char *want) {
    hw_desc hw;
    st_error err = {0};
    assert_int_equal(hw_parse_json(text, strlen(text), "hw.json", &hw, &err), ST_EINVAL);
    if (!strstr(err.msg, want)) fprintf(stderr, "got: %s\nwant: %s\n", err.msg, want);
    assert_non_null(strstr(err.msg, want));
}

#define DESC(backend, link, extra)                                                                                  \
    "{\"name\": \"x\", \"compute\": {\"backend\": \"" backend "\", \"matmul_gflops\": 10, \"other_gbps\": 5, "        \
    "\"cores\": 2}, " link "\"ssd\": [], \"optimizer\": {\"adamw_params_per_s_per_thread\": 1e8}, "                   \
    "\"memory\": {\"device_bytes\": 1000, \"host_bytes\": 1000}" extra "}"
#define CPU(extra) DESC("cpu", "", extra)
#define GPU(extra) DESC("gpu", "\"host_device_gbps\": 10, ", extra)

static void test_description(void **state) {
    (void)state;
    const char *ok = CPU(", \"cluster\": {\"nodes\": 8, \"ranks_per_node\": 2, \"shm_gbps\": 20, "
                                 "\"network_gbps\": 12.5, \"network_latency_s\": 5e-6}");
    hw_desc hw, back;
    st_error err = {0};
    assert_int_equal(hw_parse_json(ok, strlen(ok), "hw.json", &hw, &err), ST_OK);
    assert_int_equal(hw.nodes, 8);
    assert_int_equal(hw.ranks_per_node, 2);
    assert_int_equal(hw_ranks(&hw), 16);
    assert_true(hw.shm_gbps == 20 && hw.network_gbps == 12.5 && hw.network_latency_s == 5e-6 && hw.shm_latency_s == 0);
    char *text = hw_to_json(&hw);
    assert_int_equal(hw_parse_json(text, strlen(text), "again", &back, &err), ST_OK);
    assert_true(back.nodes == 8 && back.ranks_per_node == 2 && back.shm_gbps == 20 && back.network_gbps == 12.5);
    free(text);
    /* without a cluster: none written, one rank */
    const char *plain = CPU("");
    assert_int_equal(hw_parse_json(plain, strlen(plain), "hw.json", &hw, &err), ST_OK);
    assert_int_equal(hw_ranks(&hw), 1);
    text = hw_to_json(&hw);
    assert_null(strstr(text, "cluster"));
    free(text);
    parse_fails(CPU(", \"cluster\": {\"nodes\": 0}"), "hw.json: cluster.nodes: must be >= 1");
    parse_fails(CPU(", \"cluster\": {\"ranks_per_node\": 2}"),
                "hw.json: cluster.shm_gbps: must be > 0 with more than one rank per node");
    parse_fails(CPU(", \"cluster\": {\"nodes\": 2}"),
                "hw.json: cluster.network_gbps: must be > 0 with more than one node");
    parse_fails(CPU(", \"cluster\": {\"nodes\": 2, \"network_gbps\": -1}"), "cluster.network_gbps: must be >= 0");
    parse_fails(CPU(", \"cluster\": {\"network_gbs\": 1}"), "hw.json: cluster.network_gbs: unknown field");
    parse_fails(CPU(", \"cluster\": {\"nodes\": 1.5}"), "cluster.nodes: must be a whole number");
    parse_fails(GPU(", \"cluster\": {\"nodes\": 2, \"network_gbps\": 1}"),
                "hw.json: cluster: ranks are modelled on a cpu backend");
    /* a rank's share of its node */
    hw_desc node = machine(), share;
    node.ranks_per_node = 4;
    node.shm_gbps = 1;
    hw_rank_share(&node, 4, &share);
    assert_true(share.matmul_gflops == 25 && share.other_gbps == 2.5 && share.ssd[0].read_gbps == 0.25);
    assert_true(share.adamw_params_per_s == node.adamw_params_per_s);   /* 4 workers on 4 cores */
    node.cores = 2;
    hw_rank_share(&node, 4, &share);
    assert_true(share.adamw_params_per_s == node.adamw_params_per_s / 2);
    hw_rank_share(&node, 1, &share);
    assert_memory_equal(&share, &node, sizeof node);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_rank_is_today),   cmocka_unit_test(test_gather_by_hand),
        cmocka_unit_test(test_gather_ahead_overlaps), cmocka_unit_test(test_reduce_scatter),
        cmocka_unit_test(test_bytes_formula),       cmocka_unit_test(test_whole_runs),
        cmocka_unit_test(test_description),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
