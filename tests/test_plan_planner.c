/* test_plan_planner.c - the planner: its best candidate is the fastest of
 * every configuration that fits (checked by simulating them all), it keeps
 * state in memory when memory allows and moves it to the SSD when budgets
 * demand, it prefers the vertical schedule where horizontal is I/O-bound,
 * and a request nothing fits, or a malformed one, is refused with what is
 * wrong; the search on several threads finds what it finds on one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include <omp.h>

#include "strata/planner.h"

/* A CPU machine with round numbers and one slow SSD path. */
static hw_desc machine(void) {
    hw_desc hw;
    memset(&hw, 0, sizeof hw);
    snprintf(hw.name, sizeof hw.name, "test");
    hw.backend = HW_BACKEND_CPU;
    hw.matmul_gflops = 100;
    hw.other_gbps = 10;
    hw.cores = 2;
    hw.n_ssd = 1;
    hw.ssd[0] = (hw_ssd){.read_gbps = 0.5, .write_gbps = 1.0, .mixed_read_gbps = 0.3, .mixed_write_gbps = 0.5};
    hw.adamw_params_per_s = 5e8;
    hw.adamw_threads = 1;
    hw.compute_slowdown = 1.5;
    hw.optimizer_slowdown = 2.0;
    hw.device_bytes = hw.host_bytes = 16ull << 30;
    hw.devices_per_node = 1;
    return hw;
}

static plan_request request(const char *model, int T, int global) {
    plan_request q = plan_default_request();
    st_error err = {0};
    assert_int_equal(gpt_config_from_name(&q.model, model, &err), ST_OK);
    q.T = T;
    q.global_batch = global;
    q.max_micro_batches = 8;
    return q;
}

static int on_ssd(const sim_config *c) { return placement_any_ssd(c->place); }

/* The best is the fastest fitting candidate of the whole space (more
 * gradient buffers tried for every placement, though the planner tries
 * them only where gradients are on the SSD and steps stream state). */
static void test_best_is_fastest(void **state) {
    (void)state;
    hw_desc hw = machine();
    plan_request q = request("gpt2-124m", 32, 4);
    q.mem_host = 1ull << 30;   /* 124M parameters: the in-memory placement does not fit */
    q.max_micro_batches = 4;
    q.n_best = 3;
    plan_result r;
    st_error err = {0};
    assert_int_equal(plan_search(&hw, &q, &r, &err), ST_OK);
    assert_int_equal(r.n_best, 3);
    for (int i = 1; i < r.n_best; i++) assert_true(r.best[i - 1].result.iter_s <= r.best[i].result.iter_s);
    assert_true(r.simulated < r.considered);   /* the pruning did something */
    double fastest = 1e30;
    for (int k = 0; k < 2; k++)
        for (int M = 1; M <= 4; M *= 2)
            for (int p = 0; p < 16; p++) {
                sim_config c = sim_default_config();
                c.model = q.model, c.B = 4 / M, c.T = 32, c.micro_batches = M, c.schedule = (sched_kind)k, c.clipping = 1;
                c.place = placement_at(p);
                for (int a = 0; a < 8; a++) {
                    c.alpha = a % 4 == 3 ? 1.0 : a % 4 * 0.25;   /* 0, 0.25, 0.5, 1 */
                    c.grad_buffers = a < 4 ? 0 : LAYOUT_GRAD_BLOCK_BUFFERS_MORE;   /* every placement: more too */
                    offload_config oc = sim_offload_config(&c);
                    layout_memory m;
                    offload_memory_need(&oc, &m);
                    if (m.host > q.mem_host || m.device > hw.device_bytes) continue;
                    sim_result sr;
                    assert_int_equal(sim_run(&hw, &c, &sr, &err), ST_OK);
                    if (sr.iter_s < fastest) fastest = sr.iter_s;
                }
            }
    printf("  best %.4f s (%d block gradient buffers), fastest of all fitting %.4f s; %d considered, %d simulated\n",
           r.best[0].result.iter_s, layout_grad_buffers(r.best[0].config.grad_buffers), fastest, r.considered,
           r.simulated);
    assert_true(r.best[0].result.iter_s <= fastest * (1 + 1e-12));
    offload_config oc = sim_offload_config(&r.best[0].config);
    layout_memory m;
    offload_memory_need(&oc, &m);
    assert_true(m.host <= q.mem_host);
}

/* A host budget between the whole placements: the planner keeps part of a
 * kind in memory (a fraction), which the simulator predicts faster than
 * the fastest whole placement that fits; the choice fits the budget, and
 * one more unit of the split kind in memory would not. */
static void test_fractions_fill_the_budget(void **state) {
    (void)state;
    hw_desc hw = machine();
    plan_request q = request("gpt2-124m", 32, 4);
    q.mem_host = 1536ull << 20;   /* the whole state needs about 2.3 GB */
    q.max_micro_batches = 4;
    q.clipping = 0;
    plan_result r;
    st_error err = {0};
    assert_int_equal(plan_search(&hw, &q, &r, &err), ST_OK);
    const sim_config *b = &r.best[0].config;
    int split = -1;
    for (int k = 0; k < PLACE_KINDS; k++) {
        const double share = placement_share(b->place, (place_kind)k);
        if (share > 0 && share < 1) split = k;
    }
    assert_true(split >= 0);
    assert_true(r.best[0].result.memory.host <= q.mem_host);
    sim_config more = *b;   /* one more unit of the split kind in memory */
    const int n = q.model.n_layer + 1;
    placement_set_share(&more.place, (place_kind)split,
                        (double)(placement_units(b->place, (place_kind)split, n) - 1) / n);
    layout_memory m;
    int fits_device, fits_host;
    sim_memory_need(&hw, &more, &m, &fits_device, &fits_host);
    assert_true(m.host > q.mem_host);
    double fastest_whole = 1e30;
    for (int k = 0; k < 2; k++)
        for (int M = 1; M <= 4; M *= 2)
            for (int p = 0; p < PLACEMENT_COUNT; p++)
                for (int a = 0; a < 4; a++) {
                    sim_config c = *b;
                    c.B = 4 / M, c.micro_batches = M, c.schedule = (sched_kind)k, c.place = placement_at(p);
                    c.alpha = a == 3 ? 1.0 : a * 0.25;
                    sim_memory_need(&hw, &c, &m, &fits_device, &fits_host);
                    if (m.host > q.mem_host || m.device > hw.device_bytes) continue;
                    sim_result sr;
                    assert_int_equal(sim_run(&hw, &c, &sr, &err), ST_OK);
                    if (sr.iter_s < fastest_whole) fastest_whole = sr.iter_s;
                }
    char name[128];
    printf("  best %s: %.4f s; the fastest whole placement that fits: %.4f s\n", placement_name(b->place, name, sizeof name),
           r.best[0].result.iter_s, fastest_whole);
    assert_true(r.best[0].result.iter_s < fastest_whole);
    assert_true(r.has_runner_up);
    assert_true(memcmp(&r.runner_up.config.place, &b->place, sizeof(placement)) != 0);
    assert_true(r.runner_up.result.iter_s >= r.best[0].result.iter_s);
}

/* More block gradient buffers are chosen where the simulator predicts them
 * faster: over a sweep of host budgets at one micro-batch (slow optimizer
 * steps streaming state, the backward held back by the buffers they hold)
 * some best has six; every such best has gradients on the SSD and steps
 * that stream, and with three it predicts slower. */
static void test_more_gradient_buffers_where_they_help(void **state) {
    (void)state;
    hw_desc hw = machine();
    int chosen = 0;
    for (uint64_t mib = 256; mib <= 2048; mib += 128) {
        plan_request q = request("gpt2-124m", 32, 1);
        q.mem_host = mib << 20;
        q.clipping = 0;
        q.n_best = 1;
        plan_result r;
        st_error err = {0};
        if (plan_search(&hw, &q, &r, &err) != ST_OK) continue;   /* nothing fits the smallest */
        const sim_config *b = &r.best[0].config;
        if (layout_grad_buffers(b->grad_buffers) == LAYOUT_GRAD_BLOCK_BUFFERS) continue;
        chosen++;
        assert_int_equal(b->grad_buffers, LAYOUT_GRAD_BLOCK_BUFFERS_MORE);
        assert_true(b->place.grads > 0 && (b->place.optim > 0 || b->place.weights > 0));
        sim_config fewer = *b;
        fewer.grad_buffers = 0;
        sim_result sr;
        assert_int_equal(sim_run(&hw, &fewer, &sr, &err), ST_OK);
        char name[128];
        printf("  %4llu MiB: %s, six buffers %.4f s, three %.4f s\n", (unsigned long long)mib,
               placement_name(b->place, name, sizeof name), r.best[0].result.iter_s, sr.iter_s);
        assert_true(sr.iter_s > r.best[0].result.iter_s);
    }
    assert_true(chosen > 0);
}

/* Room in memory: nothing goes to the SSD. A tight host budget: state moves
 * there, and the choice fits it. */
static void test_placement_follows_the_budget(void **state) {
    (void)state;
    hw_desc hw = machine();
    plan_request q = request("gpt2-124m", 32, 4);
    q.max_micro_batches = 4;
    plan_result r;
    st_error err = {0};
    assert_int_equal(plan_search(&hw, &q, &r, &err), ST_OK);
    assert_int_equal(on_ssd(&r.best[0].config), 0);
    assert_int_equal(r.best[0].result.total_read + r.best[0].result.total_written, 0);
    q.mem_host = 1ull << 30;
    assert_int_equal(plan_search(&hw, &q, &r, &err), ST_OK);
    assert_true(on_ssd(&r.best[0].config) > 0);
    assert_true(r.best[0].result.memory.host <= q.mem_host);
}

/* Slow SSD and a budget that sends the state there: horizontal reads the
 * weights 2M times, moves the gradients every micro-batch and steps only
 * after backward, so the planner's best is vertical, faster than the best
 * horizontal candidate. */
static void test_vertical_wins_when_io_bound(void **state) {
    (void)state;
    hw_desc hw = machine();
    plan_request q = request("gpt2-124m", 32, 8);
    q.clipping = 0;
    q.mem_host = 512ull << 20;
    q.max_micro_batches = 8;
    plan_result r;
    st_error err = {0};
    q.schedule = SCHED_HORIZONTAL;
    assert_int_equal(plan_search(&hw, &q, &r, &err), ST_OK);
    const double horizontal = r.best[0].result.iter_s;
    q.schedule = -1;
    assert_int_equal(plan_search(&hw, &q, &r, &err), ST_OK);
    printf("  best: %s, %d x %d, %.3f s (best horizontal %.3f s)\n",
           r.best[0].config.schedule == SCHED_VERTICAL ? "vertical" : "horizontal", r.best[0].config.B,
           r.best[0].config.micro_batches, r.best[0].result.iter_s, horizontal);
    assert_int_equal(r.best[0].config.schedule, SCHED_VERTICAL);
    assert_true(r.best[0].result.iter_s < horizontal);
}

/* The progress callback: called once per candidate, one call at a time,
 * done counting up to total. */
typedef struct progress_seen {
    int calls, last_done, total, in_call, overlapped;
} progress_seen;

static void on_progress(void *ctx, int done, int total) {
    progress_seen *p = ctx;
    if (p->in_call++) p->overlapped = 1;
    p->calls++;
    if (done != p->last_done + 1) p->overlapped = 1;
    p->last_done = done, p->total = total;
    p->in_call--;
}

/* The candidates are simulated on all the cores and ranked in the search's
 * order: the result is the one a single thread gets, to the byte; the
 * progress callback hears of each. */
static void test_threads_change_nothing(void **state) {
    (void)state;
    hw_desc hw = machine();
    plan_request q = request("gpt2-124m", 32, 4);
    q.mem_host = 1536ull << 20;   /* fractions: many fills, so the threads share real work */
    q.max_micro_batches = 4;
    q.clipping = 0;
    plan_result one, many;
    st_error err = {0};
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    assert_int_equal(plan_search(&hw, &q, &one, &err), ST_OK);
    omp_set_num_threads(4);   /* more than this machine's cores: the order the threads finish in varies */
    progress_seen seen = {0};
    q.progress = on_progress, q.progress_ctx = &seen;
    assert_int_equal(plan_search(&hw, &q, &many, &err), ST_OK);
    omp_set_num_threads(threads);
    assert_int_equal(seen.calls, many.simulated);
    assert_int_equal(seen.total, many.simulated);
    assert_int_equal(seen.last_done, many.simulated);
    assert_false(seen.overlapped);
    assert_true(one.simulated > 20);
    assert_int_equal(one.simulated, many.simulated);
    assert_int_equal(one.considered, many.considered);
    assert_int_equal(one.n_best, many.n_best);
    assert_memory_equal(one.best, many.best, sizeof one.best[0] * (size_t)one.n_best);
    assert_int_equal(one.has_runner_up, many.has_runner_up);
    if (one.has_runner_up) assert_memory_equal(&one.runner_up, &many.runner_up, sizeof one.runner_up);
}

static void test_refusals(void **state) {
    (void)state;
    hw_desc hw = machine();
    plan_result r;
    st_error err = {0};
    plan_request q = request("gpt2-124m", 64, 4);
    q.mem_host = 1 << 20;
    assert_int_equal(plan_search(&hw, &q, &r, &err), ST_ENOMEM);
    assert_non_null(strstr(err.msg, "smallest host share"));
    q = request("gpt2-tiny", 64, 4);
    q.T = 5000;
    assert_int_equal(plan_search(&hw, &q, &r, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "sequence length"));
    q = request("gpt2-tiny", 64, 0);
    assert_int_equal(plan_search(&hw, &q, &r, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "global batch"));
    q = request("gpt2-tiny", 64, 4);
    q.n_best = PLAN_MAX_BEST + 1;
    assert_int_equal(plan_search(&hw, &q, &r, &err), ST_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_best_is_fastest),
        cmocka_unit_test(test_more_gradient_buffers_where_they_help),
        cmocka_unit_test(test_placement_follows_the_budget),
        cmocka_unit_test(test_fractions_fill_the_budget),
        cmocka_unit_test(test_vertical_wins_when_io_bound),
        cmocka_unit_test(test_threads_change_nothing),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
