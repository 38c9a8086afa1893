/* test_schedule_sched.c - the task lists: what each schedule moves, that
 * every piece of work appears exactly once, that dependencies point
 * backwards and reach each input's producer, the snake order, and that the
 * optimizer's shares of each unit add up to exactly one step; and how
 * placement_fills fills a budget with the kinds' parts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "strata/schedule.h"

static sched_params params(sched_kind k, int units, int M, double alpha, int clip, int ssd) {
    return (sched_params){.kind = k, .n_units = units, .micro_batches = M, .alpha = alpha, .clipping = clip,
                          .place.weights = ssd, .place.optim = ssd, .place.acts = ssd, .place.grads = ssd};
}

/* The same with a head unit of its own (an untied head), the last: blocks
 * 1..units-2. */
static sched_params params_head(sched_kind k, int units, int M, double alpha, int clip, int ssd, int head) {
    sched_params p = params(k, units, M, alpha, clip, ssd);
    p.separate_head = head;
    return p;
}

static sched_list build(const sched_params *p, int deferred_in) {
    sched_list l;
    st_error err = {0};
    assert_int_equal(sched_build(p, deferred_in, &l, &err), ST_OK);
    return l;
}

/* 1 if task `from` depends on task `to`, directly or through others. */
static int reaches(const sched_list *l, int from, int to, char *seen) {
    if (from == to) return 1;
    if (from < to || seen[from]) return 0;
    seen[from] = 1;
    for (int i = 0; i < l->tasks[from].n_deps; i++)
        if (reaches(l, l->tasks[from].deps[i], to, seen)) return 1;
    return 0;
}
static int depends(const sched_list *l, int from, int to) {
    char *seen = calloc((size_t)l->n, 1);
    int r = reaches(l, from, to, seen);
    free(seen);
    return r;
}

static void test_weights_read_once_per_pass_vertical(void **state) {
    (void)state;
    for (int M = 1; M <= 16; M *= 2) {
        sched_params p = params(SCHED_VERTICAL, 5, M, 0.0, 0, 1);
        sched_list l = build(&p, 0);
        sched_counts c;
        sched_count(&l, &c);
        /* forward: 5 units; head: unit 0 again; backward: 4 blocks */
        assert_int_equal(c.weight_loads, 10);
        assert_int_equal(c.forward_tasks, 5 * M);
        assert_int_equal(c.backward_tasks, 6 * M);   /* head + 4 blocks + embedding, per micro-batch */
        sched_list_free(&l);
    }
}

static void test_weights_read_per_micro_batch_horizontal(void **state) {
    (void)state;
    for (int M = 1; M <= 16; M *= 2) {
        sched_params p = params(SCHED_HORIZONTAL, 5, M, 0.0, 0, 1);
        sched_list l = build(&p, 0);
        sched_counts c;
        sched_count(&l, &c);
        assert_int_equal(c.weight_loads, 10 * M);
        /* gradient accumulators go out after every micro-batch and come
         * back for the next one, and after the last for the optimizer */
        assert_int_equal(c.grad_saves, 5 * M);
        assert_int_equal(c.grad_loads, 5 * M);
        sched_list_free(&l);
    }
}

/* Every (unit, micro-batch) forward and backward exactly once; deps point
 * backwards; consumers depend on producers of what they read. */
static void check_structure(const sched_params *p, int deferred_in) {
    sched_list l = build(p, deferred_in);
    const int U = p->n_units, M = p->micro_batches, H = sched_head_unit(p);
    const int top = U - 1 - p->separate_head;   /* the last block */
    int *fwd = calloc((size_t)(U * M), sizeof(int)), *bwd = calloc((size_t)(U * M), sizeof(int));
    int *fwd_at = malloc(sizeof(int) * (size_t)(U * M)), *head_at = malloc(sizeof(int) * (size_t)M);
    for (int i = 0; i < l.n; i++) {
        const sched_task *t = &l.tasks[i];
        for (int d = 0; d < t->n_deps; d++) assert_true(t->deps[d] >= 0 && t->deps[d] < i);
        if (t->op == TASK_EMBED_FORWARD || t->op == TASK_BLOCK_FORWARD) {
            fwd[t->unit * M + t->mb]++;
            fwd_at[t->unit * M + t->mb] = i;
            /* a block's forward depends on the forward of the unit below */
            if (t->unit > 0) assert_true(depends(&l, i, fwd_at[(t->unit - 1) * M + t->mb]));
        }
        if (t->op == TASK_HEAD) {
            head_at[t->mb] = i;
            assert_int_equal(t->unit, H);
            assert_true(depends(&l, i, fwd_at[top * M + t->mb]));
        }
        if (t->op == TASK_BLOCK_BACKWARD || t->op == TASK_EMBED_BACKWARD) {
            bwd[t->unit * M + t->mb]++;
            assert_true(depends(&l, i, head_at[t->mb]));
            assert_true(depends(&l, i, fwd_at[t->unit * M + t->mb]));
        }
        if (t->op == TASK_LOAD_ACT) {
            int found = 0;
            for (int d = 0; d < t->n_deps; d++) {
                const sched_task *s = &l.tasks[t->deps[d]];
                found |= s->op == TASK_SAVE_ACT && s->unit == t->unit && s->mb == t->mb;
            }
            assert_true(found);
        }
    }
    for (int k = 0; k < U * M; k++) {
        const int head_only = p->separate_head && k / M == H;   /* a head of its own has neither */
        assert_int_equal(fwd[k], !head_only);
        assert_int_equal(bwd[k], !head_only);
    }
    free(fwd); free(bwd); free(fwd_at); free(head_at);
    sched_list_free(&l);
}

static void test_structure_all_variants(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++)
        for (int ssd = 0; ssd < 2; ssd++)
            for (int clip = 0; clip < 2; clip++)
                for (int M = 1; M <= 4; M++)
                    for (int head = 0; head < 2; head++) {
                        sched_params p = params_head((sched_kind)k, 4 + head, M, 0.25, clip, ssd, head);
                        check_structure(&p, 0);
                        check_structure(&p, 1);
                    }
}

static int is_copy(task_op op) {
    return op == TASK_TOKENS_TO_DEVICE || op == TASK_ACT_TO_DEVICE || op == TASK_ACT_TO_HOST ||
           op == TASK_GRAD_TO_DEVICE || op == TASK_GRAD_TO_HOST;
}

/* The index of the task before i that is not a gradient or token copy (those may come between an
 * activation's copy in and its reader), or -1. */
static int before_other_copies(const sched_list *l, int i) {
    int j = i - 1;
    while (j >= 0 && (l->tasks[j].op == TASK_GRAD_TO_DEVICE || l->tasks[j].op == TASK_TOKENS_TO_DEVICE)) j--;
    return j;
}

static int has_dep(const sched_task *t, int d) {
    for (int k = 0; k < t->n_deps; k++)
        if (t->deps[k] == d) return 1;
    return 0;
}

/* A separate device's list is the unified list with copies added, and the
 * copies keep every compute task's inputs on the device and every host task's
 * on the host. */
static void check_device_copies(const sched_params *unified, int deferred_in, int flush) {
    sched_params p = *unified;
    p.separate_device = 1;
    sched_list a, b;
    st_error err = {0};
    if (flush) {
        assert_int_equal(sched_build_flush(unified, &a, &err), ST_OK);
        assert_int_equal(sched_build_flush(&p, &b, &err), ST_OK);
    } else {
        a = build(unified, deferred_in);
        b = build(&p, deferred_in);
    }
    const int L1 = p.n_units, n_acts = sched_parts(&p, PLACE_ACTS);
    int j = 0, tokens = -1, on_device = -1, grad_copies = 0;
    for (int i = 0; i < b.n; i++) {
        const sched_task *t = &b.tasks[i];
        assert_true(t->n_deps <= SCHED_MAX_DEPS);
        for (int d = 0; d < t->n_deps; d++) assert_true(t->deps[d] >= 0 && t->deps[d] < i);
        if (t->op == TASK_TOKENS_TO_DEVICE) {
            assert_int_equal(tokens, -1);   /* once per list */
            tokens = i;
        } else if (t->op == TASK_GRAD_TO_DEVICE) {
            assert_int_equal(on_device, -1);   /* never over another unit's gradients */
            on_device = t->unit;
            grad_copies++;
        } else if (t->op == TASK_GRAD_TO_HOST) {
            assert_int_equal(on_device, t->unit);
            on_device = -1;
        } else if (!is_copy(t->op)) {
            /* the same task as the unified list's next one */
            assert_true(j < a.n);
            const sched_task *u = &a.tasks[j++];
            assert_int_equal(t->op, u->op);
            assert_int_equal(t->unit, u->unit);
            assert_int_equal(t->mb, u->mb);
            assert_true(t->lo == u->lo && t->hi == u->hi);
            assert_int_equal(t->deferred, u->deferred);
            if (sched_is_grad_task(t->op)) assert_int_equal(on_device, sched_grad_unit(t));
            if (t->op == TASK_SAVE_GRAD || t->op == TASK_LOAD_GRAD || t->op == TASK_OPTIMIZE)
                assert_int_not_equal(on_device, t->unit);
            if (t->op == TASK_EMBED_FORWARD || t->op == TASK_HEAD || t->op == TASK_EMBED_BACKWARD)
                assert_true(tokens >= 0 && has_dep(t, tokens));
            /* a checkpoint a compute task reads is copied in just before it */
            int in = t->op == TASK_BLOCK_FORWARD || t->op == TASK_BLOCK_BACKWARD ? t->unit
                   : t->op == TASK_HEAD                                         ? n_acts
                                                                                : -1;
            if (in >= 0) {
                const int c = before_other_copies(&b, i);
                assert_true(c >= 0);
                assert_int_equal(b.tasks[c].op, TASK_ACT_TO_DEVICE);
                assert_int_equal(b.tasks[c].unit, in);
                assert_int_equal(b.tasks[c].mb, t->mb);
                assert_true(has_dep(t, c));
            }
            /* a checkpoint a compute task makes is copied out just after, and saved from there */
            if (t->op == TASK_EMBED_FORWARD || t->op == TASK_BLOCK_FORWARD) {
                assert_true(i + 1 < b.n);
                const sched_task *o = &b.tasks[i + 1];
                assert_int_equal(o->op, TASK_ACT_TO_HOST);
                assert_int_equal(o->unit, t->op == TASK_EMBED_FORWARD ? 1 : t->unit + 1);
                assert_int_equal(o->mb, t->mb);
                assert_true(has_dep(o, i));
            }
            if (t->op == TASK_SAVE_ACT) {
                const sched_task *o = &b.tasks[t->deps[0]];
                assert_int_equal(o->op, TASK_ACT_TO_HOST);
                assert_int_equal(o->unit, t->unit);
                assert_int_equal(o->mb, t->mb);
            }
        }
    }
    assert_int_equal(j, a.n);          /* every task of the unified list, in order */
    assert_int_equal(on_device, -1);   /* every gradient back on the host at the end */
    if (flush) assert_int_equal(b.n, a.n);
    else assert_true(tokens >= 0 && grad_copies >= L1);
    sched_analysis an;
    assert_int_equal(sched_analyze(&b, L1, &an, &err), ST_OK);
    sched_analysis_free(&an);
    if (!flush) check_structure(&p, deferred_in);
    sched_list_free(&a);
    sched_list_free(&b);
}

static void test_device_copies(void **state) {
    (void)state;
    const double alphas[3] = {0.0, 0.25, 1.0};
    for (int k = 0; k < 2; k++)
        for (int pl = 0; pl < PLACEMENT_COUNT; pl++)
            for (int a = 0; a < 3; a++)
                for (int clip = 0; clip < 2; clip++)
                    for (int M = 1; M <= 3; M += 2)
                        for (int head = 0; head < 2; head++) {
                            sched_params p = params_head((sched_kind)k, 4 + head, M, alphas[a], clip, 0, head);
                            p.place = placement_at(pl);
                            check_device_copies(&p, 0, 0);
                            check_device_copies(&p, 1, 0);
                            check_device_copies(&p, 1, 1);
                        }
    /* a unified list has no copies */
    sched_params p = params(SCHED_VERTICAL, 4, 2, 0.25, 0, 1);
    sched_list l = build(&p, 1);
    for (int i = 0; i < l.n; i++) assert_false(is_copy(l.tasks[i].op));
    sched_list_free(&l);
}

/* The snake: each forward pass starts with the micro-batch the previous one ended with. */
static void test_snake_order(void **state) {
    (void)state;
    sched_params p = params(SCHED_VERTICAL, 4, 4, 0.0, 0, 1);
    sched_list l = build(&p, 0);
    int prev_unit = -1, prev_last = -1, first_of_unit = -1, turns = 0;
    for (int i = 0; i < l.n; i++) {
        const sched_task *t = &l.tasks[i];
        if (t->op != TASK_EMBED_FORWARD && t->op != TASK_BLOCK_FORWARD) continue;
        if (t->unit != prev_unit) {
            first_of_unit = t->mb;
            if (prev_unit >= 0) {
                assert_int_equal(first_of_unit, prev_last);
                turns++;
            }
            prev_unit = t->unit;
        }
        prev_last = t->mb;
    }
    assert_int_equal(turns, 3);
    /* at a turn the activation is consumed straight from memory: with
     * checkpoints on the SSD there is one load fewer per turn in forward */
    sched_counts c;
    sched_count(&l, &c);
    assert_true(c.act_loads < c.act_saves + 4 * 4);
    sched_list_free(&l);
}

/* Optimizer shares: this iteration's share plus the next iteration's
 * deferred share cover each unit exactly once. */
static void check_optimizer_cover(sched_kind k, double alpha, int clip, int head) {
    sched_params p = params_head(k, 4 + head, 2, alpha, clip, 1, head);
    const int U = p.n_units;
    sched_list a = build(&p, 1), flush;
    st_error err = {0};
    assert_int_equal(sched_build_flush(&p, &flush, &err), ST_OK);
    for (int u = 0; u < U; u++) {
        double now = 0, deferred_next = 0, deferred_prev = 0;
        for (int i = 0; i < a.n; i++) {
            const sched_task *t = &a.tasks[i];
            if (t->op != TASK_OPTIMIZE || t->unit != u) continue;
            if (t->deferred) deferred_prev += t->hi - t->lo;
            else now += t->hi - t->lo;
            assert_true(t->lo >= 0 && t->hi <= 1 && t->lo <= t->hi);
        }
        for (int i = 0; i < flush.n; i++)
            if (flush.tasks[i].op == TASK_OPTIMIZE && flush.tasks[i].unit == u) deferred_next += flush.tasks[i].hi - flush.tasks[i].lo;
        assert_float_equal(now + deferred_next, 1.0, 1e-12);
        assert_float_equal(deferred_prev, deferred_next, 1e-12);
        double expect_deferred = clip && k == SCHED_VERTICAL ? 1.0 : alpha;
        assert_float_equal(deferred_next, expect_deferred, 1e-12);
    }
    /* deferred work of unit u comes before the first load of u's weights */
    for (int u = 0; u < U; u++) {
        int def = -1, load = -1;
        for (int i = 0; i < a.n; i++) {
            if (a.tasks[i].unit != u) continue;
            if (a.tasks[i].op == TASK_OPTIMIZE && a.tasks[i].deferred && def < 0) def = i;
            if (a.tasks[i].op == TASK_LOAD_WEIGHTS && load < 0) load = i;
        }
        if (def >= 0) assert_true(depends(&a, load, def));
    }
    /* with clipping, steps taken in this iteration wait for the norm */
    int norm = -1;
    for (int i = 0; i < a.n; i++) {
        if (a.tasks[i].op == TASK_GRAD_NORM) norm = i;
        if (clip && a.tasks[i].op == TASK_OPTIMIZE && !a.tasks[i].deferred) assert_true(norm >= 0 && depends(&a, i, norm));
    }
    assert_int_equal(norm >= 0, clip);
    sched_list_free(&a);
    sched_list_free(&flush);
}

static void test_optimizer_shares(void **state) {
    (void)state;
    const double alphas[] = {0.0, 0.25, 1.0};
    for (int k = 0; k < 2; k++)
        for (int a = 0; a < 3; a++)
            for (int clip = 0; clip < 2; clip++)
                for (int head = 0; head < 2; head++) check_optimizer_cover((sched_kind)k, alphas[a], clip, head);
}

/* alpha defers the steps that stream (state on the SSD), not those all in
 * memory: with optimizer state on the SSD for the last half of the units and
 * gradients all there, a unit in memory steps at once, whole, and parks no
 * gradient; a streaming unit steps 1 - alpha in backward and the rest in
 * the next forward, from gradients parked in between. Weights on the SSD
 * make a unit's step stream too; clipping (vertical) defers every step, and
 * so does alpha beside a device (defer_in_memory). */
static void test_deferral_follows_streaming(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++)
        for (int weights = 0; weights < 2; weights++)
            for (int clip = 0; clip < 2; clip++) {
                sched_params p = params((sched_kind)k, 6, 2, 0.25, clip, 0);
                p.place.grads = 1;
                if (weights) p.place.optim = 2.0 / 6, p.place.weights = 0.5;   /* units 4, 5; weights 3, 4, 5 */
                else p.place.optim = 0.5;                                        /* units 3, 4, 5 */
                const int all = clip && k == SCHED_VERTICAL;
                assert_int_equal(sched_defers(&p), 1);
                sched_list l = build(&p, 1);
                double stepped[6] = {0}, deferred[6] = {0}, parked[6] = {0};
                for (int i = 0; i < l.n; i++) {
                    const sched_task *t = &l.tasks[i];
                    if (t->op == TASK_OPTIMIZE && t->deferred) deferred[t->unit] += t->hi - t->lo;
                    if (t->op == TASK_OPTIMIZE && !t->deferred) stepped[t->unit] += t->hi - t->lo;
                    if (t->op == TASK_SAVE_GRAD && k == SCHED_VERTICAL) parked[t->unit] += t->hi - t->lo;
                }
                for (int u = 0; u < 6; u++) {
                    const int streams = u >= 3;
                    assert_int_equal(sched_unit_streams(&p, u), streams);
                    const double share = all ? 1.0 : streams ? 0.25 : 0.0;
                    assert_float_equal(sched_deferred_share(&p, u), share, 0);
                    assert_float_equal(deferred[u], share, 1e-12);   /* last iteration's, coming in */
                    assert_float_equal(stepped[u], 1.0 - share, 1e-12);
                    if (k == SCHED_VERTICAL) assert_float_equal(parked[u], share, 1e-12);
                }
                sched_list_free(&l);
                /* AdamW beside a device: the steps in memory defer alpha too */
                p.defer_in_memory = 1;
                for (int u = 0; u < 6; u++) assert_float_equal(sched_deferred_share(&p, u), all ? 1.0 : 0.25, 0);
                p.defer_in_memory = 0;
                /* all in memory: nothing to defer */
                p.place = (placement){0};
                assert_int_equal(sched_defers(&p), all);
            }
}

/* With gradients on the SSD, every step reads gradients that are in memory:
 * it depends on a load of its unit's gradients covering its share, or on
 * the unit's last gradient term with no save in between that gave the
 * buffer up. Vertical parks only the deferred share, horizontal the whole
 * accumulator after every micro-batch. */
static void check_grads_reach_steps(sched_kind k, double alpha, int clip, int deferred_in, int head) {
    sched_params p = params_head(k, 4 + head, 3, alpha, clip, 1, head);
    const int U = p.n_units;
    sched_list l = build(&p, deferred_in);
    double saved_share[5] = {0};
    for (int i = 0; i < l.n; i++) {
        const sched_task *t = &l.tasks[i];
        if (t->op == TASK_SAVE_GRAD) saved_share[t->unit] += t->hi - t->lo;
        if (t->op != TASK_OPTIMIZE) continue;
        int covered = 0;
        for (int j = i - 1; j >= 0 && !covered; j--) {
            const sched_task *s = &l.tasks[j];
            if (sched_grad_unit(s) != t->unit) continue;
            if (s->op == TASK_LOAD_GRAD) {
                assert_true(s->lo <= t->lo && s->hi >= t->hi);
                assert_true(depends(&l, i, j));
                covered = 1;
            } else if (sched_is_grad_task(s->op)) {
                assert_true(depends(&l, i, j));
                covered = 1;
            } else if (s->op == TASK_SAVE_GRAD) {
                break;   /* parked before this step without a load: not in memory */
            }
        }
        assert_true(covered);
    }
    for (int u = 0; u < U; u++) {
        if (k == SCHED_VERTICAL) assert_float_equal(saved_share[u], sched_deferred_share(&p, u), 1e-12);
        else assert_float_equal(saved_share[u], 3.0, 1e-12);   /* M whole accumulators */
    }
    sched_list_free(&l);
}

static void test_gradients_on_ssd(void **state) {
    (void)state;
    const double alphas[] = {0.0, 0.25, 1.0};
    for (int k = 0; k < 2; k++)
        for (int a = 0; a < 3; a++)
            for (int clip = 0; clip < 2; clip++)
                for (int d = 0; d < 2; d++)
                    for (int head = 0; head < 2; head++) check_grads_reach_steps((sched_kind)k, alphas[a], clip, d, head);
}

/* A head of its own: its weights are loaded for the head alone, the
 * embedding unit's only for the embedding (vertical: once each per
 * iteration, where a tied head loads unit 0 twice), the checkpoints are
 * still those of L + 1 inputs, and a head's gradient is complete, and
 * stepped, before the blocks' backward. */
static void test_separate_head(void **state) {
    (void)state;
    const int M = 3;
    for (int head = 0; head < 2; head++) {
        sched_params p = params_head(SCHED_VERTICAL, 4 + head, M, 0.0, 0, 1, head);
        assert_int_equal(sched_head_unit(&p), head ? 4 : 0);
        assert_int_equal(sched_parts(&p, PLACE_ACTS), 4);   /* act[1..4]: three blocks' inputs and the head's */
        assert_int_equal(sched_parts(&p, PLACE_WEIGHTS), 4 + head);
        sched_list l = build(&p, 1);
        int loads[5] = {0}, max_act = 0, head_step = -1, first_block_backward = -1, last_head = -1;
        for (int i = 0; i < l.n; i++) {
            const sched_task *t = &l.tasks[i];
            if (t->op == TASK_LOAD_WEIGHTS) loads[t->unit]++;
            if (t->op == TASK_SAVE_ACT && t->unit > max_act) max_act = t->unit;
            if (t->op == TASK_HEAD) last_head = i;
            if (t->op == TASK_OPTIMIZE && !t->deferred && t->unit == 4) head_step = i;
            if (t->op == TASK_BLOCK_BACKWARD && first_block_backward < 0) first_block_backward = i;
        }
        assert_int_equal(max_act, 4);
        assert_int_equal(loads[0], head ? 1 : 2);
        for (int u = 1; u <= 3; u++) assert_int_equal(loads[u], 2);
        assert_int_equal(loads[4], head);
        if (head) {
            assert_true(head_step > last_head && head_step < first_block_backward);
            assert_true(depends(&l, head_step, last_head));
        }
        sched_list_free(&l);
    }
    /* a head unit needs a block beside it */
    st_error err = {0};
    sched_list l;
    sched_params p = params_head(SCHED_VERTICAL, 2, 2, 0.0, 0, 0, 1);
    assert_int_equal(sched_build(&p, 0, &l, &err), ST_EINVAL);
}

/* Several ranks: every weight load is followed by its unit's gather, which
 * the unit's compute tasks wait for; every unit's gradient is reduced
 * (vertical: once per iteration, after its last gradient task; horizontal:
 * once per micro-batch, after that micro-batch's last term of it), the
 * last reduction before its steps and the norm; in backward the next
 * unit's gather comes before this unit's reduction (so that it can start
 * during this unit's backward); gradients on the SSD are parked after
 * their sum, and a later micro-batch's terms (horizontal) start from a
 * load of what was parked; and the list is otherwise the one-rank list. */
static void check_ranks(const sched_params *one, int deferred_in) {
    sched_params p = *one;
    p.ranks = 3;
    sched_list l = build(&p, deferred_in), l1 = build(one, deferred_in);
    const int U = p.n_units, M = p.micro_batches, horizontal = p.kind == SCHED_HORIZONTAL;
    /* vertical reduces a unit once, after its last term; horizontal each
     * micro-batch's gradient, after that micro-batch's last term */
    const int per_unit = horizontal ? M : 1;
    int *reduced_at = malloc(sizeof(int) * (size_t)U), *last_grad = malloc(sizeof(int) * (size_t)U);
    int *reductions = calloc((size_t)U, sizeof(int)), *reduced_mb = malloc(sizeof(int) * (size_t)U * (size_t)M);
    for (int u = 0; u < U; u++) reduced_at[u] = last_grad[u] = -1;
    for (int i = 0; i < U * M; i++) reduced_mb[i] = 0;
    int others = 0, gather_before = -1;
    int *last_reduce = malloc(sizeof(int) * (size_t)U), *last_save = malloc(sizeof(int) * (size_t)U);
    int *last_load = malloc(sizeof(int) * (size_t)U);
    for (int u = 0; u < U; u++) last_reduce[u] = last_save[u] = last_load[u] = -1;
    for (int i = 0; i < l.n; i++) {
        const sched_task *t = &l.tasks[i];
        /* gradients on the SSD: what is parked is the rank's shard of a sum (after it); a later
           micro-batch's terms start from what was parked (horizontal) */
        if (t->op == TASK_SAVE_GRAD) {
            assert_true(last_reduce[t->unit] >= 0 && depends(&l, i, last_reduce[t->unit]));
            last_save[t->unit] = i;
        }
        if (t->op == TASK_LOAD_GRAD) {   /* (the deferred share comes from the previous list's save) */
            assert_true(last_save[t->unit] >= 0 ? depends(&l, i, last_save[t->unit]) : deferred_in);
            last_load[t->unit] = i;
        }
        if (sched_is_grad_task(t->op) && horizontal && t->mb > 0 && placement_on_ssd(p.place, PLACE_GRADS, sched_grad_unit(t), U)) {
            const int u = sched_grad_unit(t);
            if (t->op != TASK_EMBED_BACKWARD || p.separate_head)   /* tied: the head's term loaded it already */
                assert_true(last_load[u] > last_save[u] && depends(&l, i, last_load[u]));
        }
        if (t->op == TASK_REDUCE_GRADS) last_reduce[t->unit] = i;
        if (t->op == TASK_LOAD_WEIGHTS) {
            assert_true(i + 1 < l.n);
            assert_int_equal(l.tasks[i + 1].op, TASK_GATHER_WEIGHTS);
            assert_int_equal(l.tasks[i + 1].unit, t->unit);
            assert_true(has_dep(&l.tasks[i + 1], i));
        }
        if (t->op == TASK_GATHER_WEIGHTS) gather_before = i;
        if (sched_is_grad_task(t->op)) {
            const int u = sched_grad_unit(t);
            assert_int_equal(reduced_at[u], -1);   /* no term after its last reduction */
            assert_true(t->mb >= 0 && t->mb < M);
            if (horizontal) assert_int_equal(reduced_mb[u * M + t->mb], 0);   /* nor after its micro-batch's */
            last_grad[u] = i;
        }
        if (t->op == TASK_BLOCK_FORWARD || t->op == TASK_BLOCK_BACKWARD || t->op == TASK_HEAD ||
            t->op == TASK_EMBED_FORWARD) {   /* reads its unit's weights: gathered */
            assert_true(gather_before >= 0 && l.tasks[gather_before].unit == t->unit);
            assert_true(depends(&l, i, gather_before));
        }
        if (t->op == TASK_REDUCE_GRADS) {
            const int u = t->unit;
            assert_int_equal(reduced_at[u], -1);
            assert_true(last_grad[u] >= 0 && depends(&l, i, last_grad[u]));
            if (horizontal) {   /* the micro-batch it sums, whose last term came last */
                assert_true(t->mb >= 0 && t->mb < M);
                assert_int_equal(l.tasks[last_grad[u]].mb, t->mb);
                assert_int_equal(reduced_mb[u * M + t->mb], 0);
                reduced_mb[u * M + t->mb] = 1;
            }
            if (++reductions[u] == per_unit) reduced_at[u] = i;
            /* the gather of the unit whose backward comes next (if any) is already there */
            if (t->unit >= 2 && t->unit <= U - 1 - p.separate_head)
                assert_true(gather_before >= 0 && l.tasks[gather_before].unit == t->unit - 1);
        }
        if (t->op == TASK_OPTIMIZE && !t->deferred) assert_true(reduced_at[t->unit] >= 0 && depends(&l, i, reduced_at[t->unit]));
        if (t->op == TASK_GRAD_NORM) {   /* after every reduction: the last, as collectives complete in order */
            int last = -1;
            for (int u = 0; u < U; u++) {
                assert_true(reduced_at[u] >= 0);
                if (reduced_at[u] > last) last = reduced_at[u];
            }
            assert_true(depends(&l, i, last));
        }
        if (task_op_resource(t->op) != RES_NETWORK) others++;
    }
    for (int u = 0; u < U; u++) assert_true(reduced_at[u] >= 0 && reductions[u] == per_unit);
    /* the one-rank list's tasks, and the collectives, where one rank defers
     * the same steps (every step streams through the network with several
     * ranks; on one, only those with state on the SSD do) */
    int same_deferral = 1;
    for (int u = 0; u < U; u++) same_deferral &= sched_deferred_share(&p, u) == sched_deferred_share(one, u);
    if (same_deferral) assert_int_equal(others, l1.n);
    sched_counts c, c1;
    sched_count(&l, &c);
    sched_count(&l1, &c1);
    assert_int_equal(c.gathers, c1.weight_loads);
    if (!same_deferral) assert_true(others >= l1.n);   /* the shares one rank steps at once, split */
    assert_int_equal(c.reduces, U * per_unit);
    assert_int_equal(c1.gathers + c1.reduces, 0);
    free(reduced_at);
    free(last_grad);
    free(reductions);
    free(reduced_mb);
    free(last_reduce);
    free(last_save);
    free(last_load);
    sched_list_free(&l);
    sched_list_free(&l1);
}

static void test_ranks(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++)
        for (int clip = 0; clip < 2; clip++)
            for (int M = 1; M <= 3; M++)
                for (int head = 0; head < 2; head++)
                    for (int placed = 0; placed < 2; placed++) {
                        sched_params p = params_head((sched_kind)k, 4 + head, M, 0.25, clip, 0, head);
                        p.place.weights = p.place.optim = p.place.acts = placed;
                        check_ranks(&p, 0);
                        check_ranks(&p, 1);
                        p.place.grads = placed ? 1.0 : 0.5;   /* gradients on the SSD, all or some */
                        check_ranks(&p, 0);
                        check_ranks(&p, 1);
                    }
}

/* placement_fills on a budget in made-up units: a weight part takes 3, an
 * optimizer part 5, 12 of them in all. Each kind filled first takes all the
 * room it can (4 weight parts, or 2 optimizer parts); one part short, it
 * leaves room for the other (1 optimizer part and 2 weight parts), a split
 * no order of whole fills reaches. When the rest fits whole beside the
 * first, nothing is tried short. */
typedef struct budget_ctx {
    int parts[PLACE_KINDS];
    int budget;
} budget_ctx;

static int fits_budget(placement p, void *ctx) {
    const budget_ctx *b = ctx;
    return 3 * placement_memory_units(p, PLACE_WEIGHTS, b->parts[PLACE_WEIGHTS]) +
               5 * placement_memory_units(p, PLACE_OPTIM, b->parts[PLACE_OPTIM]) <=
           b->budget;
}

static int has(const placement *out, int n, double weights, double optim) {
    for (int i = 0; i < n; i++)
        if (out[i].weights == weights && out[i].optim == optim && out[i].acts == 0 && out[i].grads == 0) return 1;
    return 0;
}

static void test_placement_fills(void **state) {
    (void)state;
    budget_ctx b = {.parts = {10, 10, 1, 1}, .budget = 12};
    placement p = {.weights = 1, .optim = 1}, out[PLACEMENT_FILLS];
    int n = placement_fills(p, b.parts, fits_budget, &b, out);
    assert_true(n >= 3 && n <= PLACEMENT_FILLS);
    assert_true(has(out, n, 0.6, 1.0));   /* weights first: 4 parts in memory */
    assert_true(has(out, n, 1.0, 0.8));   /* optimizer first: 2 parts */
    assert_true(has(out, n, 0.8, 0.9));   /* optimizer one part short, then 2 weight parts */
    for (int i = 0; i < n; i++) assert_true(fits_budget(out[i], &b));
    /* room for everything: every order ends with all in memory, and nothing is tried short */
    b.budget = 80;
    n = placement_fills(p, b.parts, fits_budget, &b, out);
    assert_int_equal(n, 1);
    assert_true(has(out, n, 0, 0));
}

static void test_bad_params(void **state) {
    (void)state;
    st_error err = {0};
    sched_list l;
    sched_params p = params(SCHED_VERTICAL, 1, 2, 0.0, 0, 0);
    assert_int_equal(sched_build(&p, 0, &l, &err), ST_EINVAL);
    p = params(SCHED_VERTICAL, 3, 0, 0.0, 0, 0);
    assert_int_equal(sched_build(&p, 0, &l, &err), ST_EINVAL);
    p = params(SCHED_VERTICAL, 3, 2, 1.5, 0, 0);
    assert_int_equal(sched_build(&p, 0, &l, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "alpha"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weights_read_once_per_pass_vertical),
        cmocka_unit_test(test_weights_read_per_micro_batch_horizontal),
        cmocka_unit_test(test_structure_all_variants),
        cmocka_unit_test(test_snake_order),
        cmocka_unit_test(test_optimizer_shares),
        cmocka_unit_test(test_gradients_on_ssd),
        cmocka_unit_test(test_deferral_follows_streaming),
        cmocka_unit_test(test_separate_head),
        cmocka_unit_test(test_placement_fills),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_device_copies),
        cmocka_unit_test(test_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
