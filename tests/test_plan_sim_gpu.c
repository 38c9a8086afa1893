/* test_plan_sim_gpu.c - the simulator's GPU backend and data parallelism
 * (strata/sim.h) against cases worked out by hand: a unit's gradients leave
 * the device when the next gradient task is another unit's, reduce-scattered
 * over the interconnect while each device sends its shard over its own
 * link, and the unit's optimizer job waits for them; a weight load moves
 * the device's shard over the link and all-gathers the rest (together: the
 * 2 (n - 1) / n of a ring all-reduce); the reduction overlaps compute; one
 * device is exactly the single-GPU model whatever the interconnect; the SSD
 * carries the sharded state once and every device's checkpoints; per-device
 * throughput falls when the interconnect or the host link is slow; with
 * the gradients on the SSD the backward waits for the executor's host
 * gradient buffers as on a CPU; the device's memory is the working set;
 * bad input is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "strata/sim.h"
#include "sim_testutil.h"

/* A GPU node with round numbers: n devices, one SSD path. */
static hw_desc gpu(int n) {
    hw_desc hw;
    memset(&hw, 0, sizeof hw);
    snprintf(hw.name, sizeof hw.name, "test-gpu");
    hw.backend = HW_BACKEND_GPU;
    hw.matmul_gflops = 1000;
    hw.head_matmul_gflops = 800;
    hw.attention_gflops = 200;
    hw.other_gbps = 100;
    hw.cores = 100;
    hw.host_device_gbps = 10;
    hw.n_ssd = 1;
    hw.ssd[0] = (hw_ssd){.read_gbps = 2.0, .write_gbps = 1.0, .mixed_read_gbps = 1.0, .mixed_write_gbps = 0.5};
    hw.adamw_params_per_s = 5e8;
    hw.adamw_threads = 1;
    hw.compute_slowdown = hw.optimizer_slowdown = 1.0;
    hw.device_bytes = hw.host_bytes = 64ull << 30;
    hw.devices_per_node = n;
    hw.interconnect_gbps = n > 1 ? 100 : 0;
    return hw;
}

static sim_result run(const hw_desc *hw, const sim_config *c) {
    sim_result r;
    st_error err = {0};
    st_status s = sim_run(hw, c, &r, &err);
    if (s != ST_OK) fprintf(stderr, "sim: %s\n", err.msg);
    assert_int_equal(s, ST_OK);
    return r;
}

/* backward of unit 1, its optimizer step, its next weight load: the step
 * waits for the gradients to reach the host (reduce-scatter over the
 * interconnect beside the shard's trip over the link), the load for the
 * step, and then moves the shard over the link beside the all-gather. */
static void test_reduction_time_by_hand(void **state) {
    (void)state;
    sim_config c = config("gpt2-tiny", 2, 32, 1);
    sched_list l = {0};
    add(&l, TASK_BLOCK_BACKWARD, 1, 0, -1);
    add(&l, TASK_OPTIMIZE, 1, -1, 0);
    add(&l, TASK_LOAD_WEIGHTS, 1, -1, 1);
    const double n_el = (double)gpt_unit_numel(&c.model, 1), G = 4 * n_el, W = 4 * n_el;   /* fp32 */
    const double A = 5e8;
    for (int n = 1; n <= 8; n *= 2) {
        hw_desc hw = gpu(n);
        hw.host_device_gbps = 1000;   /* the interconnect is the slower part */
        const double b = task_s(&hw, &c, &l, 0), IC = 100e9, LINK = 1000e9;
        const double rs = (n - 1.0) / n * G / IC, ag = (n - 1.0) / n * W / IC;
        const double link_g = ceil(G / n) / LINK, link_w = ceil(W / n) / LINK;
        sim_result r = run1(&hw, &c, &l);
        assert_int_equal(r.devices, n);
        assert_close(r.iter_s, b + fmax(rs, link_g) + n_el / A + fmax(ag, link_w));
        assert_close(r.interconnect_bytes, (n - 1.0) / n * (G + W));
        assert_true(r.link_from_device == (uint64_t)ceil(G / n) && r.link_to_device == (uint64_t)ceil(W / n));
        if (n > 1) {
            /* the gradients' all-reduce, in its two halves: ring 2 (n - 1) / n x bytes / bandwidth */
            assert_close(rs + ag, 2.0 * (n - 1) / n * G / IC);
            assert_close(r.wait_on[SIM_INTERCONNECT], rs + ag);
            assert_close(r.wait_on[SIM_OPTIMIZER], n_el / A);
        } else {
            assert_true(r.interconnect_bytes == 0 && r.wait_on[SIM_INTERCONNECT] == 0);
            assert_close(r.iter_s, b + G / LINK + n_el / A + W / LINK);
        }
    }
    sched_list_free(&l);
}

/* Gradients leave behind compute: unit 2's reduction runs beside unit 1's
 * backward, and holds nothing up even when it outlasts it. */
static void test_reduction_overlaps_compute(void **state) {
    (void)state;
    sim_config c = config("gpt2-tiny", 2, 32, 1);
    sched_list l = {0};
    add(&l, TASK_BLOCK_BACKWARD, 2, 0, -1);
    add(&l, TASK_BLOCK_BACKWARD, 1, 0, 0);
    hw_desc hw = gpu(4);
    const double b = task_s(&hw, &c, &l, 0), G = 4.0 * (double)gpt_unit_numel(&c.model, 2);
    assert_true(0.75 * G / 100e9 < b && G / 4 / 10e9 < b);
    sim_result r = run1(&hw, &c, &l);
    assert_close(r.iter_s, 2 * b);
    assert_close(r.compute_busy, 1.0);
    assert_close(r.interconnect_busy, 0.75 * G / 100e9 / r.iter_s);   /* unit 2's, within the iteration */
    hw.interconnect_gbps = 1e-3;   /* far slower than the compute: still not waited for */
    r = run1(&hw, &c, &l);
    assert_close(r.iter_s, 2 * b);
    assert_true(r.wait_s == 0);
    sched_list_free(&l);
}

/* A weight load of a data-parallel run: the unit read once from the node's
 * SSD, the device's shard over its link, the rest all-gathered, all at once. */
static void test_weight_load_all_gathers(void **state) {
    (void)state;
    sim_config c = config("gpt2-tiny", 2, 32, 1);
    c.place.weights = 1;
    sched_list l = {0};
    add(&l, TASK_LOAD_WEIGHTS, 1, -1, -1);
    const double W = 4.0 * (double)gpt_unit_numel(&c.model, 1), ssd = (double)store_padded_bytes((uint64_t)W);
    hw_desc hw = gpu(4);
    sim_result r = run1(&hw, &c, &l);
    assert_close(r.iter_s, fmax(ssd / 2e9, fmax(ceil(W / 4) / 10e9, 0.75 * W / 100e9)));
    assert_true(r.bytes_read[STORE_WEIGHTS] == (uint64_t)ssd);
    hw.ssd[0].read_gbps = 1000;   /* now the all-gather is the slowest part */
    hw.interconnect_gbps = 1;
    r = run1(&hw, &c, &l);
    assert_close(r.iter_s, 0.75 * W / 1e9);
    assert_int_equal(r.bottleneck, SIM_INTERCONNECT);
    sched_list_free(&l);
}

/* With one device the interconnect plays no part: the same result bit for
 * bit whatever it is, and whether the device count comes from the
 * description or from the configuration. */
static void test_one_device_unchanged(void **state) {
    (void)state;
    sim_config c = config("gpt2-mini", 2, 64, 3);
    c.precision = GPT_MIXED_BF16;
    c.place.weights = c.place.optim = c.place.acts = 1;
    c.alpha = 0.25;
    for (int k = 0; k < 2; k++) {
        c.schedule = k ? SCHED_HORIZONTAL : SCHED_VERTICAL;
        hw_desc one = gpu(1);
        sim_result a = run(&one, &c);
        one.interconnect_gbps = 1e-6;
        sim_result b = run(&one, &c);
        assert_memory_equal(&a, &b, sizeof a);
        hw_desc four = gpu(4);
        sim_config c1 = c;
        c1.devices = 1;
        sim_result d = run(&four, &c1);
        assert_memory_equal(&a, &d, sizeof a);
        assert_int_equal(a.devices, 1);
        assert_true(a.interconnect_bytes == 0 && a.interconnect_busy == 0 && a.critical[SIM_INTERCONNECT] == 0);
        sim_roofline rf;
        st_error err = {0};
        assert_int_equal(sim_roofline_bound(&one, &c, &rf, &err), ST_OK);
        assert_true(rf.interconnect_s == 0 && rf.link_s > 0);
    }
}

/* Per iteration: the sharded state crosses the node's SSD once, each
 * device's checkpoints add up there; each device's link carries its shard
 * of the weights and gradients and its own checkpoints; the interconnect
 * carries (n - 1) / n of every weight load (all-gather) and of every time a
 * unit's gradients leave (reduce-scatter). */
static void test_data_parallel_bytes(void **state) {
    (void)state;
    sim_config c = config("gpt2-tiny", 2, 32, 4);
    c.precision = GPT_MIXED_BF16;
    c.place.weights = c.place.optim = c.place.acts = 1;
    c.schedule = SCHED_VERTICAL;
    hw_desc h1 = gpu(1), h4 = gpu(4);
    sim_result r1 = run(&h1, &c), r4 = run(&h4, &c);
    assert_int_equal(r4.devices, 4);
    for (int k = 0; k < STORE_KIND_COUNT; k++) {
        const uint64_t f = k == STORE_ACTIVATIONS ? 4 : 1;
        assert_true(r4.bytes_read[k] == f * r1.bytes_read[k] && r4.bytes_written[k] == f * r1.bytes_written[k]);
    }
    assert_true(r1.bytes_read[STORE_ACTIVATIONS] > 0 && r1.bytes_read[STORE_WEIGHTS] > 0);
    /* vertical: every unit's weights loaded twice; gradients leave once per
     * block, twice for the embedding unit (after the head, after the
     * embedding's backward) */
    double W = 0, G = 0, act = (double)c.B * c.T * c.model.d_model * 4;
    uint64_t wshard = 0, gshard = 0;
    for (int u = 0; u <= c.model.n_layer; u++) {
        const double n_el = (double)gpt_unit_numel(&c.model, u);
        W += 2 * 2 * n_el;
        G += (u == 0 ? 2 : 1) * 4 * n_el;
        wshard += 2 * (uint64_t)ceil(2 * n_el / 4);
        gshard += (u == 0 ? 2 : 1) * (uint64_t)ceil(4 * n_el / 4);
    }
    assert_close(r4.interconnect_bytes, 0.75 * (W + G));
    sched_counts sc;
    sched_params p = {.kind = SCHED_VERTICAL, .n_units = c.model.n_layer + 1, .micro_batches = c.micro_batches, .alpha = c.alpha,
                      .place.acts = 1, .place.weights = 1, .place.optim = 1};
    sched_list l;
    st_error err = {0};
    assert_int_equal(sched_build(&p, 1, &l, &err), ST_OK);
    sched_count(&l, &sc);
    sched_list_free(&l);
    assert_true(r4.link_to_device == wshard + (uint64_t)(sc.act_loads * act));
    assert_true(r4.link_from_device == gshard + (uint64_t)(sc.act_saves * act));
    /* GPU checkpoints leave the device even when they stay in host memory */
    c.place.acts = 0;
    sim_result m = run(&h4, &c);
    assert_true(m.bytes_read[STORE_ACTIVATIONS] == 0 && m.link_to_device == r4.link_to_device);
}

/* Per-device throughput falls when the devices' interconnect, or each
 * one's host link, is slow; the roofline says which. */
static void test_slow_links_lower_throughput(void **state) {
    (void)state;
    sim_config c = config("gpt2-mini", 4, 64, 4);
    c.precision = GPT_MIXED_BF16;
    c.place.weights = 1;
    for (int k = 0; k < 2; k++) {
        c.schedule = k ? SCHED_HORIZONTAL : SCHED_VERTICAL;
        hw_desc fast = gpu(4);
        fast.ssd[0].read_gbps = fast.ssd[0].write_gbps = 1000;
        fast.ssd[0].mixed_read_gbps = fast.ssd[0].mixed_write_gbps = 1000;
        hw_desc slow_ic = fast, slow_link = fast;
        slow_ic.interconnect_gbps = 0.05;
        slow_link.host_device_gbps = 0.05;
        sim_result f = run(&fast, &c), si = run(&slow_ic, &c), sl = run(&slow_link, &c);
        assert_true(si.tokens_per_s < 0.5 * f.tokens_per_s);
        assert_true(sl.tokens_per_s < 0.5 * f.tokens_per_s);
        assert_int_equal(si.bottleneck, SIM_INTERCONNECT);
        assert_int_equal(sl.bottleneck, SIM_LINK);
        sim_roofline rf;
        st_error err = {0};
        assert_int_equal(sim_roofline_bound(&slow_ic, &c, &rf, &err), ST_OK);
        assert_int_equal(rf.limit, SIM_INTERCONNECT);
        assert_close(rf.interconnect_s, si.interconnect_bytes / 0.05e9);
        assert_true(si.iter_s >= rf.bound_s * (1 - 1e-9));
        assert_int_equal(sim_roofline_bound(&slow_link, &c, &rf, &err), ST_OK);
        assert_int_equal(rf.limit, SIM_LINK);
        assert_true(sl.iter_s >= rf.bound_s * (1 - 1e-9));
        /* the node's tokens: more devices, more throughput, while the links keep up */
        hw_desc one = fast;
        one.devices_per_node = 1;
        sim_result o = run(&one, &c);
        assert_true(4 * f.tokens_per_s > 3 * o.tokens_per_s);
    }
}

/* The executor's gradient buffers are host memory on a separate device
 * too: with the gradients on the SSD, a unit's backward takes one of the
 * block buffers and its optimizer job holds it, so the backward runs at
 * most three (or six) blocks ahead of a slow optimizer (the CPU test's
 * case, on a GPU whose link is fast enough not to count). */
static void test_backward_waits_for_a_gradient_buffer(void **state) {
    (void)state;
    hw_desc hw = gpu(1);
    hw.host_device_gbps = 1e9;
    hw.ssd[0].read_gbps = hw.ssd[0].write_gbps = 0.05;
    expect_backward_held_by_gradient_buffers(&hw);
}

/* The device holds the working set: two units' weights and gradient
 * accumulators, one block's activations, the gradients flowing down; the
 * host the sharded state once and every device's checkpoints. */
static void test_gpu_memory(void **state) {
    (void)state;
    sim_config c = config("gpt2-mini", 4, 64, 3);
    c.precision = GPT_MIXED_BF16;
    c.schedule = SCHED_VERTICAL;
    const gpt_config *g = &c.model;
    const uint64_t u0 = gpt_unit_numel(g, 0), u1 = gpt_unit_numel(g, 1), mu = u0 > u1 ? u0 : u1;
    const uint64_t NC = (uint64_t)c.B * c.T * g->d_model;
    uint64_t scratch = gpt_block_scratch_numel(g, c.B, c.T), head = gpt_head_scratch_numel(g, c.B, c.T);
    if (head > scratch) scratch = head;
    hw_desc hw = gpu(4);
    layout_memory m, cpu;
    int fd, fh;
    sim_memory_need(&hw, &c, &m, &fd, &fh);
    assert_true(fd && fh);
    assert_true(m.unit_weights == 2 * mu * 2 + 2 * mu * 4);
    assert_true(m.activations == (gpt_block_acts_numel(g, c.B, c.T) + scratch) * 4 + 3 * NC * 4 + 2 * NC * 4 + 6 * NC * 4);
    assert_true(m.device == m.unit_weights + m.activations);
    offload_config oc = sim_offload_config(&c);
    offload_memory_need(&oc, &cpu);
    assert_true(m.checkpoints == 4 * cpu.checkpoints && m.optimizer_state == cpu.optimizer_state);
    assert_true(m.host == m.optimizer_state + m.compute_weights + m.checkpoints + m.gradients + m.staging);
    /* horizontal keeps one micro-batch's gradient flowing down */
    c.schedule = SCHED_HORIZONTAL;
    layout_memory h;
    sim_memory_need(&hw, &c, &h, NULL, NULL);
    assert_true(m.activations - h.activations == 2 * NC * 4);
    /* the result reports the same, and whether it fits */
    hw.device_bytes = m.device - 1;
    c.schedule = SCHED_VERTICAL;
    sim_result r = run(&hw, &c);
    assert_memory_equal(&r.memory, &m, sizeof m);
    assert_true(!r.fits_device && r.fits_host);
}

static void test_bad_input(void **state) {
    (void)state;
    sim_config c = config("gpt2-tiny", 2, 32, 1);
    sim_result r;
    st_error err = {0};
    hw_desc cpu = gpu(1);
    cpu.backend = HW_BACKEND_CPU;
    cpu.host_device_gbps = 0;
    c.devices = 2;
    assert_int_equal(sim_run(&cpu, &c, &r, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "gpu backend only"));
    hw_desc one = gpu(1);   /* no interconnect */
    c.devices = 4;
    assert_int_equal(sim_run(&one, &c, &r, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "node.interconnect_gbps"));
    c.devices = -1;
    assert_int_equal(sim_run(&one, &c, &r, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "devices"));
}

static void test_deterministic(void **state) {
    (void)state;
    sim_config c = config("gpt2-mini", 2, 64, 3);
    c.precision = GPT_MIXED_BF16;
    c.place.weights = c.place.optim = c.place.acts = c.place.grads = 1;
    c.alpha = 0.3;
    c.optimizer_segment = 1 << 18;
    hw_desc hw = gpu(4);
    for (int k = 0; k < 2; k++) {
        c.schedule = k ? SCHED_HORIZONTAL : SCHED_VERTICAL;
        sim_result a = run(&hw, &c), b = run(&hw, &c);
        assert_memory_equal(&a, &b, sizeof a);
        assert_close(a.compute_s + a.contention_s + a.wait_s, a.iter_s);
        assert_true(a.contention_s == 0);   /* AdamW on the host does not slow the device */
        double cp = 0;
        for (int i = 0; i < SIM_RESOURCE_COUNT; i++) cp += a.critical[i];
        assert_close(cp, a.iter_s);
        sim_roofline rf;
        st_error err = {0};
        assert_int_equal(sim_roofline_bound(&hw, &c, &rf, &err), ST_OK);
        assert_true(a.iter_s >= rf.bound_s * (1 - 1e-9));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduction_time_by_hand),
        cmocka_unit_test(test_backward_waits_for_a_gradient_buffer),
        cmocka_unit_test(test_reduction_overlaps_compute),
        cmocka_unit_test(test_weight_load_all_gathers),
        cmocka_unit_test(test_one_device_unchanged),
        cmocka_unit_test(test_data_parallel_bytes),
        cmocka_unit_test(test_slow_links_lower_throughput),
        cmocka_unit_test(test_gpu_memory),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_deterministic),
    };
    if (getenv("SIM_TEST_FILTER")) cmocka_set_test_filter(getenv("SIM_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
