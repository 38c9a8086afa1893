/* sim_testutil.h - what the simulator's tests share: a model configuration
 * with round defaults, a CPU machine with round numbers, hand-made task
 * lists, running one list, one task's time at full speed, a near-equality
 * for times, and the gradient buffers' case that both backends must time
 * alike. Header-only; include after cmocka.h. */
#ifndef STRATA_SIM_TESTUTIL_H
#define STRATA_SIM_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/sim.h"

static inline sim_config config(const char *model, int B, int T, int M) {
    sim_config c = sim_default_config();
    st_error err = {0};
    assert_int_equal(gpt_config_from_name(&c.model, model, &err), ST_OK);
    c.B = B;
    c.T = T;
    c.micro_batches = M;
    c.precision = GPT_FP32;   /* no bf16 widening: loads cost only their transfers */
    return c;
}

/* Appends a task to a hand-made list. */
static inline int add(sched_list *l, task_op op, int unit, int mb, int dep) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->tasks = realloc(l->tasks, sizeof *l->tasks * (size_t)l->cap);
        assert_non_null(l->tasks);
    }
    l->tasks[l->n] = (sched_task){.op = op, .unit = unit, .mb = mb};
    if (dep >= 0) l->tasks[l->n].deps[l->tasks[l->n].n_deps++] = dep;
    if (op == TASK_OPTIMIZE) l->tasks[l->n].hi = 1.0;
    return l->n++;
}

/* Runs one list alone. */
static inline sim_result run1(const hw_desc *hw, const sim_config *c, const sched_list *l) {
    sim_result r;
    st_error err = {0};
    const sched_list *lists[1] = {l};
    st_status s = sim_run_lists(hw, c, lists, 1, &r, &err);
    if (s != ST_OK) fprintf(stderr, "sim: %s\n", err.msg);
    assert_int_equal(s, ST_OK);
    return r;
}

/* Task i's time on the compute thread at full speed. */
static inline double task_s(const hw_desc *hw, const sim_config *c, const sched_list *l, int i) {
    sim_work w = sim_task_work(c, l, i);
    return sim_work_seconds(hw, &w);
}

/* A CPU machine with round numbers and one SSD path (or two). */
static inline hw_desc cpu_machine(int paths) {
    hw_desc hw;
    memset(&hw, 0, sizeof hw);
    snprintf(hw.name, sizeof hw.name, "test");
    hw.backend = HW_BACKEND_CPU;
    hw.matmul_gflops = 100;
    hw.head_matmul_gflops = 80;
    hw.attention_gflops = 20;
    hw.other_gbps = 10;
    hw.cores = 2;
    hw.n_ssd = paths;
    for (int p = 0; p < paths; p++)
        hw.ssd[p] = (hw_ssd){.read_gbps = 1.0 + p, .write_gbps = 2.0, .mixed_read_gbps = 0.5, .mixed_write_gbps = 0.8};
    hw.adamw_params_per_s = 5e8;
    hw.adamw_threads = 1;
    hw.compute_slowdown = 1.5;
    hw.optimizer_slowdown = 2.0;
    hw.device_bytes = hw.host_bytes = 64ull << 30;
    hw.devices_per_node = 1;
    return hw;
}

#define assert_close(a, b) assert_true(fabs((a) - (b)) <= 1e-9 * fabs(b) + 1e-15)

/* The executor's gradient buffers on machine hw (a slow SSD, compute and
 * AdamW not slowing each other, transfers other than the SSD's too fast
 * to count): six blocks' backward, each followed by its optimizer job, then
 * block 6's next weight load and forward. With the gradients in memory the
 * backward runs ahead and the load waits for the first job; with them on
 * the SSD each block takes one of the layout's block buffers, which its
 * job holds until done: with the default three, blocks 3, 2 and 1 wait for
 * the jobs of 6, 5 and 4; with six, none waits (as in memory). */
static inline void expect_backward_held_by_gradient_buffers(const hw_desc *hw) {
    assert_int_equal(LAYOUT_GRAD_BLOCK_BUFFERS, 3);   /* the times below count three, then six */
    assert_int_equal(LAYOUT_GRAD_BLOCK_BUFFERS_MORE, 6);
    sim_config c = config("gpt2-tiny", 1, 16, 1);
    c.model.n_layer = 6;
    c.place.optim = 1;
    sched_list l = {0};
    int step6 = -1;
    for (int u = 6; u >= 1; u--) {
        const int b = add(&l, TASK_BLOCK_BACKWARD, u, 0, -1);
        const int k = add(&l, TASK_OPTIMIZE, u, -1, b);
        if (u == 6) step6 = k;
    }
    const int load = add(&l, TASK_LOAD_WEIGHTS, 6, -1, step6);
    add(&l, TASK_BLOCK_FORWARD, 6, 0, load);
    const double b = task_s(hw, &c, &l, 0), w = task_s(hw, &c, &l, load), f = task_s(hw, &c, &l, load + 1);
    sched_list one = {0};   /* a job alone, and the load that waits for it: what the job takes */
    add(&one, TASK_LOAD_WEIGHTS, 6, -1, add(&one, TASK_OPTIMIZE, 6, -1, -1));
    for (int grads = 0; grads < 3; grads++) {
        c.place.grads = grads > 0;
        c.grad_buffers = grads == 2 ? LAYOUT_GRAD_BLOCK_BUFFERS_MORE : 0;
        const double J = run1(hw, &c, &one).iter_s - w;
        assert_true(J > 6 * b);
        const double t = run1(hw, &c, &l).iter_s;
        printf("  gradients %s: backward %.6f s, job %.4f s: %.4f s\n",
               grads == 0 ? "in memory" : grads == 1 ? "on the SSD" : "on the SSD, six buffers", b, J, t);
        if (grads != 1) assert_close(t, b + J + w + f);
        else assert_close(t, 2 * b + 3 * J + w + f);
    }
    sched_list_free(&one);
    sched_list_free(&l);
}

#endif
