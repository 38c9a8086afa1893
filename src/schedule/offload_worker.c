/* offload_worker.c - the optimizer's lanes (offload_internal.h): a thread
 * each, running the TASK_OPTIMIZE jobs of its units in list order while
 * compute goes on; a unit's weights are loaded only after its pending jobs
 * are done. One lock guards both queues: the waits are for a unit's jobs
 * or for all of them, whichever lane has them. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "schedule/offload_internal.h"

typedef struct lane_arg {
    opt_worker *w;
    int lane;
} lane_arg;

static void *lane_main(void *arg) {
    opt_worker *w = ((lane_arg *)arg)->w;
    const int index = ((lane_arg *)arg)->lane;
    free(arg);
    opt_lane *ln = &w->lane[index];
    omp_set_num_threads(1);   /* compute keeps the cores' thread team; the optimizer streams */
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (ln->count == 0 && !w->stop) pthread_cond_wait(&ln->job_ready, &w->lock);
        if (ln->count == 0) break;
        opt_job job = ln->jobs[ln->head];
        pthread_mutex_unlock(&w->lock);
        st_error err = {0};
        double io = 0;
        const double t0 = st_now();
        st_status s = w->run(w->ctx, &job, &io, &err);
        const double t1 = st_now();
        if (w->env->tr) {
            char name[64];
            snprintf(name, sizeof name, "adamw u%d [%.2f, %.2f)%s", job.task.unit, job.task.lo, job.task.hi,
                     job.task.deferred ? " deferred" : "");
            trace_span(w->env->tr, w->env->lane_optimizer[index], name, t0, t1);
        }
        pthread_mutex_lock(&w->lock);
        ln->busy_s += t1 - t0;
        ln->io_s += io;
        ln->head = (ln->head + 1) % w->cap;
        ln->count--;
        w->unit_pending[job.task.unit]--;
        if (s != ST_OK && w->status == ST_OK) {
            w->status = s;
            w->error = err;
        }
        pthread_cond_broadcast(&w->job_done);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* Frees what start made (no lane thread is running). */
static void release(opt_worker *w) {
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->job_done);
    for (int i = 0; i < LAYOUT_LANES; i++) {
        pthread_cond_destroy(&w->lane[i].job_ready);
        free(w->lane[i].jobs);
        w->lane[i].jobs = NULL;
    }
    free(w->unit_pending);
    w->unit_pending = NULL;
}

/* Stops and joins the lanes that run; they finish their queued jobs first. */
static void join_lanes(opt_worker *w) {
    pthread_mutex_lock(&w->lock);
    w->stop = 1;
    for (int i = 0; i < LAYOUT_LANES; i++) pthread_cond_broadcast(&w->lane[i].job_ready);
    pthread_mutex_unlock(&w->lock);
    for (int i = 0; i < LAYOUT_LANES; i++)
        if (w->lane[i].started) {
            pthread_join(w->lane[i].thread, NULL);
            w->lane[i].started = 0;
        }
}

st_status opt_worker_start(opt_worker *w, exec_env *env, int n_units, opt_job_fn run, void *ctx, st_error *err) {
    *w = (opt_worker){.env = env, .run = run, .ctx = ctx, .n_units = n_units, .cap = 4 * n_units + 8};
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->job_done, NULL);
    int ok = (w->unit_pending = calloc((size_t)n_units, sizeof(int))) != NULL;
    for (int i = 0; i < LAYOUT_LANES; i++) {
        pthread_cond_init(&w->lane[i].job_ready, NULL);
        ok &= (w->lane[i].jobs = malloc(sizeof(opt_job) * (size_t)w->cap)) != NULL;
    }
    if (!ok) {
        release(w);
        return st_fail(err, ST_ENOMEM, "out of memory for the optimizer's queues");
    }
    for (int i = 0; i < LAYOUT_LANES; i++) {
        lane_arg *a = malloc(sizeof *a);
        if (a) *a = (lane_arg){.w = w, .lane = i};
        if (!a || pthread_create(&w->lane[i].thread, NULL, lane_main, a) != 0) {
            free(a);
            join_lanes(w);   /* the lanes started so far */
            release(w);
            return st_fail(err, ST_ENOMEM, "cannot start the optimizer's threads");
        }
        w->lane[i].started = 1;
    }
    w->started = 1;
    return ST_OK;
}

void opt_worker_stop(opt_worker *w) {
    if (!w->started) return;
    join_lanes(w);
    release(w);
    w->started = 0;
}

void opt_worker_enqueue(opt_worker *w, const opt_job *job) {
    opt_lane *ln = &w->lane[layout_opt_lane(w->env->lay, job->task.unit)];
    pthread_mutex_lock(&w->lock);
    while (ln->count == w->cap) pthread_cond_wait(&w->job_done, &w->lock);
    ln->jobs[(ln->head + ln->count) % w->cap] = *job;
    ln->count++;
    w->unit_pending[job->task.unit]++;
    pthread_cond_signal(&ln->job_ready);
    pthread_mutex_unlock(&w->lock);
}

/* Jobs queued or running on every lane (under the lock). */
static int all_pending(const opt_worker *w) {
    int n = 0;
    for (int i = 0; i < LAYOUT_LANES; i++) n += w->lane[i].count;
    return n;
}

st_status opt_worker_wait(opt_worker *w, int u, st_error *err) {
    double t0 = st_now();
    pthread_mutex_lock(&w->lock);
    while (u >= 0 ? w->unit_pending[u] > 0 : all_pending(w) > 0) pthread_cond_wait(&w->job_done, &w->lock);
    st_status s = w->status;
    if (s != ST_OK && err) *err = w->error;
    pthread_mutex_unlock(&w->lock);
    double waited = st_now() - t0;
    w->env->optimizer_wait_s += waited;
    if (w->env->tr && waited > 1e-4) trace_span(w->env->tr, w->env->lane_compute, "wait for optimizer", t0, t0 + waited);
    return s;
}

int opt_worker_pending(opt_worker *w, int u) {
    pthread_mutex_lock(&w->lock);
    int pending = w->unit_pending[u];
    pthread_mutex_unlock(&w->lock);
    return pending;
}

void opt_worker_times(opt_worker *w, int lane, double *busy_s, double *io_s) {
    *busy_s = 0;
    if (io_s) *io_s = 0;
    if (!w->started) return;
    pthread_mutex_lock(&w->lock);
    *busy_s = w->lane[lane].busy_s;
    if (io_s) *io_s = w->lane[lane].io_s;
    pthread_mutex_unlock(&w->lock);
}
