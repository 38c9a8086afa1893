/* test_schedule_run.c - a training run's engine (strata/run.h): both
 * trainers behind one interface, commits and resume through it (in place
 * and moving to other directories), the checks a resume makes, the
 * executor's auto placement, and the store directory list and removal it
 * uses (strata/store.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "strata/run.h"
#include "train_testutil.h"

enum { STEPS = 4, COMMIT_AT = 2 };

static train_config small_config(void) {
    train_config tc = train_config_defaults();
    tc.model = (gpt_config){.n_layer = 2, .n_head = 2, .d_model = 32, .n_ctx = 8, .vocab_size = 97};
    st_error err = {0};
    assert_int_equal(gpt_config_check(&tc.model, &err), ST_OK);
    tc.B = 2;
    tc.T = 8;
    tc.micro_batches = 2;
    tc.lr = (lr_schedule){.max_lr = 1e-2f, .min_lr = 1e-3f, .warmup = 1, .total = STEPS};
    tc.seed = 3;
    return tc;
}

static size_t step_tokens(const train_config *tc) { return (size_t)tc->micro_batches * tc->B * (tc->T + 1); }

static int32_t *make_tokens(const train_config *tc) { return test_tokens(tc, STEPS, 7); }

/* A fresh directory under the build tree. */
static void temp_dir(char *out, size_t n, const char *what) {
    snprintf(out, n, "%s/run-%s-XXXXXX", STRATA_BINARY_DIR, what);
    assert_non_null(mkdtemp(out));
}

static void remove_tree(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static train_run_config run_config(const train_config *tc, int executor, const store_dirs *dirs) {
    train_run_config rc = {.train = *tc, .executor = executor, .schedule = SCHED_VERTICAL, .store = dirs};
    if (executor) rc.place = (placement){.weights = 1, .optim = 1, .acts = 1, .grads = 1}, rc.alpha = 0.25;
    return rc;
}

static ckpt_record record_of(const train_run *r, const train_config *tc) {
    return (ckpt_record){.step = train_run_steps_done(r), .model = tc->model, .data_pos = 123, .data_tokens = 1000,
                          .vocab_fingerprint = 0xf00dcafe12345678ull};
}

/* Steps [from, STEPS) of the run, their losses into losses[from..]. */
static void steps(train_run *r, const train_config *tc, const int32_t *tok, int from, float *losses) {
    st_error err = {0};
    for (int s = from; s < STEPS; s++) {
        train_step_stats st;
        assert_int_equal(train_run_step(r, tok + s * step_tokens(tc), &st, &err), ST_OK);
        losses[s] = st.loss;
    }
}

/* Both trainers: a run committed at COMMIT_AT and resumed (in place, and
 * moved to another directory) gives the uninterrupted run's losses and
 * weights bit for bit, through the one interface. */
static void test_resume_through_the_interface(void **state) {
    (void)state;
    const train_config tc = small_config();
    int32_t *tok = make_tokens(&tc);
    const size_t n = gpt_num_params(&tc.model);
    for (int executor = 0; executor < 2; executor++)
        for (int move = 0; move < 2; move++) {
            st_error err = {0};
            char a[300], b[300];
            temp_dir(a, sizeof a, "a");
            temp_dir(b, sizeof b, "b");
            store_dirs da, db;
            assert_int_equal(store_dirs_parse(a, &da, &err), ST_OK);
            assert_int_equal(store_dirs_parse(b, &db, &err), ST_OK);
            /* uninterrupted, in b */
            train_run_config rc = run_config(&tc, executor, &db);
            train_run *r;
            float ref[STEPS], got[STEPS];
            assert_int_equal(train_run_create(&r, &rc, NULL, &err), ST_OK);
            assert_true((train_run_executor(r) != NULL) == executor);
            steps(r, &tc, tok, 0, ref);
            assert_int_equal(train_run_flush(r, &err), ST_OK);
            float *w_ref = malloc(n * sizeof *w_ref), *w = malloc(n * sizeof *w);
            for (int u = 0; u < gpt_num_units(&tc.model); u++)
                assert_int_equal(train_run_read_unit(r, u, w_ref + gpt_unit_offset(&tc.model, u), &err), ST_OK);
            assert_int_equal(train_run_read_unit(r, gpt_num_units(&tc.model), w, &err), ST_EINVAL);
            train_run_free(r);
            assert_int_equal(store_remove(&db, &err), ST_OK);
            /* to the commit, in a; one more step is lost */
            rc = run_config(&tc, executor, &da);
            assert_int_equal(train_run_create(&r, &rc, NULL, &err), ST_OK);
            for (int s = 0; s < COMMIT_AT; s++)
                assert_int_equal(train_run_step(r, tok + s * step_tokens(&tc), NULL, &err), ST_OK);
            ckpt_record rec = record_of(r, &tc);
            assert_int_equal(train_run_commit(r, &rec, &err), ST_OK);
            assert_int_equal(train_run_step(r, tok + COMMIT_AT * step_tokens(&tc), NULL, &err), ST_OK);
            train_run_free(r);
            /* the record reads back and is this run's */
            ckpt_record last;
            int found = 0;
            assert_int_equal(train_run_last_commit(&da, &last, &found, &err), ST_OK);
            assert_int_equal(found, 1);
            assert_int_equal(last.step, COMMIT_AT);
            assert_int_equal(last.data_pos, 123);
            assert_int_equal(train_run_check_commit(&last, &tc.model, 1000, STEPS, &err), ST_OK);
            /* resume: in place in a, or moved to b */
            const store_dirs *to = move ? &db : &da;
            int removed = -1;
            if (move) {
                assert_int_equal(train_run_prepare_move(to, &last, &removed, &err), ST_OK);
                assert_int_equal(removed, 0);
            }
            rc = run_config(&tc, executor, to);
            rc.resume = &da;
            rc.resume_steps = last.step;
            assert_int_equal(train_run_create(&r, &rc, NULL, &err), ST_OK);
            assert_int_equal(train_run_steps_done(r), COMMIT_AT);
            steps(r, &tc, tok, COMMIT_AT, got);
            for (int s = COMMIT_AT; s < STEPS; s++)
                if (memcmp(&got[s], &ref[s], sizeof(float)) != 0)
                    fail_msg("%s, %s: step %d loss %.9g, uninterrupted %.9g", executor ? "executor" : "in memory",
                             move ? "moved" : "in place", s + 1, got[s], ref[s]);
            assert_int_equal(train_run_flush(r, &err), ST_OK);
            for (int u = 0; u < gpt_num_units(&tc.model); u++)
                assert_int_equal(train_run_read_unit(r, u, w + gpt_unit_offset(&tc.model, u), &err), ST_OK);
            assert_memory_equal(w, w_ref, n * sizeof *w);
            float loss = -1;
            assert_int_equal(train_run_eval(r, tok, tc.B, tc.T, &loss, &err), ST_OK);
            assert_true(loss > 0);
            train_run_free(r);
            free(w);
            free(w_ref);
            remove_tree(a);
            remove_tree(b);
        }
    free(tok);
}

/* Both trainers refuse a token outside the vocabulary, with a status. */
static void test_bad_tokens_are_a_status(void **state) {
    (void)state;
    const train_config tc = small_config();
    int32_t *tok = make_tokens(&tc);
    for (int executor = 0; executor < 2; executor++) {
        st_error err = {0};
        char a[300];
        temp_dir(a, sizeof a, "tok");
        store_dirs da;
        assert_int_equal(store_dirs_parse(a, &da, &err), ST_OK);
        train_run_config rc = run_config(&tc, executor, &da);
        train_run *r;
        assert_int_equal(train_run_create(&r, &rc, NULL, &err), ST_OK);
        tok[5] = 97;
        assert_int_equal(train_run_step(r, tok, NULL, &err), ST_EINVAL);
        assert_non_null(strstr(err.msg, "token 5 is 97"));
        assert_int_equal(train_run_steps_done(r), 0);
        float loss;
        assert_int_equal(train_run_eval(r, tok, tc.B, tc.T, &loss, &err), ST_EINVAL);
        tok[5] = 0;
        assert_int_equal(train_run_step(r, tok, NULL, &err), ST_OK);
        train_run_free(r);
        remove_tree(a);
    }
    free(tok);
}

/* A resume checks the commit against the run, finds no commit in a store
 * never committed to, and a move clears only its own unfinished copy. */
static void test_resume_checks(void **state) {
    (void)state;
    const train_config tc = small_config();
    st_error err = {0};
    ckpt_record c = {.step = 2, .model = tc.model, .data_tokens = 1000};
    assert_int_equal(train_run_check_commit(&c, &tc.model, 1000, 4, &err), ST_OK);
    assert_int_equal(train_run_check_commit(&c, &tc.model, 999, 4, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "training data changed"));
    assert_int_equal(train_run_check_commit(&c, &tc.model, 1000, 2, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "finished"));
    gpt_config other = tc.model;
    other.n_layer++;
    assert_int_equal(train_run_check_commit(&c, &other, 1000, 4, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "another model"));

    /* the record's vocabulary fingerprint: 64 bits as 16 hex digits; absent
     * in older records (unknown); anything else is damage */
    char text[512];
    c.vocab_fingerprint = 0xffffffffffffffffull;
    assert_true(ckpt_record_format(&c, text, sizeof text) > 0);
    ckpt_record back;
    assert_int_equal(ckpt_record_parse(text, strlen(text), &back, &err), ST_OK);
    assert_true(back.vocab_fingerprint == c.vocab_fingerprint);
    const char *old = "{\"step\": 1, \"n_layer\": 2, \"n_head\": 2, \"d_model\": 32, \"n_ctx\": 16, \"vocab\": 64}";
    assert_int_equal(ckpt_record_parse(old, strlen(old), &back, &err), ST_OK);
    assert_true(back.vocab_fingerprint == 0);
    const char *bad[] = {"\"12\"", "\"0123456789ABCDEF\"", "12", "\"0123456789abcdef0\""};
    for (int i = 0; i < 4; i++) {
        snprintf(text, sizeof text, "{\"step\": 1, \"n_layer\": 2, \"n_head\": 2, \"d_model\": 32, \"n_ctx\": 16, "
                 "\"vocab\": 64, \"vocab_fingerprint\": %s}", bad[i]);
        assert_int_equal(ckpt_record_parse(text, strlen(text), &back, &err), ST_ECORRUPT);
        assert_non_null(strstr(err.msg, "vocab_fingerprint"));
    }
    c.vocab_fingerprint = 0;

    char a[300], b[300];
    temp_dir(a, sizeof a, "chk-a");
    temp_dir(b, sizeof b, "chk-b");
    store_dirs da, db;
    assert_int_equal(store_dirs_parse(a, &da, &err), ST_OK);
    assert_int_equal(store_dirs_parse(b, &db, &err), ST_OK);
    int found = -1;
    ckpt_record last;
    assert_int_equal(train_run_last_commit(&da, &last, &found, &err), ST_OK);   /* an empty directory */
    assert_int_equal(found, 0);
    /* a run created but never committed: still no commit */
    train_run_config rc = run_config(&tc, 1, &da);
    train_run *r;
    assert_int_equal(train_run_create(&r, &rc, NULL, &err), ST_OK);
    train_run_free(r);
    assert_int_equal(train_run_last_commit(&da, &last, &found, &err), ST_OK);
    assert_int_equal(found, 0);
    /* that store, as a move's target, is an unfinished copy: removed */
    int removed = 0;
    assert_int_equal(train_run_prepare_move(&da, &c, &removed, &err), ST_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(train_run_last_commit(&da, &last, &found, &err), ST_OK);
    assert_int_equal(found, 0);
    /* a store with a commit of its own is refused as a target */
    rc = run_config(&tc, 0, &db);
    assert_int_equal(train_run_create(&r, &rc, NULL, &err), ST_OK);
    ckpt_record mine = record_of(r, &tc);
    assert_int_equal(train_run_commit(r, &mine, &err), ST_OK);
    train_run_free(r);
    assert_int_equal(train_run_prepare_move(&db, &c, &removed, &err), ST_EEXIST);
    assert_int_equal(train_run_last_commit(&db, &last, &found, &err), ST_OK);
    assert_int_equal(found, 1);   /* untouched */
    assert_true(last.vocab_fingerprint == mine.vocab_fingerprint);   /* the record kept all 64 bits */
    /* the same commit's copy (the move had committed) is removed */
    assert_int_equal(train_run_prepare_move(&db, &mine, &removed, &err), ST_OK);
    assert_int_equal(removed, 1);
    /* a missing directory cannot be opened */
    char gone[320];
    snprintf(gone, sizeof gone, "%s/missing", a);
    store_dirs dg;
    assert_int_equal(store_dirs_parse(gone, &dg, &err), ST_OK);
    assert_int_not_equal(train_run_last_commit(&dg, &last, &found, &err), ST_OK);
    assert_non_null(strstr(err.msg, "cannot open the run's store"));
    remove_tree(a);
    remove_tree(b);
}

/* Each commit records the segment its state tensors are cut into (records
 * from before say nothing: CKPT_SEGMENT_UNRECORDED), and resuming in place
 * needs the commit's: a store cut otherwise is refused, not misread. */
static void test_commit_records_segment(void **state) {
    (void)state;
    const train_config tc = small_config();
    st_error err = {0};
    ckpt_record back;
    const char *old = "{\"step\": 1, \"n_layer\": 2, \"n_head\": 2, \"d_model\": 32, \"n_ctx\": 16, \"vocab\": 64}";
    assert_int_equal(ckpt_record_parse(old, strlen(old), &back, &err), ST_OK);
    assert_true(back.segment == CKPT_SEGMENT_UNRECORDED);
    char text[512];
    ckpt_record c = {.step = 2, .model = tc.model, .data_tokens = 1000, .segment = 6144};
    assert_true(ckpt_record_format(&c, text, sizeof text) > 0);
    assert_int_equal(ckpt_record_parse(text, strlen(text), &back, &err), ST_OK);
    assert_true(back.segment == 6144);
    const char *bad[] = {"0", "1000", "-2048", "\"2048\"", "4294967296", "2048.5"};
    for (int i = 0; i < 6; i++) {
        snprintf(text, sizeof text, "{\"step\": 1, \"n_layer\": 2, \"n_head\": 2, \"d_model\": 32, \"n_ctx\": 16, "
                 "\"vocab\": 64, \"segment\": %s}", bad[i]);
        assert_int_equal(ckpt_record_parse(text, strlen(text), &back, &err), ST_ECORRUPT);
        assert_non_null(strstr(err.msg, "segment"));
    }

    for (int executor = 0; executor < 2; executor++) {
        char a[300];
        temp_dir(a, sizeof a, "seg");
        store_dirs da;
        assert_int_equal(store_dirs_parse(a, &da, &err), ST_OK);
        /* the in-memory trainer commits in its own segments; the executor in the run's */
        train_run_config rc = run_config(&tc, executor, &da);
        rc.segment_elems = 2048;
        rc.schedule = SCHED_HORIZONTAL, rc.alpha = 0;   /* one part per unit, as the in-memory trainer commits */
        train_run *r;
        if (train_run_create(&r, &rc, NULL, &err) != ST_OK) fail_msg("%s", err.msg);
        ckpt_record rec = record_of(r, &tc);
        rec.segment = 4096;   /* what the caller says is not what the commit holds */
        assert_int_equal(train_run_commit(r, &rec, &err), ST_OK);
        train_run_free(r);
        ckpt_record last;
        int found = 0;
        assert_int_equal(train_run_last_commit(&da, &last, &found, &err), ST_OK);
        assert_int_equal(found, 1);
        assert_true(last.segment == (executor ? 2048 : CKPT_SEGMENT_UNRECORDED));
        /* the executor in place: cut otherwise, refused; with the commit's segment, resumed */
        rc = run_config(&tc, 1, &da);
        rc.schedule = SCHED_HORIZONTAL, rc.alpha = 0;
        rc.resume = &da;
        rc.resume_steps = last.step;
        rc.segment_elems = last.segment == 2048 ? 4096 : 2048;
        assert_int_equal(train_run_create(&r, &rc, NULL, &err), ST_EINVAL);
        assert_non_null(strstr(err.msg, "another layout"));
        rc.segment_elems = last.segment;
        if (train_run_create(&r, &rc, NULL, &err) != ST_OK) fail_msg("%s", err.msg);
        assert_int_equal(train_run_steps_done(r), 0);
        train_run_free(r);
        remove_tree(a);
    }
}

/* --offload auto: within budgets, the least traffic; tight budgets push
 * state to the SSD; with no budget that fits, the least host memory. */
static void test_auto_placement(void **state) {
    (void)state;
    const train_config tc = small_config();
    store_dirs d;
    st_error err = {0};
    assert_int_equal(store_dirs_parse("/nonexistent-store", &d, &err), ST_OK);
    train_run_config rc = run_config(&tc, 1, &d);
    placement p;
    rc.mem_host = 1ull << 40;   /* everything fits: nothing on the SSD moves nothing */
    assert_int_equal(train_run_auto_placement(&rc, &p, &err), ST_OK);
    assert_false(placement_any_ssd(p));
    /* the least host memory any placement needs, and a budget just above it */
    uint64_t least = UINT64_MAX;
    for (int i = 0; i < PLACEMENT_COUNT; i++) {
        rc.place = placement_at(i);
        offload_config oc = train_run_executor_config(&rc);
        layout_memory need;
        offload_memory_need(&oc, &need);
        if (need.host < least) least = need.host;
    }
    rc.mem_host = least;
    assert_int_equal(train_run_auto_placement(&rc, &p, &err), ST_OK);
    rc.place = p;
    offload_config oc = train_run_executor_config(&rc);
    layout_memory need;
    offload_memory_need(&oc, &need);
    assert_true(need.host <= least);
    assert_true(placement_any_ssd(p));
    rc.mem_host = least - 1;   /* nothing fits: the smallest, whose creation will say what it needs */
    assert_int_equal(train_run_auto_placement(&rc, &p, &err), ST_OK);
    rc.place = p;
    oc = train_run_executor_config(&rc);
    offload_memory_need(&oc, &need);
    assert_int_equal(need.host, least);
}

/* layout_least_traffic_placement: the least traffic among those that fit,
 * ties to fewer kinds on the SSD; none fits is ST_ENOENT. */
static int fits_none(const run_layout *l, void *ctx) {
    (void)l, (void)ctx;
    return 0;
}
static int fits_with_optim_on_ssd(const run_layout *l, void *ctx) {
    (void)ctx;
    return l->p.place.optim;
}

static void test_least_traffic_rule(void **state) {
    (void)state;
    const train_config tc = small_config();
    const offload_config oc = {.train = tc, .schedule = SCHED_VERTICAL};
    const layout_params base = offload_layout_params(&oc);
    placement p;
    st_error err = {0};
    assert_int_equal(layout_least_traffic_placement(&base, PLACEMENT_COUNT, fits_none, NULL, &p, &err), ST_ENOENT);
    assert_int_equal(layout_least_traffic_placement(&base, 1, fits_with_optim_on_ssd, NULL, &p, &err), ST_ENOENT);
    assert_int_equal(layout_least_traffic_placement(&base, PLACEMENT_COUNT, fits_with_optim_on_ssd, NULL, &p, &err),
                     ST_OK);
    /* optim alone moves the least of the placements with optim on the SSD */
    assert_true(p.optim && !p.weights && !p.acts && !p.grads);
    /* and it is the least of every candidate that fits, by its own traffic */
    layout_params lp = base;
    lp.place = p;
    run_layout l;
    layout_traffic best;
    assert_int_equal(layout_build(&lp, &l, &err), ST_OK);
    assert_int_equal(layout_traffic_per_step(&l, &best, &err), ST_OK);
    layout_free(&l);
    for (int i = 0; i < PLACEMENT_COUNT; i++) {
        lp.place = placement_at(i);
        if (!lp.place.optim) continue;
        layout_traffic t;
        assert_int_equal(layout_build(&lp, &l, &err), ST_OK);
        assert_int_equal(layout_traffic_per_step(&l, &t, &err), ST_OK);
        layout_free(&l);
        assert_true(t.total_read + t.total_written >= best.total_read + best.total_written);
    }
}

/* Several ranks: memory keeps each rank's shard of the gradients' sums
 * (as of the master weights and moments), and compute adds into a few
 * whole-unit buffers: the end units' one and the blocks' (one being
 * accumulated, LAYOUT_REDUCE_SLOTS being summed), each with room for the
 * rank's shard of a sum before the unit. */
static void test_sharded_gradient_memory(void **state) {
    (void)state;
    const train_config tc = small_config();
    st_error err = {0};
    for (int sched = 0; sched < 2; sched++)
        for (int N = 1; N <= 3; N++)
            for (int rank = 0; rank < N; rank++) {
                const offload_config oc = {.train = tc, .schedule = (sched_kind)sched};
                layout_params lp = offload_layout_params(&oc);
                lp.ranks = N, lp.rank = rank;
                run_layout l;
                assert_int_equal(layout_build(&lp, &l, &err), ST_OK);
                assert_int_equal(l.buf[BUF_GRADS].bytes, (uint64_t)l.n_local * 4);
                const size_t area = layout_grad_shard_area(&l);   /* the shard of a sum, aligned */
                if (N == 1) {
                    assert_int_equal(area, 0);
                    assert_int_equal(l.n_local, l.n_params);
                    assert_int_equal(l.buf[BUF_GRAD_IO_EMBED].count + l.buf[BUF_GRAD_IO_BLOCK].count, 0);
                } else {
                    assert_true(l.n_local <= l.n_params / N + (size_t)l.n_units);
                    assert_true(area >= l.max_shard && area % 1024 == 0);
                    assert_int_equal(l.buf[BUF_GRAD_IO_EMBED].count, 1);
                    assert_true(l.buf[BUF_GRAD_IO_EMBED].bytes >= (area + l.units[0].n) * 4);
                    assert_int_equal(l.buf[BUF_GRAD_IO_BLOCK].count, 1 + LAYOUT_REDUCE_SLOTS);
                    assert_true(l.buf[BUF_GRAD_IO_BLOCK].bytes >= (area + l.units[1].n) * 4);
                }
                layout_free(&l);
            }
}

/* The one parser of store directory lists, and removing a store. */
static void test_store_dirs(void **state) {
    (void)state;
    st_error err = {0};
    store_dirs d, e;
    assert_int_equal(store_dirs_parse("/a,/b,/c", &d, &err), ST_OK);
    assert_int_equal(d.n, 3);
    assert_string_equal(d.paths[1], "/b");
    assert_int_equal(store_dirs_parse(",,", &d, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "no directory"));
    char many[200] = "";
    for (int i = 0; i <= STORE_MAX_PATHS; i++) strcat(many, i ? ",/x" : "/x");
    assert_int_equal(store_dirs_parse(many, &d, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "at most"));
    char dir[300];
    temp_dir(dir, sizeof dir, "dirs");
    char spelled[400];
    snprintf(spelled, sizeof spelled, "%s/./", dir);
    assert_int_equal(store_dirs_parse(dir, &d, &err), ST_OK);
    assert_int_equal(store_dirs_parse(spelled, &e, &err), ST_OK);
    assert_true(store_dirs_same(&d, &e));
    /* store_remove: the store's files go, others stay, missing directories are made */
    char keep[400], sub[400], list[900];
    snprintf(keep, sizeof keep, "%s/notes.txt", dir);
    FILE *f = fopen(keep, "w");
    assert_non_null(f);
    fclose(f);
    train_config tc = small_config();
    train_run_config rc = run_config(&tc, 0, &d);
    train_run *r;
    assert_int_equal(train_run_create(&r, &rc, NULL, &err), ST_OK);
    train_run_free(r);
    snprintf(sub, sizeof sub, "%s/new/deeper", dir);
    snprintf(list, sizeof list, "%s,%s", dir, sub);
    assert_int_equal(store_dirs_parse(list, &e, &err), ST_OK);
    assert_int_equal(store_remove(&e, &err), ST_OK);
    char manifest[400];
    snprintf(manifest, sizeof manifest, "%s/strata-store.manifest", dir);
    assert_int_not_equal(access(manifest, F_OK), 0);
    assert_int_equal(access(keep, F_OK), 0);
    struct stat sb;
    assert_int_equal(stat(sub, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    remove_tree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_through_the_interface),
        cmocka_unit_test(test_bad_tokens_are_a_status),
        cmocka_unit_test(test_resume_checks),
        cmocka_unit_test(test_commit_records_segment),
        cmocka_unit_test(test_auto_placement),
        cmocka_unit_test(test_least_traffic_rule),
        cmocka_unit_test(test_sharded_gradient_memory),
        cmocka_unit_test(test_store_dirs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
