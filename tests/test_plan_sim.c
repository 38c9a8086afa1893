/* test_plan_sim.c - the simulator against cases worked out by hand: a list
 * of compute alone takes the sum of its tasks; a read alone takes bytes over
 * bandwidth, spread over the paths; a prefetch hides a read shorter than the
 * compute before it and no more; saves are written behind; a weight load
 * waits for its unit's optimizer job, whose I/O streams in segments beside
 * AdamW; a streamed step and a step on memory run on lanes beside each
 * other; with gradients on the SSD the backward runs at most the
 * executor's gradient buffers ahead of the optimizer's jobs; AdamW beside
 * compute slows it by the configured factor; vertical
 * reads each unit's weights twice per iteration whatever the number of
 * micro-batches while horizontal reads them 2M times; the bytes it predicts
 * are the bytes the executor moves (measured, and by its own count); and a
 * run is deterministic; a Llama block costs what gpt_train_flops counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include <unistd.h>
#include <cmocka.h>

#include "strata/sim.h"
#include "sim_testutil.h"


/* What the simulator charges task t to the SSD, through the executor's layout. */
static void task_bytes(const sim_config *c, const sched_task *t, uint64_t rd[STORE_KIND_COUNT],
                       uint64_t wr[STORE_KIND_COUNT]) {
    run_layout l;
    st_error err = {0};
    assert_int_equal(sim_layout(c, &l, &err), ST_OK);
    sim_task_bytes(&l, c, t, rd, wr);
    layout_free(&l);
}

static uint64_t read_bytes(const sim_config *c, const sched_task *t) {
    uint64_t rd[STORE_KIND_COUNT], wr[STORE_KIND_COUNT], sum = 0;
    task_bytes(c, t, rd, wr);
    for (int k = 0; k < STORE_KIND_COUNT; k++) sum += rd[k];
    return sum;
}

static uint64_t written_bytes(const sim_config *c, const sched_task *t) {
    uint64_t rd[STORE_KIND_COUNT], wr[STORE_KIND_COUNT], sum = 0;
    task_bytes(c, t, rd, wr);
    for (int k = 0; k < STORE_KIND_COUNT; k++) sum += wr[k];
    return sum;
}

/* How many tensors t writes (each segment's write of each is queued after its checksum). */
static int written_tensors(const sim_config *c, const sched_task *t) {
    uint64_t rd[STORE_KIND_COUNT], wr[STORE_KIND_COUNT];
    int n = 0;
    task_bytes(c, t, rd, wr);
    for (int k = 0; k < STORE_KIND_COUNT; k++) n += wr[k] > 0;
    return n;
}

static void test_compute_alone_is_the_sum(void **state) {
    (void)state;
    hw_desc hw = cpu_machine(1);
    sim_config c = config("gpt2-tiny", 2, 32, 2);
    sched_list l = {0};
    for (int m = 0; m < 2; m++) add(&l, TASK_EMBED_FORWARD, 0, m, -1);
    for (int m = 0; m < 2; m++) add(&l, TASK_BLOCK_FORWARD, 1, m, -1);
    for (int m = 0; m < 2; m++) add(&l, TASK_HEAD, 0, m, -1);
    for (int m = 0; m < 2; m++) add(&l, TASK_BLOCK_BACKWARD, 1, m, -1);
    for (int m = 0; m < 2; m++) add(&l, TASK_EMBED_BACKWARD, 0, m, -1);
    double sum = 0;
    for (int i = 0; i < l.n; i++) sum += task_s(&hw, &c, &l, i);
    sim_result r = run1(&hw, &c, &l);
    assert_close(r.iter_s, sum);
    assert_close(r.compute_s, sum);
    assert_close(r.work_compute_s, sum);
    assert_true(r.wait_s == 0 && r.contention_s == 0);
    assert_int_equal(r.bottleneck, SIM_COMPUTE);
    assert_close(r.compute_busy, 1.0);
    /* the work itself, from the shapes: a block forward is 24 N C^2 of products */
    const double N = 2 * 32, C = c.model.d_model;
    sim_work w = sim_task_work(&c, &l, 2);
    assert_true(w.matmul_flops == 24 * N * C * C);
    assert_true(w.attention_flops == 2.0 * 2 * C * 32 * 33);
    sim_work b = sim_task_work(&c, &l, 6);
    assert_true(b.matmul_flops == 3 * w.matmul_flops && b.attention_flops == 3 * w.attention_flops);
    sim_work h = sim_task_work(&c, &l, 4);
    assert_true(h.head_flops == 6 * N * C * c.model.padded_vocab);
    sched_list_free(&l);
}

/* A Llama block (GQA: 3 kv heads for 9 query heads, SwiGLU) costs what
 * gpt_train_flops counts for it: its products, forward and the two of
 * backward, are 6 per block parameter-row, the head's 6 N C V (the vocabulary
 * padded here); the attention is the causal half of gpt_train_flops' full
 * T x T. And the bytes beside the products follow the kernels' passes. */
static void test_llama_block_flops(void **state) {
    (void)state;
    const int B = 2, T = 32;
    sim_config c = config("smollm2-135m", B, T, 1);
    const gpt_config *g = &c.model;
    sched_list l = {0};
    add(&l, TASK_BLOCK_FORWARD, 1, 0, -1);
    add(&l, TASK_BLOCK_BACKWARD, 1, 0, -1);
    add(&l, TASK_HEAD, 0, 0, -1);
    add(&l, TASK_EMBED_BACKWARD, 0, 0, -1);
    const sim_work f = sim_task_work(&c, &l, 0), b = sim_task_work(&c, &l, 1), h = sim_task_work(&c, &l, 2);
    const sim_work e = sim_task_work(&c, &l, 3);
    const double N = (double)B * T, C = g->d_model, L = g->n_layer, F = g->d_ff;
    const double kv = 2.0 * g->n_kv_head * (C / g->n_head);
    gpt_config head_only = *g;
    head_only.n_layer = 0;
    const double head = gpt_train_flops(&head_only, B, T), blocks = gpt_train_flops(g, B, T) - head;
    const double full_attention = 3.0 * N * L * 2.0 * 2.0 * T * C;   /* gpt_train_flops' attention term */
    assert_close(L * 3 * f.matmul_flops, blocks - full_attention);
    assert_close(3 * f.matmul_flops, 6 * N * (C * (C + kv) + C * C + 3 * C * F));
    assert_true(b.matmul_flops == 3 * f.matmul_flops);   /* the recomputed forward, then backward */
    assert_close(3 * f.attention_flops * L, full_attention * (T + 1) / (2.0 * T));
    assert_close(h.head_flops * g->vocab_size / g->padded_vocab, head);
    /* beside the products: 2 RMSNorms (8), 2 residual adds (12), the q and k
     * rotations, SwiGLU 12 N F and the causal softmax 8 per entry forward;
     * backward adds SwiGLU's 20 N F, 2 RMSNorm backward (24), 2 copies (8),
     * the inverse rotations and the softmax backward, 12 per entry */
    const double tri = (double)B * g->n_head * T * (T + 1) / 2, rot = 8 * N * (C + kv / 2);
    assert_close(f.other_bytes, 40 * N * C + rot + 12 * N * F + 8 * tri);
    /* (and the gradients: a unit's first gradient task zeroes them, its last sums their squares) */
    const double block_n = (double)gpt_unit_numel(g, 1), embed_n = (double)gpt_unit_numel(g, 0);
    assert_close(b.other_bytes - f.other_bytes, 20 * N * F + 64 * N * C + rot + 12 * tri + 8 * block_n);
    assert_close(h.other_bytes, 36 * N * C + 16 * N * g->padded_vocab + 4 * embed_n);
    assert_close(e.other_bytes, 12 * N * C + 4 * embed_n);
    sched_list_free(&l);
}

/* With a table of rates by rows, a task's products run at its rows' rate,
 * the head's at its chunk's (at most 1024 rows); each compute task pays the
 * fixed overhead; the blocks' tasks are scaled by block_factor. */
static void test_rates_by_rows(void **state) {
    (void)state;
    hw_desc hw = cpu_machine(1);
    hw.n_matmul_rows = 2;
    hw.matmul_by_rows[0] = (hw_rate_at){16, 10};
    hw.matmul_by_rows[1] = (hw_rate_at){256, 50};
    hw.n_head_rows = 1;
    hw.head_by_rows[0] = (hw_rate_at){1024, 40};
    hw.task_overhead_s = 1e-4;
    sim_config c = config("gpt2-tiny", 1, 64, 1);   /* 64 rows: halfway from 16 to 256 in log */
    sched_list l = {0};
    add(&l, TASK_BLOCK_FORWARD, 1, 0, -1);
    add(&l, TASK_HEAD, 0, 0, -1);
    sim_work f = sim_task_work(&c, &l, 0), h = sim_task_work(&c, &l, 1);
    assert_true(f.rows == 64 && f.tasks == 1);
    assert_close(sim_work_seconds(&hw, &f), f.matmul_flops / 30e9 + f.attention_flops / 20e9 + f.other_bytes / 10e9 + 1e-4);
    assert_close(sim_work_seconds(&hw, &h), h.head_flops / 40e9 + h.other_bytes / 10e9 + 1e-4);
    sim_result r = run1(&hw, &c, &l);
    assert_close(r.iter_s, sim_work_seconds(&hw, &f) + sim_work_seconds(&hw, &h));
    /* block_factor (strata probe's trial of the executor) scales the blocks' tasks, overhead included, and
       nothing else: the head is timed whole, as the executor runs it */
    hw_desc slow = hw;
    slow.block_factor = 1.25;
    assert_true(f.block && !h.block);
    assert_close(sim_work_seconds(&slow, &f), 1.25 * sim_work_seconds(&hw, &f));
    assert_close(sim_work_seconds(&slow, &h), sim_work_seconds(&hw, &h));
    r = run1(&slow, &c, &l);
    assert_close(r.iter_s, 1.25 * sim_work_seconds(&hw, &f) + sim_work_seconds(&hw, &h));
    sched_list_free(&l);
}

/* Mixed precision: a weight load widens the unit's bf16 weights to f32 on
 * the compute thread, 2 + 4 bytes an element, at widen_gbps (a whole unit,
 * past the caches: strata probe measures it apart from the blocks' passes),
 * and at other_gbps in a description without it. */
static void test_widen_at_its_own_rate(void **state) {
    (void)state;
    hw_desc hw = cpu_machine(1);
    sim_config c = config("gpt2-tiny", 1, 64, 1);
    c.precision = GPT_MIXED_BF16;
    sched_list l = {0};
    add(&l, TASK_LOAD_WEIGHTS, 1, -1, -1);
    const sim_work w = sim_task_work(&c, &l, 0);
    const double n = (double)gpt_unit_numel(&c.model, 1);
    assert_close(w.widen_bytes, 6 * n);
    assert_true(w.other_bytes == 0 && !w.block);
    assert_close(sim_work_seconds(&hw, &w), 6 * n / 10e9);   /* no widen_gbps: other_gbps */
    hw.widen_gbps = 2.5;
    assert_close(sim_work_seconds(&hw, &w), 6 * n / 2.5e9);
    sim_result r = run1(&hw, &c, &l);
    assert_close(r.iter_s, 6 * n / 2.5e9);
    /* fp32 weights are not widened */
    c.precision = GPT_FP32;
    const sim_work f = sim_task_work(&c, &l, 0);
    assert_true(f.widen_bytes == 0 && f.other_bytes == 0);
    sched_list_free(&l);
}

static void test_read_alone_is_bytes_over_bandwidth(void **state) {
    (void)state;
    sim_config c = config("gpt2-tiny", 2, 32, 1);
    c.place.weights = 1;
    sched_list l = {0};
    add(&l, TASK_LOAD_WEIGHTS, 1, -1, -1);
    const double bytes = (double)read_bytes(&c, &l.tasks[0]);
    assert_true(bytes == (double)store_padded_bytes(gpt_unit_numel(&c.model, 1) * 4));
    hw_desc one = cpu_machine(1);
    sim_result r = run1(&one, &c, &l);
    assert_close(r.iter_s, bytes / 1e9);
    assert_int_equal(r.bottleneck, SIM_SSD);
    assert_close(r.wait_on[SIM_SSD], r.iter_s);
    assert_close(r.path[0].read_busy, 1.0);
    assert_true(r.bytes_read[STORE_WEIGHTS] == (uint64_t)bytes && r.total_written == 0);
    /* two paths (1 and 2 GB/s), striped evenly: the slower one sets the time */
    hw_desc two = cpu_machine(2);
    r = run1(&two, &c, &l);
    assert_close(r.iter_s, bytes / 2 / 1e9);
    assert_close(r.path[1].read_busy, 0.5);
    /* striped by bandwidth, both finish together */
    c.stripe[0] = 1;
    c.stripe[1] = 2;
    r = run1(&two, &c, &l);
    assert_close(r.iter_s, bytes / 3e9);
    sched_list_free(&l);
}

/* load w1, forward 1, load w2, forward 2: the second read starts when the
 * first load is done and runs beside forward 1 (rd < f/2 below). */
static void test_prefetch_hides_a_shorter_read(void **state) {
    (void)state;
    sim_config c = config("gpt2-tiny", 4, 64, 1);
    c.place.weights = 1;
    sched_list l = {0};
    add(&l, TASK_LOAD_WEIGHTS, 1, -1, -1);
    add(&l, TASK_BLOCK_FORWARD, 1, 0, 0);
    add(&l, TASK_LOAD_WEIGHTS, 2, -1, -1);
    add(&l, TASK_BLOCK_FORWARD, 2, 0, 2);
    hw_desc hw = cpu_machine(1);
    const double f = task_s(&hw, &c, &l, 1), rd = (double)read_bytes(&c, &l.tasks[0]) / 1e9;
    assert_true(rd < f);
    sim_result r = run1(&hw, &c, &l);
    assert_close(r.iter_s, rd + 2 * f);   /* only the first read shows */
    assert_close(r.wait_s, rd);
    /* a slower drive: the read outlasts the forward, the rest shows */
    hw.ssd[0].read_gbps = (double)read_bytes(&c, &l.tasks[0]) / (3 * f) / 1e9;
    const double slow = 3 * f;
    r = run1(&hw, &c, &l);
    assert_close(r.iter_s, 2 * slow + f);
    assert_close(r.wait_s, 2 * slow - f);
    sched_list_free(&l);

    /* An optimizer job of unit 2 still running when load 1 completes: the
     * executor's policy reads unit 2 when reached (after the job); eager
     * reads it ahead as soon as the job ends. */
    hw = cpu_machine(1);
    hw.compute_slowdown = hw.optimizer_slowdown = 1;
    sched_list k = {0};
    add(&k, TASK_OPTIMIZE, 2, -1, -1);   /* optimizer state in memory: AdamW only */
    add(&k, TASK_LOAD_WEIGHTS, 1, -1, -1);
    add(&k, TASK_BLOCK_FORWARD, 1, 0, 1);
    add(&k, TASK_LOAD_WEIGHTS, 2, -1, 0);
    add(&k, TASK_BLOCK_FORWARD, 2, 0, 3);
    const double job = rd + f / 2;
    hw.adamw_params_per_s = (double)gpt_unit_numel(&c.model, 2) / job;
    r = run1(&hw, &c, &k);
    assert_close(r.iter_s, 2 * rd + 2 * f);   /* read 1, forward 1, read 2, forward 2 */
    c.prefetch_eager = 1;
    r = run1(&hw, &c, &k);
    /* the job ends after AdamW and its write of the new weights; read 2 follows, beside forward 1 */
    const double job_end = job + (double)written_bytes(&c, &k.tasks[0]) / 2e9;
    assert_close(r.iter_s, fmax(job_end + rd, rd + f) + f);
    assert_true(r.iter_s < 2 * rd + 2 * f);
    sched_list_free(&k);
}

/* Saves do not hold compute up; a load of what was saved waits for the write. */
static void test_saves_are_written_behind(void **state) {
    (void)state;
    sim_config c = config("gpt2-tiny", 4, 64, 1);
    c.place.acts = 1;
    hw_desc hw = cpu_machine(1);
    hw.ssd[0].write_gbps = 1e-3;   /* a write far longer than the compute */
    sched_list l = {0};
    add(&l, TASK_BLOCK_FORWARD, 1, 0, -1);
    add(&l, TASK_SAVE_ACT, 2, 0, 0);
    add(&l, TASK_BLOCK_FORWARD, 2, 0, 0);
    const double f = task_s(&hw, &c, &l, 0);
    sim_result r = run1(&hw, &c, &l);
    assert_close(r.iter_s, 2 * f);
    assert_true(r.bytes_written[STORE_ACTIVATIONS] == store_padded_bytes((uint64_t)4 * 64 * c.model.d_model * 4));
    sched_list_free(&l);
    /* forward, save, load it back: the read starts after the write */
    hw.ssd[0].write_gbps = 2.0;
    sched_list k = {0};
    add(&k, TASK_BLOCK_FORWARD, 1, 0, -1);
    add(&k, TASK_SAVE_ACT, 2, 0, 0);
    add(&k, TASK_LOAD_ACT, 2, 0, 1);
    const double bytes = (double)read_bytes(&c, &k.tasks[2]);
    r = run1(&hw, &c, &k);
    assert_close(r.iter_s, f + bytes / 2e9 + bytes / 1e9);
    assert_close(r.wait_on[SIM_SSD], bytes / 2e9 + bytes / 1e9);
    sched_list_free(&k);
}

/* optimize u1, load u1's weights: the load waits for the job, whose phases
 * are: read the first segment, then the rest of the I/O beside AdamW, then
 * write the last segment. */
static void test_weight_load_waits_for_the_optimizer(void **state) {
    (void)state;
    sim_config c = config("gpt2-tiny", 2, 32, 1);
    c.place.weights = c.place.optim = 1;
    hw_desc hw = cpu_machine(1);
    hw.ssd[0].mixed_read_gbps = hw.ssd[0].read_gbps;   /* no interference: the phases add up simply */
    hw.ssd[0].mixed_write_gbps = hw.ssd[0].write_gbps;
    sched_list l = {0};
    add(&l, TASK_OPTIMIZE, 1, -1, -1);
    add(&l, TASK_LOAD_WEIGHTS, 1, -1, 0);
    const double n = (double)gpt_unit_numel(&c.model, 1);
    const double R = 1e9, W = 2e9, A = 5e8;
    const double rd = (double)read_bytes(&c, &l.tasks[0]), wr = (double)written_bytes(&c, &l.tasks[0]);
    const double load = (double)read_bytes(&c, &l.tasks[1]) / R;
    assert_true(rd == 3 * (double)store_padded_bytes((uint64_t)n * 4));   /* master, m, v */
    assert_true(wr == rd + (double)store_padded_bytes((uint64_t)n * 4));  /* and the fp32 weights */
    /* one segment: read all, step, write all */
    sim_result r = run1(&hw, &c, &l);
    assert_close(r.iter_s, rd / R + n / A + wr / W + load);
    assert_close(r.wait_on[SIM_OPTIMIZER] + r.wait_on[SIM_SSD], r.iter_s);
    /* four segments (the executor's grain is a multiple of 2048 elements):
     * the middle I/O runs beside AdamW; each segment is padded on its own */
    c.optimizer_segment = (size_t)ceil(n / 4 / 2048) * 2048;
    c.opt_io = OPT_IO_INTERLEAVED;
    const double seg = (double)c.optimizer_segment, last = n - 3 * seg;
    assert_true(last > 0 && last <= seg);
    const double rd4 = (double)read_bytes(&c, &l.tasks[0]), wr4 = (double)written_bytes(&c, &l.tasks[0]);
    assert_true(rd4 == 3 * (3 * (double)store_padded_bytes((uint64_t)seg * 4) + (double)store_padded_bytes((uint64_t)last * 4)));
    const double fill = rd4 * seg / n, drain = wr4 * last / n;
    const double stream = fmax(fmax((rd4 - fill) / R, (wr4 - drain) / W), n / A);
    r = run1(&hw, &c, &l);
    assert_close(r.iter_s, fill / R + stream + drain / W + load);
    /* phased: every read (AdamW beside them, but for the last segment of
     * each group of three: segments 3 and 4), then every write */
    c.opt_io = OPT_IO_PHASED;
    assert_true(n / A / 2 < rd4 / R);   /* the stepping beside the reads hides under them */
    r = run1(&hw, &c, &l);
    assert_close(r.iter_s, rd4 / R + (seg + last) / A + wr4 / W + load);
    sched_list_free(&l);
}

/* The optimizer's lanes: a step that streams its state through the SSD and
 * a step of state all in memory run beside each other (the executor's two
 * threads), so the pair takes the longer of the two, not their sum; with
 * several ranks every step is on the one lane (in list order). */
static void test_lanes_step_beside_each_other(void **state) {
    (void)state;
    sim_config c = config("gpt2-tiny", 2, 32, 1);
    c.place.optim = 0.5;
    hw_desc hw = cpu_machine(1);
    hw.ssd[0].mixed_read_gbps = hw.ssd[0].read_gbps;
    hw.ssd[0].mixed_write_gbps = hw.ssd[0].write_gbps;
    run_layout lay;
    st_error err = {0};
    assert_int_equal(sim_layout(&c, &lay, &err), ST_OK);
    int ssd_unit = -1, host_unit = -1;
    for (int u = 0; u < lay.n_units; u++) {
        if (layout_opt_lane(&lay, u) == LAYOUT_LANE_SSD && ssd_unit < 0) ssd_unit = u;
        if (layout_opt_lane(&lay, u) == LAYOUT_LANE_HOST) host_unit = u;
    }
    layout_free(&lay);
    assert_true(ssd_unit >= 0 && host_unit >= 0);
    sched_list l = {0};
    add(&l, TASK_OPTIMIZE, ssd_unit, -1, -1);
    add(&l, TASK_OPTIMIZE, host_unit, -1, -1);
    add(&l, TASK_LOAD_WEIGHTS, ssd_unit, -1, 0);   /* weights in memory: waits for the steps, moves nothing */
    add(&l, TASK_LOAD_WEIGHTS, host_unit, -1, 1);
    const double A = hw_adamw_rate(&hw), R = hw.ssd[0].read_gbps * 1e9, W = hw.ssd[0].write_gbps * 1e9;
    const double n_ssd = (double)gpt_unit_numel(&c.model, ssd_unit), n_host = (double)gpt_unit_numel(&c.model, host_unit);
    const double rd = (double)read_bytes(&c, &l.tasks[0]), wr = (double)written_bytes(&c, &l.tasks[0]);
    assert_true(rd > 0 && read_bytes(&c, &l.tasks[1]) == 0 && written_bytes(&c, &l.tasks[1]) == 0);
    /* one segment each, phased: read all, step, write all; beside it AdamW alone */
    const double streamed = rd / R + n_ssd / A + wr / W, host = n_host / A;
    sim_result r = run1(&hw, &c, &l);
    assert_close(r.iter_s, fmax(streamed, host));
    assert_true(r.iter_s < streamed + host - 0.5 * fmin(streamed, host));
    sched_list_free(&l);
    c.ranks = 2;
    assert_int_equal(sim_layout(&c, &lay, &err), ST_OK);
    for (int u = 0; u < lay.n_units; u++) assert_int_equal(layout_opt_lane(&lay, u), LAYOUT_LANE_SSD);
    layout_free(&lay);
}

/* With gradients on the SSD (one rank) a unit's backward takes one of the
 * executor's block gradient buffers (three, or six), and each optimizer
 * job of the unit holds it until the job is done: the backward runs at
 * most that many blocks ahead of a slow worker. Blocks 6..1 go
 * backward, each then stepped (its optimizer state on the SSD: a job of J
 * seconds, far longer than a backward), then block 6 is loaded (its job the
 * first) and goes forward. */
static void test_backward_waits_for_a_gradient_buffer(void **state) {
    (void)state;
    hw_desc hw = cpu_machine(1);
    hw.compute_slowdown = hw.optimizer_slowdown = 1;
    hw.ssd[0].read_gbps = hw.ssd[0].write_gbps = 0.05;
    expect_backward_held_by_gradient_buffers(&hw);
}

/* Which order of the optimizer's I/O the model prefers follows the disk: where
 * reads and writes together run as fast as each alone, interleaving overlaps
 * them and wins; where mixing slows both a lot, phases win. */
static void test_optimizer_io_order_follows_the_disk(void **state) {
    (void)state;
    sim_config c = config("gpt2-tiny", 2, 32, 1);
    c.place.optim = 1;
    sched_list l = {0};
    add(&l, TASK_OPTIMIZE, 1, -1, -1);
    add(&l, TASK_LOAD_WEIGHTS, 1, -1, 0);   /* waits for the job (the weights are in memory: no read) */
    c.optimizer_segment = (size_t)ceil((double)gpt_unit_numel(&c.model, 1) / 8 / 2048) * 2048;
    hw_desc hw = cpu_machine(1);
    double t[2][OPT_IO_ALTERNATING];   /* [mixing slows][order] */
    for (int slow = 0; slow < 2; slow++) {
        hw.ssd[0].mixed_read_gbps = hw.ssd[0].read_gbps * (slow ? 0.25 : 1);
        hw.ssd[0].mixed_write_gbps = hw.ssd[0].write_gbps * (slow ? 0.25 : 1);
        for (int o = 0; o < OPT_IO_ALTERNATING; o++) {
            c.opt_io = (opt_io_order)o;
            t[slow][o] = run1(&hw, &c, &l).iter_s;
        }
    }
    printf("  optimizer job: mixing free %.4f s interleaved, %.4f s phased; mixing at a quarter %.4f s, %.4f s\n",
           t[0][OPT_IO_INTERLEAVED], t[0][OPT_IO_PHASED], t[1][OPT_IO_INTERLEAVED], t[1][OPT_IO_PHASED]);
    assert_true(t[0][OPT_IO_INTERLEAVED] < t[0][OPT_IO_PHASED]);
    assert_true(t[1][OPT_IO_PHASED] < t[1][OPT_IO_INTERLEAVED]);
    assert_close(t[0][OPT_IO_PHASED], t[1][OPT_IO_PHASED]);   /* phased never mixes its own reads and writes */
    /* the executor's measuring aid is not a model */
    c.opt_io = OPT_IO_ALTERNATING;
    sim_result r;
    st_error err = {0};
    const sched_list *lists[1] = {&l};
    assert_int_equal(sim_run_lists(&hw, &c, lists, 1, &r, &err), ST_EINVAL);
    sched_list_free(&l);
}

/* AdamW beside compute: compute takes compute_slowdown times as long while
 * they overlap, AdamW optimizer_slowdown times. */
static void test_contention_slows_compute(void **state) {
    (void)state;
    sim_config c = config("gpt2-tiny", 4, 64, 1);
    hw_desc hw = cpu_machine(1);
    sched_list l = {0};
    add(&l, TASK_OPTIMIZE, 1, -1, -1);   /* state in memory: AdamW only */
    add(&l, TASK_BLOCK_FORWARD, 1, 0, -1);
    const double f = task_s(&hw, &c, &l, 1), n = (double)gpt_unit_numel(&c.model, 1);
    /* AdamW outlasts the forward: all of it runs slowed */
    hw.adamw_params_per_s = n / (10 * f);
    sim_result r = run1(&hw, &c, &l);
    assert_close(r.iter_s, 1.5 * f);
    assert_close(r.compute_s, f);
    assert_close(r.contention_s, 0.5 * f);
    assert_int_equal(r.bottleneck, SIM_COMPUTE);
    /* AdamW ends first: a (full-speed) seconds of it take 2a beside compute,
     * which meanwhile does 2a / 1.5 of its work */
    const double a = f / 10;
    hw.adamw_params_per_s = n / a;
    r = run1(&hw, &c, &l);
    assert_close(r.iter_s, 2 * a + (f - 2 * a / 1.5));
    assert_close(r.contention_s, 2 * a - 2 * a / 1.5);
    /* a GPU backend does not share its compute with the CPU's AdamW */
    hw.backend = HW_BACKEND_GPU;
    hw.host_device_gbps = 25;
    r = run1(&hw, &c, &l);
    assert_close(r.iter_s, f);
    sched_list_free(&l);
}

/* A drive moving bytes beside compute: compute takes compute_beside_io
 * times as long while the transfer runs (a checkpoint's write behind a
 * block's forward), counted as contention; not on a GPU backend. */
static void test_transfers_slow_compute(void **state) {
    (void)state;
    sim_config c = config("gpt2-tiny", 4, 64, 1);
    c.place.acts = 1;
    hw_desc hw = cpu_machine(1);
    hw.compute_slowdown = hw.optimizer_slowdown = 1;
    sched_list l = {0};
    add(&l, TASK_SAVE_ACT, 1, 0, -1);   /* written behind: compute moves on */
    add(&l, TASK_BLOCK_FORWARD, 2, 0, -1);
    const double f = task_s(&hw, &c, &l, 1), bytes = (double)written_bytes(&c, &l.tasks[0]), F = 1.4;
    assert_true(f > 0 && bytes > 0);
    sim_result r = run1(&hw, &c, &l);   /* 0, as in a description without it: no slowdown */
    assert_close(r.compute_s, f);
    assert_true(r.contention_s == 0);
    hw.compute_beside_io = F;
    for (int k = 0; k < 2; k++) {
        const double w = k == 0 ? 3 * f * F : f / 4;   /* the write outlasts the slowed forward, or ends within it */
        hw.ssd[0].write_gbps = bytes / w / 1e9;
        r = run1(&hw, &c, &l);
        assert_close(r.compute_s, f);
        assert_close(r.contention_s, k == 0 ? f * (F - 1) : w * (1 - 1 / F));
        if (k == 1) assert_close(r.iter_s, w + (f - w / F));
    }
    hw.backend = HW_BACKEND_GPU;   /* its compute is not the CPU's */
    hw.host_device_gbps = 25;
    r = run1(&hw, &c, &l);
    assert_true(r.contention_s == 0);
    sched_list_free(&l);
}

/* Compute beside a transfer: the drive moves io_beside_compute times slower
 * while compute runs (a checkpoint written behind a block's forward, then
 * read back, which waits for the write); not on a GPU backend. */
static void test_compute_slows_transfers(void **state) {
    (void)state;
    sim_config c = config("gpt2-tiny", 4, 64, 1);
    c.place.acts = 1;
    hw_desc hw = cpu_machine(1);
    hw.compute_slowdown = hw.optimizer_slowdown = 1;
    sched_list l = {0};
    const int save = add(&l, TASK_SAVE_ACT, 1, 0, -1);
    add(&l, TASK_BLOCK_FORWARD, 2, 0, -1);
    add(&l, TASK_LOAD_ACT, 1, 0, save);
    const double f = task_s(&hw, &c, &l, 1), bytes = (double)written_bytes(&c, &l.tasks[0]), G = 2;
    hw.ssd[0].write_gbps = bytes / (3 * f) / 1e9;   /* the write outlasts the forward */
    const double plain = run1(&hw, &c, &l).iter_s;
    /* during the forward the write moves at 1/G of its rate: f / G of its time, and f - f / G more after */
    hw.io_beside_compute = G;
    assert_close(run1(&hw, &c, &l).iter_s, plain + f - f / G);
    hw.backend = HW_BACKEND_GPU;   /* a device computes; the host's cores serve the drives */
    hw.host_device_gbps = 25;
    hw_desc gpu_plain = hw;
    gpu_plain.io_beside_compute = 0;
    assert_close(run1(&hw, &c, &l).iter_s, run1(&gpu_plain, &c, &l).iter_s);
    sched_list_free(&l);
}

/* The store's CPU work (hw.io_cpu_s_per_gb): the optimizer's worker
 * checksums each tensor it writes before queueing it, so a phase's first
 * write waits for its sums and the rest are summed beside the writes
 * already queued (hidden here: summing is faster than writing); what it
 * reads is summed on the I/O thread as it arrives (not the worker's time);
 * on a CPU backend, compute's thread checksums what it saves before the
 * write starts, and the cores pay for what a load read. */
static void test_store_cpu_work(void **state) {
    (void)state;
    const double k = 0.1e-9;   /* 0.1 s per GB */
    hw_desc hw = cpu_machine(1), io = hw;
    io.io_cpu_s_per_gb = 0.1;
    sim_config c = config("gpt2-tiny", 4, 64, 1);
    c.place.weights = c.place.optim = 1;
    /* optimize u1, then load its weights (which waits for the job) */
    sched_list l = {0};
    add(&l, TASK_OPTIMIZE, 1, -1, -1);
    add(&l, TASK_LOAD_WEIGHTS, 1, -1, -1);
    const double R = (double)read_bytes(&c, &l.tasks[0]), W = (double)written_bytes(&c, &l.tasks[0]);
    const double L = (double)read_bytes(&c, &l.tasks[1]), n = (double)gpt_unit_numel(&c.model, 1);
    const int nw = written_tensors(&c, &l.tasks[0]);
    assert_true(R > 0 && W > 0 && L > 0 && n / 5e8 < R / 1e9);   /* AdamW hides under the reads */
    assert_true(nw == 4 && W * k < W / (hw.ssd[0].write_gbps * 1e9));   /* summing outpaces the writes */
    /* one segment, one phase: its first tensor's sums before the writes */
    sim_result a = run1(&hw, &c, &l), b = run1(&io, &c, &l);
    assert_true(a.iter_s > 0);
    assert_close(b.iter_s, a.iter_s + W * k / nw + L * k);
    /* six segments, two phases: the sums before each phase's first write, a segment's first tensor */
    const size_t segment = c.optimizer_segment;
    c.optimizer_segment = (size_t)ceil(n / 6 / 2048) * 2048;
    const double seg = (double)c.optimizer_segment, rest = n - 5 * seg;
    assert_true(rest > 0 && rest <= seg);
    a = run1(&hw, &c, &l), b = run1(&io, &c, &l);
    assert_close(b.iter_s, a.iter_s + W * k * (seg + rest) / n / nw + L * k);
    /* the worker's CPU time: AdamW and the writes' sums */
    sim_roofline ra, rb;
    assert_int_equal(sim_roofline_list(&hw, &c, &l, &ra, NULL), ST_OK);
    assert_int_equal(sim_roofline_list(&io, &c, &l, &rb, NULL), ST_OK);
    assert_close(rb.optimizer_s, ra.optimizer_s + W * k);
    assert_close(rb.compute_s, ra.compute_s + L * k);
    c.optimizer_segment = segment;
    sched_list_free(&l);

    /* forward, save, load it back: the save's checks run on compute's
     * thread beside its write (shorter); the load waits for the write,
     * reads, and then pays for its checks */
    c.place.weights = c.place.optim = 0;
    c.place.acts = 1;
    sched_list m = {0};
    add(&m, TASK_BLOCK_FORWARD, 1, 0, -1);
    add(&m, TASK_SAVE_ACT, 2, 0, 0);
    add(&m, TASK_LOAD_ACT, 2, 0, 1);
    const double f = task_s(&io, &c, &m, 0), bytes = (double)read_bytes(&c, &m.tasks[2]);
    assert_close(bytes, (double)written_bytes(&c, &m.tasks[1]));
    b = run1(&io, &c, &m);
    assert_close(b.iter_s, f + bytes / 2e9 + bytes / 1e9 + bytes * k);
    assert_int_equal(sim_roofline_list(&io, &c, &m, &rb, NULL), ST_OK);
    assert_close(rb.compute_s, f + 2 * bytes * k);
    sched_list_free(&m);

    /* forward, save, forward: the save's checks hold compute up, its write does not */
    sched_list q = {0};
    add(&q, TASK_BLOCK_FORWARD, 1, 0, -1);
    add(&q, TASK_SAVE_ACT, 2, 0, 0);
    add(&q, TASK_BLOCK_FORWARD, 2, 0, 0);
    io.ssd[0].write_gbps = 1e-3;
    b = run1(&io, &c, &q);
    assert_close(b.iter_s, 2 * f + bytes * k);
    sched_list_free(&q);
}

/* Vertical reads each unit's weights twice per iteration (forward, and head
 * or backward) for any M; horizontal twice per micro-batch. */
static void test_weight_reads_vertical_vs_horizontal(void **state) {
    (void)state;
    hw_desc hw = cpu_machine(1);
    sim_config c = config("gpt2-tiny", 2, 32, 1);
    c.place.weights = c.place.optim = c.place.acts = 1;
    c.alpha = 0.25;
    c.clipping = 0;
    uint64_t unit_bytes = 0;
    for (int u = 0; u <= c.model.n_layer; u++) {
        sched_task t = {.op = TASK_LOAD_WEIGHTS, .unit = u};
        unit_bytes += read_bytes(&c, &t);
    }
    double prev_h = 0;
    for (int M = 1; M <= 8; M *= 2) {
        c.micro_batches = M;
        sim_result v, h;
        st_error err = {0};
        c.schedule = SCHED_VERTICAL;
        assert_int_equal(sim_run(&hw, &c, &v, &err), ST_OK);
        c.schedule = SCHED_HORIZONTAL;
        assert_int_equal(sim_run(&hw, &c, &h, &err), ST_OK);
        assert_true(v.bytes_read[STORE_WEIGHTS] == 2 * unit_bytes);
        assert_true(h.bytes_read[STORE_WEIGHTS] == 2 * (uint64_t)M * unit_bytes);
        /* the optimizer's traffic is one step's either way */
        assert_true(v.bytes_read[STORE_MASTER] == h.bytes_read[STORE_MASTER]);
        assert_true(v.bytes_written[STORE_WEIGHTS] == h.bytes_written[STORE_WEIGHTS]);
        assert_true(v.iter_s > 0 && h.iter_s > 0 && h.tokens_per_s > 0);
        assert_true((double)h.total_read > prev_h);
        prev_h = (double)h.total_read;
    }
}

/* Per iteration, the simulator's bytes of each kind are what the executor
 * moves through its store (third step, steady). */
static void test_bytes_match_the_executor(void **state) {
    (void)state;
    train_config tc = train_config_defaults();
    tc.model = (gpt_config){.n_layer = 3, .n_head = 2, .d_model = 32, .n_ctx = 16, .vocab_size = 97};
    st_error err = {0};
    assert_int_equal(gpt_config_check(&tc.model, &err), ST_OK);
    tc.B = 2;
    tc.T = 16;
    tc.micro_batches = 3;
    tc.precision = GPT_MIXED_BF16;
    tc.clip = 0;
    tc.lr.total = 10;
    const size_t per = (size_t)tc.micro_batches * tc.B * (tc.T + 1);
    int32_t *tok = malloc(per * sizeof *tok);
    for (size_t i = 0; i < per; i++) tok[i] = (int32_t)(i * 7 % 97);
    hw_desc hw = cpu_machine(1);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);   /* bytes do not depend on threads; a busy machine's spinning does not slow this */
    /* the layout's parameters move both: alpha sets the parts, the segment
     * size the grain of the store and the optimizer's buffers */
    const double alphas[2] = {0.5, 0.3};
    const size_t segments[2] = {2048, 4096};
    uint64_t host_memory[2] = {0, 0};
    for (int k = 0; k < 2; k++)
        for (int g = 0; g < 2; g++)
        for (int v = 0; v < 2; v++) {
            char dir[256];
            snprintf(dir, sizeof dir, "%s/sim-store-XXXXXX", STRATA_BINARY_DIR);
            assert_non_null(mkdtemp(dir));
            const char *paths[1] = {dir};
            offload_config oc = {.train = tc, .schedule = k ? SCHED_HORIZONTAL : SCHED_VERTICAL, .alpha = alphas[v],
                                 .place.weights = 1, .place.optim = 1, .place.acts = 1, .place.grads = g,
                                 .store_paths = paths, .n_store_paths = 1, .segment_elems = segments[v]};
            offload_trainer *t;
            st_status s = offload_trainer_create(&t, &oc, NULL, &err);
            if (s != ST_OK) fprintf(stderr, "executor: %s\n", err.msg);
            assert_int_equal(s, ST_OK);
            offload_stats before, after;
            for (int step = 0; step < 3; step++) {
                if (step == 2) {   /* the previous step's optimizer work done: the third step alone */
                    assert_int_equal(offload_trainer_close_trace(t, &err), ST_OK);
                    offload_trainer_stats(t, &before);
                }
                assert_int_equal(offload_trainer_step(t, tok, NULL, &err), ST_OK);
            }
            assert_int_equal(offload_trainer_close_trace(t, &err), ST_OK);   /* the worker is done */
            offload_trainer_stats(t, &after);
            layout_memory planned;
            uint64_t allocated;
            offload_trainer_memory(t, &planned, &allocated);
            offload_trainer_free(t);
            char cmd[300];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
            assert_int_equal(system(cmd), 0);

            sim_config c = sim_default_config();
            c.model = tc.model;
            c.B = tc.B;
            c.T = tc.T;
            c.micro_batches = tc.micro_batches;
            c.precision = tc.precision;
            c.schedule = oc.schedule;
            c.alpha = oc.alpha;
            c.place.weights = c.place.optim = c.place.acts = 1;
            c.place.grads = g;
            c.optimizer_segment = segments[v];
            sim_result r;
            assert_int_equal(sim_run(&hw, &c, &r, &err), ST_OK);
            /* what the executor allocated is what it planned and what the simulator charges */
            assert_true(allocated == planned.device + planned.host);
            assert_true(r.memory.device == planned.device && r.memory.host == planned.host);
            if (k == 0 && g == 1) host_memory[v] = r.memory.host;
            for (int kind = 0; kind < STORE_MANIFEST; kind++) {
                const uint64_t rd = after.bytes_read[kind] - before.bytes_read[kind];
                const uint64_t wr = after.bytes_written[kind] - before.bytes_written[kind];
                if (rd != r.bytes_read[kind] || wr != r.bytes_written[kind])
                    fprintf(stderr, "%s grads %s: %s: executor %llu read / %llu written, simulator %llu / %llu\n",
                            k ? "horizontal" : "vertical", g ? "ssd" : "host", store_kind_name((store_kind)kind),
                            (unsigned long long)rd, (unsigned long long)wr, (unsigned long long)r.bytes_read[kind],
                            (unsigned long long)r.bytes_written[kind]);
                assert_true(rd == r.bytes_read[kind] && wr == r.bytes_written[kind]);
            }
            assert_true(r.bytes_read[STORE_WEIGHTS] && r.bytes_written[STORE_MASTER] && r.bytes_read[STORE_ACTIVATIONS]);
            assert_true(!g || (r.bytes_read[STORE_GRADS] && r.bytes_written[STORE_GRADS]));
            /* and the memory it reports is the executor's own accounting */
            layout_memory need;
            offload_memory_need(&oc, &need);
            assert_memory_equal(&need, &r.memory, sizeof need);
        }
    /* the larger segment grain costs the optimizer's slots more host memory, in both */
    assert_true(host_memory[1] > host_memory[0]);
    free(tok);
    omp_set_num_threads(threads);
}

/* The same per step as the executor's own count (offload_traffic_per_step),
 * over schedules, placements, alphas, clipping, precisions and M. */
static void test_bytes_match_offload_traffic(void **state) {
    (void)state;
    hw_desc hw = cpu_machine(1);
    const double alphas[] = {0.0, 0.3, 1.0};
    for (int k = 0; k < 2; k++)
        for (int pl = 1; pl < 16; pl++)
            for (int a = 0; a < 3; a++)
                for (int clip = 0; clip < 2; clip++)
                    for (int M = 1; M <= 4; M += 3) {
                        sim_config c = config("gpt2-tiny", 2, 32, M);
                        c.precision = (pl + a) % 2 ? GPT_MIXED_BF16 : GPT_FP32;
                        c.schedule = k ? SCHED_HORIZONTAL : SCHED_VERTICAL;
                        c.alpha = alphas[a];
                        c.clipping = clip;
                        c.place = placement_at(pl);
                        c.iterations = 1;
                        sim_result r;
                        layout_traffic t;
                        st_error err = {0};
                        assert_int_equal(sim_run(&hw, &c, &r, &err), ST_OK);
                        offload_config oc = sim_offload_config(&c);
                        assert_int_equal(offload_traffic_per_step(&oc, &t, &err), ST_OK);
                        for (int kind = 0; kind < STORE_KIND_COUNT; kind++)
                            if (t.read[kind] != r.bytes_read[kind] || t.written[kind] != r.bytes_written[kind]) {
                                fprintf(stderr, "k %d placement %d alpha %g clip %d M %d %s: executor %llu / %llu, "
                                        "simulator %llu / %llu\n", k, pl, c.alpha, clip, M,
                                        store_kind_name((store_kind)kind), (unsigned long long)t.read[kind],
                                        (unsigned long long)t.written[kind], (unsigned long long)r.bytes_read[kind],
                                        (unsigned long long)r.bytes_written[kind]);
                                fail();
                            }
                    }
}

static void test_deterministic(void **state) {
    (void)state;
    hw_desc hw = cpu_machine(2);
    /* overlapping AdamW and compute gains nothing (1/2 + 1/2 of the cores):
     * then nothing beats the roofline bound */
    hw.compute_slowdown = hw.optimizer_slowdown = 2.0;
    sim_config c = config("gpt2-mini", 2, 64, 3);
    c.precision = GPT_MIXED_BF16;
    c.place.weights = c.place.optim = c.place.acts = c.place.grads = 1;
    c.alpha = 0.3;
    c.optimizer_segment = 1 << 18;
    for (int k = 0; k < 2; k++) {
        c.schedule = k ? SCHED_HORIZONTAL : SCHED_VERTICAL;
        sim_result a, b;
        st_error err = {0};
        assert_int_equal(sim_run(&hw, &c, &a, &err), ST_OK);
        assert_int_equal(sim_run(&hw, &c, &b, &err), ST_OK);
        assert_memory_equal(&a, &b, sizeof a);
        /* the compute thread's time adds up, and so does the critical path */
        assert_close(a.compute_s + a.contention_s + a.wait_s, a.iter_s);
        double cp = 0;
        for (int i = 0; i < SIM_RESOURCE_COUNT; i++) cp += a.critical[i];
        assert_close(cp, a.iter_s);
        /* never faster than its roofline bound */
        sim_roofline rf;
        assert_int_equal(sim_roofline_bound(&hw, &c, &rf, &err), ST_OK);
        assert_true(a.iter_s >= rf.bound_s * (1 - 1e-9));
    }
}

static void test_roofline(void **state) {
    (void)state;
    hw_desc hw = cpu_machine(1);
    sim_config c = config("gpt2-tiny", 2, 32, 1);
    c.place.weights = c.place.optim = 1;
    sched_list l = {0};
    add(&l, TASK_LOAD_WEIGHTS, 1, -1, -1);
    add(&l, TASK_BLOCK_FORWARD, 1, 0, 0);
    add(&l, TASK_OPTIMIZE, 1, -1, -1);
    sim_roofline rf;
    assert_int_equal(sim_roofline_list(&hw, &c, &l, &rf, NULL), ST_OK);
    const double n = (double)gpt_unit_numel(&c.model, 1);
    const double io = (double)(read_bytes(&c, &l.tasks[0]) + read_bytes(&c, &l.tasks[2])) / 1e9 +
                      (double)written_bytes(&c, &l.tasks[2]) / 2e9;
    assert_close(rf.compute_s, task_s(&hw, &c, &l, 1));
    assert_close(rf.optimizer_s, n / 5e8);
    assert_close(rf.io_s, io);
    assert_close(rf.bound_s, fmax(rf.compute_s + rf.optimizer_s, io));
    assert_int_equal(rf.limit, io > rf.compute_s + rf.optimizer_s ? SIM_SSD : SIM_COMPUTE);
    sched_list_free(&l);
}

static void test_bad_input(void **state) {
    (void)state;
    hw_desc hw = cpu_machine(0);
    sim_config c = config("gpt2-tiny", 2, 32, 2);
    c.place.optim = 1;
    sim_result r;
    st_error err = {0};
    assert_int_equal(sim_run(&hw, &c, &r, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "ssd"));
    c.place.optim = 0;
    c.T = 100000;
    assert_int_equal(sim_run(&hw, &c, &r, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "context"));
    c.T = 32;
    hw.matmul_gflops = -1;
    assert_int_equal(sim_run(&hw, &c, &r, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "compute.matmul_gflops"));
    hw = cpu_machine(1);
    sched_list l = {0};
    add(&l, TASK_BLOCK_FORWARD, 7, 0, -1);   /* no such unit */
    const sched_list *lists[1] = {&l};
    assert_int_equal(sim_run_lists(&hw, &c, lists, 1, &r, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "unit 7"));
    l.tasks[0].unit = 1;
    l.tasks[0].deps[l.tasks[0].n_deps++] = 3;   /* a dependency on a later task */
    assert_int_equal(sim_run_lists(&hw, &c, lists, 1, &r, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "dependency"));
    sched_list_free(&l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compute_alone_is_the_sum),
        cmocka_unit_test(test_llama_block_flops),
        cmocka_unit_test(test_rates_by_rows),
        cmocka_unit_test(test_widen_at_its_own_rate),
        cmocka_unit_test(test_read_alone_is_bytes_over_bandwidth),
        cmocka_unit_test(test_prefetch_hides_a_shorter_read),
        cmocka_unit_test(test_saves_are_written_behind),
        cmocka_unit_test(test_weight_load_waits_for_the_optimizer),
        cmocka_unit_test(test_lanes_step_beside_each_other),
        cmocka_unit_test(test_backward_waits_for_a_gradient_buffer),
        cmocka_unit_test(test_optimizer_io_order_follows_the_disk),
        cmocka_unit_test(test_contention_slows_compute),
        cmocka_unit_test(test_transfers_slow_compute),
        cmocka_unit_test(test_compute_slows_transfers),
        cmocka_unit_test(test_store_cpu_work),
        cmocka_unit_test(test_weight_reads_vertical_vs_horizontal),
        cmocka_unit_test(test_bytes_match_the_executor),
        cmocka_unit_test(test_bytes_match_offload_traffic),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_roofline),
        cmocka_unit_test(test_bad_input),
    };
    if (getenv("SIM_TEST_FILTER")) cmocka_set_test_filter(getenv("SIM_TEST_FILTER"));   /* one test: its name */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
