/* test_schedule_resume.c - commits and resume (strata/checkpoint.h,
 * offload_config.resume_paths): a run that commits at step K, goes on, dies
 * and resumes from its store continues bit for bit as the run that never
 * stopped, for both schedules, alpha, clipping, precisions and placements,
 * resumed in place or into other directories and into another placement;
 * the in-memory trainer resumes the same way; a resume that the store's
 * layout cannot serve is refused with a clear message; and an I/O error or
 * a full disk in the middle of a step stops that step with an error that
 * names it while the last commit stays loadable. */
#define _GNU_SOURCE   /* nftw in store_testutil.h */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "store_testutil.h"
#include "strata/offload.h"
#include "train_testutil.h"

enum { STEPS = 5, COMMIT_AT = 2 };

static train_config small_config(gpt_precision p, float clip) {
    train_config tc = train_config_defaults();
    tc.model = (gpt_config){.n_layer = 2, .n_head = 2, .d_model = 32, .n_ctx = 16, .vocab_size = 97};
    st_error err = {0};
    assert_int_equal(gpt_config_check(&tc.model, &err), ST_OK);
    tc.B = 2;
    tc.T = 16;
    tc.micro_batches = 3;
    tc.precision = p;
    tc.clip = clip;
    tc.lr = (lr_schedule){.max_lr = 1e-2f, .min_lr = 1e-3f, .warmup = 1, .total = STEPS};
    tc.seed = 7;
    return tc;
}

static int32_t *make_tokens(const train_config *tc) { return test_tokens(tc, STEPS, 3); }

static size_t step_tokens(const train_config *tc) { return (size_t)tc->micro_batches * tc->B * (tc->T + 1); }

/* Placements: what lives on the SSD (weights, optim, acts, grads). */
typedef struct named_placement {
    placement place;
    const char *name;
} named_placement;
static const named_placement HOST = {{0, 0, 0, 0}, "host"}, ALL_SSD = {{1, 1, 1, 1}, "ssd"},
                             MIXED = {{1, 0, 1, 0}, "mixed"}, GRADS = {{0, 1, 0, 1}, "grads+optim"},
                             /* fractions of 4 units and 4 checkpoint indices */
                             HALF = {{0.5, 0.5, 0.5, 0.5}, "half of each"},
                             SKEWED = {{0.25, 0.75, 0.75, 0.25}, "weights=0.25,optim=0.75,acts=0.75,grads=0.25"};

static offload_config make_config(const train_config *tc, sched_kind k, double alpha, named_placement pl,
                                  const char *const *paths) {
    offload_config oc = {.train = *tc, .schedule = k, .alpha = alpha, .place = pl.place,
                         .store_paths = paths, .n_store_paths = 1, .segment_elems = 2048};
    return oc;
}

static void commit_step(offload_trainer *t) {
    st_error err = {0};
    char meta[32];
    int n = snprintf(meta, sizeof meta, "%ld", offload_trainer_steps_done(t));
    assert_int_equal(offload_trainer_commit(t, meta, (size_t)n, &err), ST_OK);
}

/* The run that never stops (it commits at COMMIT_AT as the others do): its
 * losses, and its final weights. */
static float *run_straight(offload_config oc, const int32_t *tok, float *losses) {
    st_error err = {0};
    offload_trainer *t;
    assert_int_equal(offload_trainer_create(&t, &oc, NULL, &err), ST_OK);
    for (int s = 0; s < STEPS; s++) {
        train_step_stats st;
        assert_int_equal(offload_trainer_step(t, tok + s * step_tokens(&oc.train), &st, &err), ST_OK);
        losses[s] = st.loss;
        if (s + 1 == COMMIT_AT) commit_step(t);
    }
    assert_int_equal(offload_trainer_flush(t, &err), ST_OK);
    float *w = malloc(gpt_num_params(&oc.train.model) * sizeof *w);
    assert_int_equal(offload_trainer_read_params(t, w, &err), ST_OK);
    offload_trainer_free(t);
    return w;
}

static void clear_dir(const char *dir) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -f '%s'/strata-store.*", dir);
    assert_int_equal(system(cmd), 0);
}

/* Commits at COMMIT_AT, runs one step more (lost), dies; resumes with
 * config `to` from the first run's store and runs to the end. Losses after
 * the commit and the final weights must be the straight run's, bit for bit. */
static void crash_and_resume(offload_config from, offload_config to, const int32_t *tok, const float *ref_losses,
                             const float *ref_w, const char *what) {
    st_error err = {0};
    offload_trainer *t;
    assert_int_equal(offload_trainer_create(&t, &from, NULL, &err), ST_OK);
    for (int s = 0; s <= COMMIT_AT; s++) {
        train_step_stats st;
        assert_int_equal(offload_trainer_step(t, tok + s * step_tokens(&from.train), &st, &err), ST_OK);
        if (s + 1 == COMMIT_AT) commit_step(t);
    }
    offload_trainer_free(t);   /* the step after the commit is lost, as in a crash */
    to.resume_paths = from.store_paths;
    to.n_resume_paths = from.n_store_paths;
    to.resume_steps = COMMIT_AT;
    if (strcmp(to.store_paths[0], from.store_paths[0]) != 0) clear_dir(to.store_paths[0]);
    if (offload_trainer_create(&t, &to, NULL, &err) != ST_OK) fail_msg("%s: resume failed: %s", what, err.msg);
    assert_int_equal(offload_trainer_steps_done(t), COMMIT_AT);
    for (int s = COMMIT_AT; s < STEPS; s++) {
        train_step_stats st;
        assert_int_equal(offload_trainer_step(t, tok + s * step_tokens(&to.train), &st, &err), ST_OK);
        if (memcmp(&st.loss, &ref_losses[s], sizeof(float)) != 0)
            fail_msg("%s: step %d loss %.9g, the uninterrupted run's %.9g", what, s + 1, st.loss, ref_losses[s]);
    }
    assert_int_equal(offload_trainer_flush(t, &err), ST_OK);
    const size_t n = gpt_num_params(&to.train.model);
    float *w = malloc(n * sizeof *w);
    assert_int_equal(offload_trainer_read_params(t, w, &err), ST_OK);
    if (memcmp(w, ref_w, n * sizeof *w) != 0) fail_msg("%s: final weights differ from the uninterrupted run's", what);
    free(w);
    offload_trainer_free(t);
}

typedef struct resume_case {
    sched_kind kind;
    double alpha;
    float clip;
    gpt_precision precision;
    named_placement from, to;
    int other_dir;   /* resume into another store directory (the state is copied) */
} resume_case;

static void test_executor_resumes_bit_for_bit(void **state) {
    fixture *f = *state;
    const resume_case cases[] = {
        {SCHED_VERTICAL, 0.0, 0.0f, GPT_FP32, ALL_SSD, ALL_SSD, 0},
        {SCHED_VERTICAL, 0.5, 0.0f, GPT_MIXED_BF16, ALL_SSD, ALL_SSD, 0},
        {SCHED_VERTICAL, 0.0, 0.05f, GPT_FP32, HOST, HOST, 0},
        {SCHED_VERTICAL, 0.25, 0.0f, GPT_MIXED_BF16, MIXED, GRADS, 0},
        {SCHED_VERTICAL, 0.5, 0.0f, GPT_FP32, GRADS, HOST, 1},
        {SCHED_VERTICAL, 0.0, 0.05f, GPT_MIXED_BF16, HOST, ALL_SSD, 1},
        {SCHED_HORIZONTAL, 0.0, 0.05f, GPT_FP32, ALL_SSD, MIXED, 0},
        {SCHED_HORIZONTAL, 1.0, 0.0f, GPT_MIXED_BF16, GRADS, ALL_SSD, 1},
        {SCHED_HORIZONTAL, 0.25, 0.0f, GPT_FP32, HOST, GRADS, 0},
        /* fractional placements, and from and into them */
        {SCHED_VERTICAL, 0.25, 0.0f, GPT_MIXED_BF16, HALF, HALF, 0},
        {SCHED_VERTICAL, 0.25, 0.0f, GPT_MIXED_BF16, HALF, SKEWED, 0},
        {SCHED_VERTICAL, 0.0, 0.05f, GPT_FP32, SKEWED, HALF, 1},
        {SCHED_HORIZONTAL, 0.5, 0.0f, GPT_FP32, ALL_SSD, SKEWED, 0},
        {SCHED_HORIZONTAL, 0.0, 0.05f, GPT_MIXED_BF16, SKEWED, HOST, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const resume_case *c = &cases[i];
        train_config tc = small_config(c->precision, c->clip);
        int32_t *tok = make_tokens(&tc);
        float ref_losses[STEPS];
        clear_dir(f->paths[0]);
        float *ref_w = run_straight(make_config(&tc, c->kind, c->alpha, c->from, &f->paths[0]), tok, ref_losses);
        clear_dir(f->paths[0]);
        char what[160];
        snprintf(what, sizeof what, "%s alpha %.2f clip %g %s, %s -> %s%s",
                 c->kind == SCHED_VERTICAL ? "vertical" : "horizontal", c->alpha, c->clip,
                 gpt_precision_name(c->precision), c->from.name, c->to.name, c->other_dir ? " (another directory)" : "");
        crash_and_resume(make_config(&tc, c->kind, c->alpha, c->from, &f->paths[0]),
                         make_config(&tc, c->kind, c->alpha, c->to, &f->paths[c->other_dir ? 1 : 0]), tok, ref_losses,
                         ref_w, what);
        clear_dir(f->paths[0]);
        clear_dir(f->paths[1]);
        free(ref_w);
        free(tok);
    }
}

/* The in-memory trainer writes its state into a store and reads it back;
 * its resumed losses are the straight run's, and an executor (horizontal,
 * the same summation order) resumes from its commit too. */
static void test_memory_trainer_resumes(void **state) {
    fixture *f = *state;
    for (int p = 0; p < 2; p++) {
        train_config tc = small_config((gpt_precision)p, 0.05f);
        int32_t *tok = make_tokens(&tc);
        st_error err = {0};
        trainer *ref;
        assert_int_equal(trainer_create(&ref, &tc, NULL, &err), ST_OK);
        float ref_losses[STEPS];
        for (int s = 0; s < STEPS; s++) {
            train_step_stats st;
            assert_int_equal(trainer_step(ref, tok + s * step_tokens(&tc), &st, &err), ST_OK);
            ref_losses[s] = st.loss;
        }
        /* run to the commit, write the state, commit */
        trainer *t;
        assert_int_equal(trainer_create(&t, &tc, NULL, &err), ST_OK);
        for (int s = 0; s < COMMIT_AT; s++) assert_int_equal(trainer_step(t, tok + s * step_tokens(&tc), NULL, &err), ST_OK);
        store_config sc = store_default_config();
        sc.paths = &f->paths[2];
        sc.n_paths = 1;
        sc.mode = STORE_CREATE;
        store *st;
        assert_int_equal(store_open(&sc, &st, NULL, 0, &err), ST_OK);
        void *stage = st_alloc_aligned(4096, store_padded_bytes(2048 * 4));
        assert_int_equal(trainer_save_state(t, st, 2048, stage, &err), ST_OK);
        assert_int_equal(store_commit(st, &err), ST_OK);
        assert_int_equal(trainer_step(t, tok + COMMIT_AT * step_tokens(&tc), NULL, &err), ST_OK);   /* lost */
        trainer_free(t);
        store_close(st);
        /* resume */
        sc.mode = STORE_OPEN_EXISTING;
        assert_int_equal(store_open(&sc, &st, NULL, 0, &err), ST_OK);
        ckpt_reader *r;
        assert_int_equal(ckpt_reader_open(&r, st, &tc.model, &err), ST_OK);
        assert_int_equal(trainer_create(&t, &tc, NULL, &err), ST_OK);
        assert_int_equal(trainer_load_state(t, r, COMMIT_AT, &err), ST_OK);
        ckpt_reader_free(r);
        store_close(st);
        for (int s = COMMIT_AT; s < STEPS; s++) {
            train_step_stats stt;
            assert_int_equal(trainer_step(t, tok + s * step_tokens(&tc), &stt, &err), ST_OK);
            if (memcmp(&stt.loss, &ref_losses[s], sizeof(float)) != 0)
                fail_msg("memory trainer (%s): step %d loss %.9g, uninterrupted %.9g", gpt_precision_name(tc.precision),
                         s + 1, stt.loss, ref_losses[s]);
        }
        assert_memory_equal(trainer_params(t), trainer_params(ref), gpt_num_params(&tc.model) * sizeof(float));
        /* the horizontal executor reads the same commit (one part, 2048-element segments) */
        offload_config oc = make_config(&tc, SCHED_HORIZONTAL, 0.0, ALL_SSD, &f->paths[1]);
        oc.resume_paths = &f->paths[2];
        oc.n_resume_paths = 1;
        oc.resume_steps = COMMIT_AT;
        offload_trainer *ot;
        clear_dir(f->paths[1]);
        if (offload_trainer_create(&ot, &oc, NULL, &err) != ST_OK) fail_msg("%s", err.msg);
        for (int s = COMMIT_AT; s < STEPS; s++) {
            train_step_stats stt;
            assert_int_equal(offload_trainer_step(ot, tok + s * step_tokens(&tc), &stt, &err), ST_OK);
            assert_memory_equal(&stt.loss, &ref_losses[s], sizeof(float));
        }
        offload_trainer_free(ot);
        clear_dir(f->paths[1]);
        clear_dir(f->paths[2]);
        trainer_free(t);
        trainer_free(ref);
        st_free_aligned(stage);
        free(tok);
    }
}

/* In place, the store's layout must be the run's: another alpha is refused
 * (naming the cause and the way out), and the store is left as it was. */
static void test_refuses_another_layout_in_place(void **state) {
    fixture *f = *state;
    train_config tc = small_config(GPT_FP32, 0.0f);
    int32_t *tok = make_tokens(&tc);
    clear_dir(f->paths[0]);
    offload_config oc = make_config(&tc, SCHED_VERTICAL, 0.5, ALL_SSD, &f->paths[0]);
    st_error err = {0};
    offload_trainer *t;
    assert_int_equal(offload_trainer_create(&t, &oc, NULL, &err), ST_OK);
    assert_int_equal(offload_trainer_step(t, tok, NULL, &err), ST_OK);
    commit_step(t);
    offload_trainer_free(t);
    offload_config other = make_config(&tc, SCHED_VERTICAL, 0.25, HOST, &f->paths[0]);
    other.resume_paths = &f->paths[0];
    other.n_resume_paths = 1;
    other.resume_steps = 1;
    assert_int_equal(offload_trainer_create(&t, &other, NULL, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "another layout"));
    assert_non_null(strstr(err.msg, "--store"));
    /* the same settings still resume from it */
    oc.resume_paths = &f->paths[0];
    oc.n_resume_paths = 1;
    oc.resume_steps = 1;
    assert_int_equal(offload_trainer_create(&t, &oc, NULL, &err), ST_OK);
    assert_int_equal(offload_trainer_steps_done(t), 1);
    offload_trainer_free(t);
    /* a store of another model is refused by the reader, naming the unit */
    train_config big = tc;
    big.model.d_model = 64;
    assert_int_equal(gpt_config_check(&big.model, &err), ST_OK);
    offload_config wrong = make_config(&big, SCHED_VERTICAL, 0.5, HOST, &f->paths[1]);
    wrong.resume_paths = &f->paths[0];
    wrong.n_resume_paths = 1;
    assert_int_equal(offload_trainer_create(&t, &wrong, NULL, &err), ST_ECORRUPT);
    assert_non_null(strstr(err.msg, "unit 0"));
    clear_dir(f->paths[0]);
    clear_dir(f->paths[1]);
    free(tok);
}

/* An I/O error or a full disk in the middle of a step: the step fails with
 * an error naming the cause, and a resume from the store continues from
 * the last commit exactly as the run that never failed. */
static void test_fault_mid_step_keeps_last_commit(void **state) {
    fixture *f = *state;
    const int errnos[] = {EIO, ENOSPC};
    for (int e = 0; e < 2; e++) {
        train_config tc = small_config(GPT_FP32, 0.0f);
        int32_t *tok = make_tokens(&tc);
        float ref_losses[STEPS];
        clear_dir(f->paths[0]);
        float *ref_w = run_straight(make_config(&tc, SCHED_VERTICAL, 0.25, ALL_SSD, &f->paths[0]), tok, ref_losses);
        clear_dir(f->paths[0]);
        io_engine *eng;
        io_engine_config ec = io_engine_default_config();
        st_error err = {0};
        assert_int_equal(io_engine_create(&ec, &eng, &err), ST_OK);
        offload_config oc = make_config(&tc, SCHED_VERTICAL, 0.25, ALL_SSD, &f->paths[0]);
        oc.engine = eng;
        offload_trainer *t;
        assert_int_equal(offload_trainer_create(&t, &oc, NULL, &err), ST_OK);
        for (int s = 0; s < COMMIT_AT; s++) assert_int_equal(offload_trainer_step(t, tok + s * step_tokens(&tc), NULL, &err), ST_OK);
        commit_step(t);
        /* the 40th write from here fails, and every one after it: a dead or full disk */
        io_fault fault = {.ops = IO_FAULT_WRITE, .fail_at = 40, .fail_count = 0, .fail_errno = errnos[e]};
        io_engine_set_fault(eng, &fault);
        st_status s = offload_trainer_step(t, tok + COMMIT_AT * step_tokens(&tc), NULL, &err);
        if (s == ST_OK) s = offload_trainer_step(t, tok + (COMMIT_AT + 1) * step_tokens(&tc), NULL, &err);
        assert_int_not_equal(s, ST_OK);
        assert_non_null(strstr(err.msg, strerror(errnos[e])));
        uint64_t failed, shortened;
        io_engine_fault_stats(eng, &failed, &shortened);
        assert_true(failed > 0);
        offload_trainer_free(t);
        io_engine_destroy(eng);
        /* the disk works again: resume from the commit */
        offload_config re = make_config(&tc, SCHED_VERTICAL, 0.25, ALL_SSD, &f->paths[0]);
        re.resume_paths = &f->paths[0];
        re.n_resume_paths = 1;
        re.resume_steps = COMMIT_AT;
        if (offload_trainer_create(&t, &re, NULL, &err) != ST_OK) fail_msg("resume after %s: %s", strerror(errnos[e]), err.msg);
        for (int st = COMMIT_AT; st < STEPS; st++) {
            train_step_stats stt;
            assert_int_equal(offload_trainer_step(t, tok + st * step_tokens(&tc), &stt, &err), ST_OK);
            assert_memory_equal(&stt.loss, &ref_losses[st], sizeof(float));
        }
        assert_int_equal(offload_trainer_flush(t, &err), ST_OK);
        const size_t n = gpt_num_params(&tc.model);
        float *w = malloc(n * sizeof *w);
        assert_int_equal(offload_trainer_read_params(t, w, &err), ST_OK);
        assert_memory_equal(w, ref_w, n * sizeof *w);
        free(w);
        offload_trainer_free(t);
        clear_dir(f->paths[0]);
        free(ref_w);
        free(tok);
    }
}

static int setup(void **state) { return fixture_setup(state, "tmp-resume"); }
static int teardown(void **state) { return fixture_teardown(state); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_executor_resumes_bit_for_bit),
        cmocka_unit_test(test_memory_trainer_resumes),
        cmocka_unit_test(test_refuses_another_layout_in_place),
        cmocka_unit_test(test_fault_mid_step_keeps_last_commit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
