/* sched_analysis.c - what the consumers of a task list need to know about
 * it beyond each task (strata/schedule.h): computed once per list. */
#include <stdlib.h>
#include <string.h>

#include "strata/schedule.h"

int sched_load_kind(task_op op) {
    return op == TASK_LOAD_WEIGHTS ? SCHED_LOAD_WEIGHTS
         : op == TASK_LOAD_ACT     ? SCHED_LOAD_ACTS
         : op == TASK_LOAD_GRAD    ? SCHED_LOAD_GRADS
                                   : -1;
}

int sched_is_grad_task(task_op op) {
    return op == TASK_HEAD || op == TASK_BLOCK_BACKWARD || op == TASK_EMBED_BACKWARD;
}

int sched_grad_unit(const sched_task *t) {
    switch (t->op) {
    case TASK_EMBED_BACKWARD: return 0;
    case TASK_HEAD: case TASK_BLOCK_BACKWARD: case TASK_SAVE_GRAD: case TASK_LOAD_GRAD: case TASK_OPTIMIZE:
    case TASK_REDUCE_GRADS: return t->unit;
    default: return -1;
    }
}

void sched_analysis_free(sched_analysis *a) {
    if (!a) return;
    free(a->next_compute);
    free(a->next_network);
    free(a->next_load);
    free(a->next_grad_load);
    free(a->first_grad);
    free(a->next_first_grad);
    free(a->last_grad);
    free(a->grad_leave);
    free(a->grad_release);
    free(a->last_grad_task);
    memset(a, 0, sizeof *a);
}

st_status sched_analyze(const sched_list *l, int n_units, sched_analysis *a, st_error *err) {
    memset(a, 0, sizeof *a);
    const int n = l->n;
    a->n = n;
    a->n_units = n_units;
    const size_t tasks = (size_t)n + 1, units = (size_t)n_units;
    a->next_compute = malloc(sizeof(int) * tasks);
    a->next_network = malloc(sizeof(int) * tasks);
    a->next_load = malloc(sizeof(int) * tasks);
    a->next_grad_load = malloc(sizeof(int) * tasks);
    a->first_grad = calloc(tasks, 1);
    a->next_first_grad = malloc(sizeof(int) * tasks);
    a->last_grad = calloc(tasks, 1);
    a->grad_leave = calloc(tasks, 1);
    a->grad_release = calloc(tasks, 1);
    a->last_grad_task = malloc(sizeof(int) * units);
    int *next_use = malloc(sizeof(int) * units);   /* the unit's next use of its gradient buffer */
    char *seen = calloc(units, 1);
    if (!a->next_compute || !a->next_network || !a->next_load || !a->next_grad_load || !a->first_grad || !a->next_first_grad || !a->last_grad ||
        !a->grad_leave || !a->grad_release || !a->last_grad_task || !next_use || !seen) {
        free(next_use);
        free(seen);
        sched_analysis_free(a);
        return st_fail(err, ST_ENOMEM, "out of memory analysing a task list");
    }
    for (int u = 0; u < n_units; u++) a->last_grad_task[u] = next_use[u] = -1;
    for (int i = 0; i < n; i++) {
        const sched_task *t = &l->tasks[i];
        /* several ranks: after a reduction a unit's terms start in a fresh buffer */
        if (t->op == TASK_REDUCE_GRADS && t->unit >= 0 && t->unit < n_units) seen[t->unit] = 0;
        if (!sched_is_grad_task(t->op)) continue;
        if (!seen[t->unit]) a->first_grad[i] = 1, seen[t->unit] = 1;
        a->last_grad_task[t->unit] = i;
    }
    for (int u = 0; u < n_units; u++)
        if (a->last_grad_task[u] >= 0) a->last_grad[a->last_grad_task[u]] = 1;
    a->next_first_grad[n] = n;
    for (int i = n - 1; i >= 0; i--) a->next_first_grad[i] = i + 1 < n && a->first_grad[i + 1] ? i + 1 : a->next_first_grad[i + 1];
    int next[SCHED_LOAD_KINDS] = {-1, -1, -1};
    int next_grad_unit = -1;   /* unit of the next gradient task, -1 when none */
    a->next_compute[n] = a->next_network[n] = n;
    for (int i = n - 1; i >= 0; i--) {
        const sched_task *t = &l->tasks[i];
        a->next_compute[i] = task_op_resource(t->op) == RES_COMPUTE ? i : a->next_compute[i + 1];
        a->next_network[i] = task_op_resource(t->op) == RES_NETWORK ? i : a->next_network[i + 1];
        a->next_grad_load[i] = next[SCHED_LOAD_GRADS];
        const int k = sched_load_kind(t->op);
        a->next_load[i] = k >= 0 ? next[k] : -1;
        if (k >= 0) next[k] = i;
        if (sched_is_grad_task(t->op)) {
            a->grad_leave[i] = t->unit != next_grad_unit;
            next_grad_unit = t->unit;
        }
        const int u = sched_grad_unit(t);
        if (u < 0) continue;
        const int nu = next_use[u];
        a->grad_release[i] = t->op == TASK_SAVE_GRAD || nu < 0 || l->tasks[nu].op == TASK_LOAD_GRAD ||
                             (t->op == TASK_OPTIMIZE && l->tasks[nu].op != TASK_SAVE_GRAD);
        next_use[u] = i;
    }
    free(next_use);
    free(seen);
    return ST_OK;
}

int sched_inputs_final(const sched_list *l, int j, int i) {
    const sched_task *t = &l->tasks[j];
    for (int d = 0; d < t->n_deps; d++)
        if (t->deps[d] > i) return 0;
    return 1;
}

int sched_read_ahead(const sched_analysis *a, const sched_list *l, int i, int kind) {
    int j = -1;
    if (kind == SCHED_LOAD_GRADS) {
        j = a->next_grad_load[i];
        if (j >= 0 && a->next_first_grad[i] < j) j = -1;
    }
    else if (sched_load_kind(l->tasks[i].op) == kind) j = a->next_load[i];
    return j >= 0 && sched_inputs_final(l, j, i) ? j : -1;
}
