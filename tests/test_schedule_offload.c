/* test_schedule_offload.c - the schedule executor against the in-memory
 * trainer: every schedule x placement (all in host memory, all on the SSD,
 * mixed) x alpha x clipping x precision ends with the same weights after
 * several steps (bit for bit for horizontal, whose gradient sums run in the
 * same order; within a stated bound for vertical, whose snake order sums
 * some gradients in another order), and each configuration is bit-for-bit
 * deterministic. Every configuration also runs on the checking backend
 * (strata/backend.h), whose device memory faults on any access that does
 * not go through the backend, and gives the CPU backend's bits; a direct
 * write into the executor's device buffers faults there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <unistd.h>

#include "death_testutil.h"
#include "schedule/offload_internal.h"   /* the executor's buffers, for the fault test */
#include "strata/backend.h"
#include "strata/offload.h"
#include "train_testutil.h"

enum { STEPS = 4 };

/* The small model of these tests, GPT-2's; or Llama's with grouped-query
 * attention and an untied head (a unit of its own, the fifth). */
static train_config small_config_arch(gpt_arch arch, gpt_precision p, float clip) {
    train_config tc = train_config_defaults();
    if (arch == GPT_ARCH_LLAMA)
        tc.model = (gpt_config){.arch = GPT_ARCH_LLAMA, .n_layer = 3, .n_head = 4, .n_kv_head = 2, .d_model = 32,
                                .d_ff = 48, .n_ctx = 16, .vocab_size = 97, .norm_eps = 1e-5f, .rope_theta = 10000.0f};
    else
        tc.model = (gpt_config){.n_layer = 3, .n_head = 2, .d_model = 32, .n_ctx = 16, .vocab_size = 97};
    st_error err = {0};
    assert_int_equal(gpt_config_check(&tc.model, &err), ST_OK);   /* fills the padded vocabulary */
    tc.B = 2;
    tc.T = 16;
    tc.micro_batches = 3;   /* odd: the snake turns on both ends */
    tc.precision = p;
    tc.recompute = 1;
    tc.clip = clip;      /* 0.05 clips every step here */
    tc.lr = (lr_schedule){.max_lr = 1e-2f, .min_lr = 1e-3f, .warmup = 1, .total = STEPS};
    /* Llama's: not 5, whose init leaves an embedding element where the
     * snake's other summation order, amplified by Adam's epsilon under a
     * clip scale of 0.05 and then by bf16 rounding, moves the weights by
     * 2e-5 (fp32: 3e-7); seeds 1-3 stay below 3e-7 in both precisions,
     * and with one micro-batch, where the orders agree, seed 5 too gives
     * the in-memory trainer's bits (test_one_micro_batch_bit_for_bit) */
    tc.seed = arch == GPT_ARCH_LLAMA ? 3 : 5;
    return tc;
}

static train_config small_config(gpt_precision p, float clip) { return small_config_arch(GPT_ARCH_GPT2, p, clip); }

static int32_t *make_tokens(const train_config *tc) { return test_tokens(tc, STEPS, 11); }


/* ALL_SSD: every kind of state in the store; MIXED: weights and checkpoints
 * there, optimizer state and gradients in memory; GRADS: gradients and
 * optimizer state there, weights and checkpoints in memory. The store's
 * segments are small here so that the optimizer's streaming runs through
 * several segments per part. */
enum test_placement { ALL_HOST, ALL_SSD, MIXED, GRADS, FRAC_HALF, FRAC_LAST, FRAC_WEIGHTS_MORE, FRAC_OPTIM_MORE,
                      FRAC_GRADS_MORE, PLACEMENTS };
static const char *test_placement_name[] = {"host", "ssd ", "mix ", "grad", "f1/2", "last", "f-w ", "f-o ", "f-g "};
/* Fractional placements (4 units, or 5 with Llama's head, and 4 checkpoint
 * indices): half of each kind; the last unit of each kind alone on the SSD
 * (Llama: the head unit, whose gradient buffer is the embedding unit's,
 * while the embedding unit's gradients stay in memory) and the first
 * block's input; memory keeping more units' weights than their master (fp32 then
 * needs its own copy of the compute weights) and embedding gradients only;
 * memory keeping more units' master than weights (fp32's compute weights
 * are the master) and the embedding unit's weights only; gradients on the
 * SSD for units whose optimizer state and weights are in memory (their
 * steps, all in memory, defer nothing: only the last unit's share is
 * deferred and parked). */
static const placement fractions[5] = {
    {.weights = 0.5, .optim = 0.5, .acts = 0.5, .grads = 0.5},
    {.weights = 0.2, .optim = 0.2, .acts = 0.25, .grads = 0.2},
    {.weights = 0.25, .optim = 0.75, .acts = 0.25, .grads = 0.75},
    {.weights = 0.75, .optim = 0.25, .acts = 0.75, .grads = 0.25},
    {.weights = 0, .optim = 0.25, .acts = 0, .grads = 0.75},
};

/* A fresh store directory for each run. */
static char store_dir[256];
static const char *store_paths[1] = {store_dir};

/* Places the state as pl says, in a fresh store directory (none for ALL_HOST). */
static void use_store(offload_config *oc, enum test_placement pl) {
    if (pl == ALL_HOST) return;
    snprintf(store_dir, sizeof store_dir, "%s/offload-store-XXXXXX", STRATA_BINARY_DIR);
    assert_non_null(mkdtemp(store_dir));
    oc->store_paths = store_paths;
    oc->n_store_paths = 1;
    oc->place.weights = oc->place.acts = pl == ALL_SSD || pl == MIXED;
    oc->place.optim = oc->place.grads = pl == ALL_SSD || pl == GRADS;
    if (pl >= FRAC_HALF) oc->place = fractions[pl - FRAC_HALF];
}

static void remove_store(enum test_placement pl) {
    if (pl == ALL_HOST) return;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", store_dir);
    assert_int_equal(system(cmd), 0);
}

/* How run_offload's optimizer jobs order their SSD I/O, and its block
 * gradient buffers (the defaults unless a test sets them). */
static opt_io_order run_opt_io = OPT_IO_PHASED;
static int run_grad_buffers = 0;

/* Runs the executor; returns its final (flushed) weights, fills losses. */
static float *run_offload(const train_config *tc, sched_kind k, double alpha, enum test_placement pl, const int32_t *tok,
                          float *losses) {
    offload_config oc = {.train = *tc, .schedule = k, .alpha = alpha, .opt_io = run_opt_io,
                         .grad_buffers = run_grad_buffers};
    use_store(&oc, pl);
    if (pl != ALL_HOST) oc.segment_elems = 2048;
    offload_trainer *t;
    st_error err = {0};
    st_status s0 = offload_trainer_create(&t, &oc, NULL, &err);
    if (s0 != ST_OK) printf("offload_trainer_create: %s\n", err.msg);
    assert_int_equal(s0, ST_OK);
    size_t per = (size_t)tc->micro_batches * tc->B * (tc->T + 1);
    for (int s = 0; s < STEPS; s++) {
        train_step_stats st;
        s0 = offload_trainer_step(t, tok + s * per, &st, &err);
        if (s0 != ST_OK) printf("offload_trainer_step %d: %s\n", s, err.msg);
        assert_int_equal(s0, ST_OK);
        losses[s] = st.loss;
    }
    assert_int_equal(offload_trainer_flush(t, &err), ST_OK);
    size_t n = gpt_num_params(&tc->model);
    float *w = malloc(n * sizeof *w);
    assert_int_equal(offload_trainer_read_params(t, w, &err), ST_OK);
    if (pl != ALL_HOST) {
        uint64_t rd, wr;
        offload_trainer_io_bytes(t, &rd, &wr);
        assert_true(rd > 0 && wr > 0);   /* the state really went through the store */
    }
    offload_trainer_free(t);
    remove_store(pl);
    return w;
}

static void test_matches_in_memory_trainer(void **state) {
    (void)state;
    const double alphas[] = {0.0, 0.25, 1.0};
    double worst_vertical = 0;
    for (int arch = 0; arch < 2; arch++)
    for (int p = 0; p < 2; p++) {
        for (int clip = 0; clip < 2; clip++) {
            train_config tc = small_config_arch((gpt_arch)arch, (gpt_precision)p, clip ? 0.05f : 0.0f);
            int32_t *tok = make_tokens(&tc);
            /* the reference: the in-memory trainer */
            trainer *ref;
            st_error err = {0};
            assert_int_equal(trainer_create(&ref, &tc, NULL, &err), ST_OK);
            float ref_loss[STEPS];
            size_t per = (size_t)tc.micro_batches * tc.B * (tc.T + 1), n = gpt_num_params(&tc.model);
            for (int s = 0; s < STEPS; s++) {
                train_step_stats st;
                assert_int_equal(trainer_step(ref, tok + s * per, &st, &err), ST_OK);
                ref_loss[s] = st.loss;
                if (clip) assert_true(st.grad_norm > 0.05f);   /* clipping is exercised */
            }
            for (int k = 0; k < 2; k++) {
                for (int a = 0; a < 3; a++) for (int pl = 0; pl < PLACEMENTS; pl++) {
                    if (pl >= FRAC_HALF && a != 1) continue;   /* fractions: one alpha, for the test's time */
                    /* Llama: alpha 0.25, and of the fractions half of each kind and the head alone */
                    if (arch == GPT_ARCH_LLAMA && (a != 1 || pl > FRAC_LAST)) continue;
                    float losses[STEPS], check_losses[STEPS];
                    float *w = run_offload(&tc, (sched_kind)k, alphas[a], (enum test_placement)pl, tok, losses);
                    /* the checking backend: device memory the executor may touch only through the
                     * backend (any direct access faults); the same code, so the same bits */
                    train_config tc_check = tc;
                    tc_check.backend = compute_backend_check();
                    float *w_check = run_offload(&tc_check, (sched_kind)k, alphas[a], (enum test_placement)pl, tok,
                                                 check_losses);
                    assert_memory_equal(w_check, w, n * sizeof(float));
                    assert_memory_equal(check_losses, losses, sizeof losses);
                    free(w_check);
                    double d = rel_diff(w, trainer_params(ref), n);
                    printf("  %s %s %s %s alpha %.2f clip %d: weights rel diff %.2e, losses %.6f..%.6f (ref %.6f..%.6f)\n",
                           gpt_arch_name((gpt_arch)arch), k ? "horizontal" : "vertical  ", test_placement_name[pl], p ? "mixed" : "fp32 ", alphas[a], clip,
                           d, losses[0], losses[STEPS - 1], ref_loss[0], ref_loss[STEPS - 1]);
                    /* the first forward is the same computation: the same loss bits */
                    assert_memory_equal(&losses[0], &ref_loss[0], sizeof(float));
                    if (k == SCHED_HORIZONTAL) {
                        assert_memory_equal(w, trainer_params(ref), n * sizeof(float));
                        assert_memory_equal(losses, ref_loss, sizeof losses);
                    } else {
                        /* Rounding from another summation order, after 4 AdamW
                         * steps: measured up to ~1e-6 here; bound 1e-5. */
                        if (d > worst_vertical) worst_vertical = d;
                        assert_true(d < 1e-5);
                        for (int s = 0; s < STEPS; s++) assert_true(fabsf(losses[s] - ref_loss[s]) < 1e-5f * ref_loss[s]);
                    }
                    free(w);
                }
            }
            trainer_free(ref);
            free(tok);
        }
    }
    printf("  worst vertical weights difference: %.2e\n", worst_vertical);
}

/* With one micro-batch the two trainers sum every gradient in the same
 * order, so whatever the executor does around the math (deferring steps,
 * moving state through the store, a head of its own) shows bit for bit:
 * vertical equals the in-memory trainer exactly, both architectures, fp32
 * and mixed, with and without clipping, with three block gradient buffers
 * or six. */
static void test_one_micro_batch_bit_for_bit(void **state) {
    (void)state;
    static const enum test_placement pls[] = {ALL_HOST, ALL_SSD, FRAC_HALF, FRAC_LAST, FRAC_GRADS_MORE};
    for (int arch = 0; arch < 2; arch++)
        for (int p = 0; p < 2; p++)
            for (int clip = 0; clip < 2; clip++) {
                train_config tc = small_config_arch((gpt_arch)arch, (gpt_precision)p, clip ? 0.05f : 0.0f);
                tc.micro_batches = 1;
                tc.seed = 5;   /* the init the three-micro-batch test avoids for Llama */
                int32_t *tok = make_tokens(&tc);
                trainer *ref;
                st_error err = {0};
                assert_int_equal(trainer_create(&ref, &tc, NULL, &err), ST_OK);
                float ref_loss[STEPS];
                const size_t per = (size_t)tc.B * (tc.T + 1), n = gpt_num_params(&tc.model);
                for (int s = 0; s < STEPS; s++) {
                    train_step_stats st;
                    assert_int_equal(trainer_step(ref, tok + s * per, &st, &err), ST_OK);
                    ref_loss[s] = st.loss;
                }
                for (size_t i = 0; i < sizeof pls / sizeof pls[0]; i++)
                    for (int more = 0; more < 2; more++) {   /* the backward further ahead: the same bits */
                        if (more && pls[i] != ALL_SSD && pls[i] != FRAC_HALF && pls[i] != FRAC_GRADS_MORE) continue;
                        run_grad_buffers = more ? LAYOUT_GRAD_BLOCK_BUFFERS_MORE : 0;
                        float losses[STEPS];
                        float *w = run_offload(&tc, SCHED_VERTICAL, 0.25, pls[i], tok, losses);
                        run_grad_buffers = 0;
                        assert_memory_equal(w, trainer_params(ref), n * sizeof(float));
                        assert_memory_equal(losses, ref_loss, sizeof losses);
                        free(w);
                    }
                trainer_free(ref);
                free(tok);
            }
}

static void test_deterministic(void **state) {
    (void)state;
    train_config tc = small_config(GPT_MIXED_BF16, 0.05f);
    int32_t *tok = make_tokens(&tc);
    float l1[STEPS], l2[STEPS];
    float *a = run_offload(&tc, SCHED_VERTICAL, 0.25, ALL_SSD, tok, l1);
    float *b = run_offload(&tc, SCHED_VERTICAL, 0.25, ALL_SSD, tok, l2);
    assert_memory_equal(a, b, gpt_num_params(&tc.model) * sizeof(float));
    assert_memory_equal(l1, l2, sizeof l1);
    free(a);
    free(b);
    free(tok);
}

/* The order of the optimizer's SSD reads and writes changes the speed, not
 * the math: phased, interleaved and alternating runs agree bit for bit. */
static void test_optimizer_io_orders_agree(void **state) {
    (void)state;
    train_config tc = small_config(GPT_MIXED_BF16, 0);
    int32_t *tok = make_tokens(&tc);
    const size_t n = gpt_num_params(&tc.model);
    for (int pl = ALL_SSD; pl <= FRAC_HALF; pl += FRAC_HALF - ALL_SSD) {
        float ref_loss[STEPS], loss[STEPS];
        run_opt_io = OPT_IO_PHASED;
        float *ref = run_offload(&tc, SCHED_VERTICAL, 0.25, (enum test_placement)pl, tok, ref_loss);
        for (int o = OPT_IO_INTERLEAVED; o < OPT_IO_ORDERS; o++) {
            run_opt_io = (opt_io_order)o;
            float *w = run_offload(&tc, SCHED_VERTICAL, 0.25, (enum test_placement)pl, tok, loss);
            assert_memory_equal(w, ref, n * sizeof(float));
            assert_memory_equal(loss, ref_loss, sizeof loss);
            free(w);
        }
        free(ref);
    }
    run_opt_io = OPT_IO_PHASED;
    free(tok);
}

/* Forward-only evaluation through the store gives the in-memory trainer's
 * loss, on either backend. */
static void eval_matches(const compute_backend *be) {
    train_config tc = small_config(GPT_MIXED_BF16, 0.05f);
    int32_t *tok = make_tokens(&tc);
    st_error err = {0};
    trainer *ref;
    assert_int_equal(trainer_create(&ref, &tc, NULL, &err), ST_OK);
    offload_config oc = {.train = tc, .schedule = SCHED_HORIZONTAL, .alpha = 0.25};
    use_store(&oc, MIXED);
    oc.place.optim = 1;   /* weights, optimizer state and checkpoints on the SSD */
    oc.train.backend = be;
    offload_trainer *t;
    assert_int_equal(offload_trainer_create(&t, &oc, NULL, &err), ST_OK);
    size_t per = (size_t)tc.micro_batches * tc.B * (tc.T + 1);
    for (int s = 0; s < 2; s++) {
        train_step_stats st;
        assert_int_equal(trainer_step(ref, tok + s * per, &st, &err), ST_OK);
        assert_int_equal(offload_trainer_step(t, tok + s * per, &st, &err), ST_OK);
        float a = NAN, b = NAN;
        assert_int_equal(trainer_eval(ref, tok, tc.B, tc.T, &a, &err), ST_OK);
        assert_int_equal(offload_trainer_eval(t, tok, tc.B, tc.T, &b, &err), ST_OK);
        assert_memory_equal(&a, &b, sizeof a);
    }
    float bad;
    assert_int_equal(offload_trainer_eval(t, tok, tc.B + 1, tc.T, &bad, &err), ST_EINVAL);
    assert_int_equal(offload_trainer_steps_done(t), 2);
    offload_trainer_free(t);
    trainer_free(ref);
    free(tok);
    remove_store(MIXED);
}

static void test_eval_matches(void **state) {
    (void)state;
    eval_matches(compute_backend_cpu());
    eval_matches(compute_backend_check());
}

/* On a backend whose device is not host memory, the plan adds the device
 * copies (a unit's weights, a block's input and output, a unit's
 * gradients) and host staging for tokens, moves the I/O buffers to the
 * host, and the executor allocates exactly that plan; the CPU backend's
 * plan has none of them. Mixed precision on the CPU backend initializes
 * each unit in the buffer that widens weights to f32 (host memory there),
 * so its plan has no initialization unit of its own; a separate device's
 * widening buffer is on the device, so its plan keeps one. */
static void test_separate_device_plan(void **state) {
    (void)state;
    for (int pl = ALL_HOST; pl < PLACEMENTS; pl++) {
        train_config tc = small_config(GPT_MIXED_BF16, 0);
        offload_config oc = {.train = tc, .schedule = SCHED_VERTICAL, .alpha = 0.25, .segment_elems = 2048};
        use_store(&oc, (enum test_placement)pl);
        run_layout cpu, sep;
        st_error err = {0};
        assert_int_equal(offload_layout(&oc, &cpu, &err), ST_OK);
        oc.train.backend = compute_backend_check();
        assert_int_equal(offload_layout(&oc, &sep, &err), ST_OK);
        const layout_buffer_id extra[] = {BUF_UNIT_DEVICE, BUF_ACT_DEVICE, BUF_GRAD_DEVICE, BUF_TOKENS_HOST};
        for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
            assert_int_equal(cpu.buf[extra[i]].count, 0);
            assert_true(sep.buf[extra[i]].count > 0);
        }
        assert_int_equal(cpu.buf[BUF_INIT_UNIT].count, 0);
        assert_int_equal(sep.buf[BUF_INIT_UNIT].count, 1);
        assert_int_equal(sep.buf[BUF_ACT_IO].tier, LAYOUT_HOST);
        assert_int_equal(sep.buf[BUF_WEIGHTS_IO].tier, LAYOUT_HOST);
        assert_true(sep.memory.device > cpu.memory.device - cpu.buf[BUF_ACT_IO].count * cpu.buf[BUF_ACT_IO].bytes -
                                            cpu.buf[BUF_WEIGHTS_IO].count * cpu.buf[BUF_WEIGHTS_IO].bytes);
        offload_trainer *t;
        assert_int_equal(offload_trainer_create(&t, &oc, NULL, &err), ST_OK);
        layout_memory planned;
        uint64_t allocated;
        offload_trainer_memory(t, &planned, &allocated);
        assert_int_equal(planned.device + planned.host, sep.memory.device + sep.memory.host);
        assert_int_equal(allocated, planned.device + planned.host);
        offload_trainer_free(t);
        layout_free(&cpu);
        layout_free(&sep);
        remove_store((enum test_placement)pl);
    }
}

/* The executor's device buffers are the backend's: on the checking backend
 * a direct host write into one (the tokens, a checkpoint's device copy, the
 * gradients on the device, the loaded weights), as a bug in the executor
 * would make, faults, while a write into its host staging does not; the
 * executor's own steps on the same buffers go on working. */
static void write_f32(void *p) { ((volatile float *)p)[0] = 1.0f; }
static void write_i32(void *p) { ((volatile int32_t *)p)[0] = 1; }

static void test_direct_device_write_faults(void **state) {
    (void)state;
    train_config tc = small_config(GPT_MIXED_BF16, 0.05f);
    tc.backend = compute_backend_check();
    offload_config oc = {.train = tc, .schedule = SCHED_VERTICAL, .alpha = 0.25};
    offload_trainer *t;
    st_error err = {0};
    assert_int_equal(offload_trainer_create(&t, &oc, NULL, &err), ST_OK);
    int32_t *tok = make_tokens(&tc);
    const size_t per = (size_t)tc.micro_batches * tc.B * (tc.T + 1);
    assert_int_equal(offload_trainer_step(t, tok, NULL, &err), ST_OK);
    char msg[512];
    assert_int_equal(signal_of_child(write_i32, t->inputs, msg, sizeof msg), SIGSEGV);
    assert_int_equal(signal_of_child(write_i32, t->targets, msg, sizeof msg), SIGSEGV);
    assert_int_equal(signal_of_child(write_f32, t->act_dev[0], msg, sizeof msg), SIGSEGV);
    assert_int_equal(signal_of_child(write_f32, t->act_dev[1], msg, sizeof msg), SIGSEGV);
    assert_int_equal(signal_of_child(write_f32, t->grad_dev, msg, sizeof msg), SIGSEGV);
    assert_int_equal(signal_of_child(write_f32, t->dact, msg, sizeof msg), SIGSEGV);
    assert_int_equal(signal_of_child(write_f32, (void *)t->weights, msg, sizeof msg), SIGSEGV);
    assert_int_equal(signal_of_child(write_i32, t->tokens_host[0], msg, sizeof msg), 0);   /* host memory */
    assert_int_equal(offload_trainer_step(t, tok + per, NULL, &err), ST_OK);
    free(tok);
    offload_trainer_free(t);
}

/* Budgets: what the executor needs is computed up front; placing state on
 * the SSD shrinks the host share; too small a budget is refused with what
 * it needs, a budget of exactly that is accepted. */
static void test_memory_budgets(void **state) {
    (void)state;
    offload_config host = {.train = small_config(GPT_MIXED_BF16, 0), .schedule = SCHED_VERTICAL, .alpha = 0.25};
    host.train.model.n_layer = 8;   /* more blocks than gradient buffers */
    offload_config ssd = host;
    ssd.place.weights = ssd.place.optim = ssd.place.acts = ssd.place.grads = 1;
    ssd.segment_elems = 2048;   /* the optimizer streams through 3 segment slots, not the whole state */
    layout_memory mh, ms;
    offload_memory_need(&host, &mh);
    offload_memory_need(&ssd, &ms);
    size_t P = gpt_num_params(&host.train.model);
    assert_true(mh.optimizer_state == 12 * P);          /* master, m, v in memory */
    assert_true(ms.optimizer_state < mh.optimizer_state);
    assert_true(ms.checkpoints == 0 && mh.checkpoints > 0);
    assert_true(mh.gradients == 4 * P && ms.gradients < mh.gradients);
    assert_true(ms.host < mh.host);
    assert_true(mh.host == mh.optimizer_state + mh.compute_weights + mh.checkpoints + mh.gradients + mh.staging);
    st_error err = {0};
    offload_trainer *t;
    host.mem_host = mh.host - 1;
    assert_int_equal(offload_trainer_create(&t, &host, NULL, &err), ST_ENOMEM);
    assert_non_null(strstr(err.msg, "host budget"));
    host.mem_host = 0;
    host.mem_device = 4096;
    assert_int_equal(offload_trainer_create(&t, &host, NULL, &err), ST_ENOMEM);
    assert_non_null(strstr(err.msg, "device budget"));
    host.mem_device = mh.device;
    host.mem_host = mh.host;
    assert_int_equal(offload_trainer_create(&t, &host, NULL, &err), ST_OK);
    offload_trainer_free(t);

    /* a fraction of a kind on the SSD: memory keeps exactly the rest, unit by
     * unit (9 units: the embedding unit and 8 blocks), so that host memory
     * falls with every unit moved */
    const int n = host.train.model.n_layer + 1;
    for (int kind = 0; kind < PLACE_KINDS; kind++) {
        uint64_t last_host = 0, last_line = 0;
        for (int k = 0; k <= n; k++) {
            offload_config oc = host;
            oc.mem_host = oc.mem_device = 0;
            placement_set_share(&oc.place, (place_kind)kind, (double)k / n);
            assert_int_equal(placement_units(oc.place, (place_kind)kind, n), k);
            layout_memory m;
            offload_memory_need(&oc, &m);
            const size_t kept = k == n ? 0 : gpt_unit_offset(&oc.train.model, n - k);   /* units 0..n-k-1 */
            const uint64_t line = kind == PLACE_OPTIM ? m.optimizer_state : kind == PLACE_GRADS ? m.gradients
                                : kind == PLACE_ACTS ? m.checkpoints : m.compute_weights;
            if (kind == PLACE_OPTIM && k < n) assert_true(line >= 12 * (uint64_t)kept);
            if (kind == PLACE_WEIGHTS) assert_true(line == 2 * (uint64_t)kept);   /* bf16 */
            if (kind == PLACE_ACTS) assert_true(line == (uint64_t)(n - k) * (mh.checkpoints / (uint64_t)n));
            /* each unit moved frees memory; but the embedding unit's gradients,
             * last to move, still need a buffer of their size to accumulate in */
            if (k > 1 && !(kind == PLACE_GRADS && k == n)) {
                if (m.host >= last_host) printf("  kind %d, %d units on the SSD: host %llu >= %llu\n", kind, k,
                                                (unsigned long long)m.host, (unsigned long long)last_host);
                assert_true(m.host < last_host);
                assert_true(line < last_line);
            }
            last_host = m.host, last_line = line;
        }
    }
}

/* offload_traffic_per_step predicts, byte for byte, what a steady
 * iteration moves through the store, for each schedule and placement. */
static void test_traffic_estimate_is_exact(void **state) {
    (void)state;
    for (int arch = 0; arch < 2; arch++) {   /* GPT-2; Llama with its head in a unit of its own */
    train_config tc = small_config_arch((gpt_arch)arch, GPT_MIXED_BF16, 0);
    int32_t *tok = make_tokens(&tc);
    const size_t per = (size_t)tc.micro_batches * tc.B * (tc.T + 1);
    for (int k = 0; k < 2; k++)
        for (int pl = ALL_SSD; pl < PLACEMENTS; pl++) {
            /* every order of the optimizer's I/O moves the planned bytes */
            offload_config oc = {.train = tc, .schedule = (sched_kind)k, .alpha = 0.25, .segment_elems = 2048,
                                 .opt_io = (opt_io_order)((pl + k) % OPT_IO_ORDERS),
                                 .grad_buffers = pl % 2 ? LAYOUT_GRAD_BLOCK_BUFFERS_MORE : 0};
            use_store(&oc, (enum test_placement)pl);
            layout_traffic want;
            st_error err = {0};
            assert_int_equal(offload_traffic_per_step(&oc, &want, &err), ST_OK);
            assert_true(want.total_read > 0 && want.total_written > 0);
            offload_trainer *t;
            assert_int_equal(offload_trainer_create(&t, &oc, NULL, &err), ST_OK);
            offload_stats before, after;
            for (int s = 0; s < 2; s++) {
                assert_int_equal(offload_trainer_step(t, tok + s * per, NULL, &err), ST_OK);
                assert_int_equal(offload_trainer_sync(t, &err), ST_OK);
                if (s == 0) offload_trainer_stats(t, &before);
            }
            offload_trainer_stats(t, &after);
            for (int kind = 0; kind < STORE_KIND_COUNT; kind++) {
                if (kind == STORE_MANIFEST) continue;
                assert_int_equal(after.bytes_read[kind] - before.bytes_read[kind], want.read[kind]);
                assert_int_equal(after.bytes_written[kind] - before.bytes_written[kind], want.written[kind]);
            }
            offload_trainer_free(t);
            remove_store((enum test_placement)pl);
        }
    free(tok);
    }
}

/* The stats add up (docs/ARCHITECTURE.md, "What a run prints"): the
 * compute thread's parts are disjoint parts of the steps' wall time, the
 * worker's SSD waits part of its SSD lane's busy time, its host lane busy
 * exactly where some unit's state is all in memory; what a run does between steps
 * (evaluating, reading the weights back, committing) changes none of them;
 * the bytes are training's alone, the steps times the traffic planned per
 * step; the executor allocates its plan (three block gradient buffers or
 * six). */
static void test_stats_add_up(void **state) {
    (void)state;
    train_config tc = small_config(GPT_MIXED_BF16, 0);
    int32_t *tok = make_tokens(&tc);
    const size_t per = (size_t)tc.micro_batches * tc.B * (tc.T + 1);
    float *w = malloc(gpt_num_params(&tc.model) * sizeof *w);
    for (int k = 0; k < 2; k++)
        for (int pl = ALL_SSD; pl < PLACEMENTS; pl++) {
            /* every order of the optimizer's I/O moves the planned bytes */
            offload_config oc = {.train = tc, .schedule = (sched_kind)k, .alpha = 0.25, .segment_elems = 2048,
                                 .opt_io = (opt_io_order)((pl + k) % OPT_IO_ORDERS)};
            use_store(&oc, (enum test_placement)pl);
            layout_traffic want;
            st_error err = {0};
            assert_int_equal(offload_traffic_per_step(&oc, &want, &err), ST_OK);
            offload_trainer *t;
            assert_int_equal(offload_trainer_create(&t, &oc, NULL, &err), ST_OK);
            layout_memory planned;
            uint64_t allocated;
            offload_trainer_memory(t, &planned, &allocated);
            assert_true(allocated == planned.device + planned.host);
            double first_step_s = 0;
            for (int s = 0; s < STEPS; s++) {
                assert_int_equal(offload_trainer_step(t, tok + s * per, NULL, &err), ST_OK);
                if (s == 0) {   /* the drive's counters start with the second step */
                    offload_stats one;
                    offload_trainer_stats(t, &one);
                    first_step_s = one.step_s;
                    io_path_counters io[STORE_MAX_PATHS];
                    double in_steps = -1;
                    assert_int_equal(offload_trainer_path_io(t, io, &in_steps), 1);
                    assert_true(in_steps == 0 && io[0].bytes_read == 0 && io[0].bytes_written == 0);
                }
                /* the deferred work is training's; then nothing of it is in flight */
                assert_int_equal(offload_trainer_flush(t, &err), ST_OK);
                assert_int_equal(offload_trainer_sync(t, &err), ST_OK);
                offload_stats before, after;
                offload_trainer_stats(t, &before);
                float loss;
                assert_int_equal(offload_trainer_eval(t, tok, tc.B, tc.T, &loss, &err), ST_OK);
                assert_int_equal(offload_trainer_read_params(t, w, &err), ST_OK);
                assert_int_equal(offload_trainer_commit(t, "step", 4, &err), ST_OK);
                offload_trainer_stats(t, &after);
                assert_memory_equal(&before, &after, sizeof before);
            }
            offload_stats st;
            offload_trainer_stats(t, &st);
            assert_int_equal(st.steps, STEPS);
            assert_true(st.compute_s > 0 && st.compute_io_s >= 0 && st.optimizer_wait_s >= 0);
            assert_true(st.compute_s + st.compute_io_s + st.optimizer_wait_s <= st.step_s);
            assert_true(st.optimizer_s > 0 && st.worker_io_s >= 0 && st.worker_io_s <= st.optimizer_s);
            /* the host lane steps the units whose weights and optimizer state are all in memory */
            if (pl == ALL_SSD || pl == MIXED || pl == GRADS) assert_true(st.optimizer_host_s == 0);
            if (pl == FRAC_HALF || pl == FRAC_LAST) assert_true(st.optimizer_host_s > 0);
            uint64_t rd = 0, wr = 0;
            for (int kind = 0; kind < STORE_KIND_COUNT; kind++) {
                assert_int_equal(st.bytes_read[kind], STEPS * want.read[kind]);
                assert_int_equal(st.bytes_written[kind], STEPS * want.written[kind]);
                rd += st.bytes_read[kind], wr += st.bytes_written[kind];
            }
            /* the drive's own counters within the steps after the first: at most
             * those steps' training bytes (the deferred shares flushed between
             * steps, evaluations and commits are outside them), busy within them */
            io_path_counters io[STORE_MAX_PATHS];
            double in_steps = 0;
            assert_int_equal(offload_trainer_path_io(t, io, &in_steps), 1);
            assert_true(fabs(in_steps - (st.step_s - first_step_s)) < 1e-9);
            assert_true(io[0].bytes_read <= rd / STEPS * (STEPS - 1) && io[0].bytes_written <= wr / STEPS * (STEPS - 1));
            if (pl == ALL_SSD) assert_true(io[0].bytes_read > 0 && io[0].read_busy_s > 0);   /* the forward's weights */
            assert_true(io[0].read_busy_s <= in_steps && io[0].write_busy_s <= in_steps);
            assert_true(io[0].both_busy_s <= io[0].read_busy_s && io[0].both_busy_s <= io[0].write_busy_s);
            offload_trainer_free(t);
            remove_store((enum test_placement)pl);
        }
    free(w);
    free(tok);
}

static void test_bad_placements_refused(void **state) {
    (void)state;
    offload_config oc = {.train = small_config(GPT_FP32, 0), .schedule = SCHED_VERTICAL, .place.grads = 1};
    offload_trainer *t;
    st_error err = {0};
    assert_int_equal(offload_trainer_create(&t, &oc, NULL, &err), ST_EINVAL);   /* no store directory */
    assert_non_null(strstr(err.msg, "store directory"));
    oc = (offload_config){.train = small_config(GPT_FP32, 0), .schedule = SCHED_VERTICAL, .place.acts = 1};
    assert_int_equal(offload_trainer_create(&t, &oc, NULL, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "store directory"));
    oc = (offload_config){.train = small_config(GPT_FP32, 0), .schedule = SCHED_VERTICAL, .segment_elems = 1000};
    assert_int_equal(offload_trainer_create(&t, &oc, NULL, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "2048"));
    const int bad_buffers[2] = {LAYOUT_GRAD_BLOCK_BUFFERS - 1, LAYOUT_GRAD_BUFFERS};
    for (int i = 0; i < 2; i++) {
        oc = (offload_config){.train = small_config(GPT_FP32, 0), .schedule = SCHED_VERTICAL,
                              .grad_buffers = bad_buffers[i]};
        assert_int_equal(offload_trainer_create(&t, &oc, NULL, &err), ST_EINVAL);
        assert_non_null(strstr(err.msg, "block gradient buffers"));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_in_memory_trainer),
        cmocka_unit_test(test_one_micro_batch_bit_for_bit),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_optimizer_io_orders_agree),
        cmocka_unit_test(test_eval_matches),
        cmocka_unit_test(test_separate_device_plan),
        cmocka_unit_test(test_direct_device_write_faults),
        cmocka_unit_test(test_memory_budgets),
        cmocka_unit_test(test_traffic_estimate_is_exact),
        cmocka_unit_test(test_stats_add_up),
        cmocka_unit_test(test_bad_placements_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
