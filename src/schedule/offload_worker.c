/* offload_worker.c - the optimizer thread (offload_internal.h): it runs
 * TASK_OPTIMIZE jobs in list order while compute goes on; a unit's weights
 * are loaded only after its pending jobs are done. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "schedule/offload_internal.h"

static void *worker_main(void *arg) {
    opt_worker *w = arg;
    omp_set_num_threads(1);   /* compute keeps the cores' thread team; the optimizer streams */
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (w->count == 0 && !w->stop) pthread_cond_wait(&w->job_ready, &w->lock);
        if (w->count == 0) break;
        opt_job job = w->jobs[w->head];
        pthread_mutex_unlock(&w->lock);
        st_error err = {0};
        const double t0 = st_now(), io0 = w->env->worker_io_s;
        st_status s = w->run(w->ctx, &job, &err);
        const double t1 = st_now(), io = w->env->worker_io_s - io0;
        if (w->env->tr) {
            char name[64];
            snprintf(name, sizeof name, "adamw u%d [%.2f, %.2f)%s", job.task.unit, job.task.lo, job.task.hi,
                     job.task.deferred ? " deferred" : "");
            trace_span(w->env->tr, w->env->lane_optimizer, name, t0, t1);
        }
        pthread_mutex_lock(&w->lock);
        w->busy_s += t1 - t0;
        w->io_s += io;
        w->head = (w->head + 1) % w->cap;
        w->count--;
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

/* Frees what start made (the thread is not running). */
static void release(opt_worker *w) {
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->job_ready);
    pthread_cond_destroy(&w->job_done);
    free(w->jobs);
    free(w->unit_pending);
    w->jobs = NULL, w->unit_pending = NULL;
}

st_status opt_worker_start(opt_worker *w, exec_env *env, int n_units, opt_job_fn run, void *ctx, st_error *err) {
    *w = (opt_worker){.env = env, .run = run, .ctx = ctx, .n_units = n_units, .cap = 4 * n_units + 8};
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->job_ready, NULL);
    pthread_cond_init(&w->job_done, NULL);
    w->jobs = malloc(sizeof(opt_job) * (size_t)w->cap);
    w->unit_pending = calloc((size_t)n_units, sizeof(int));
    if (!w->jobs || !w->unit_pending) {
        release(w);
        return st_fail(err, ST_ENOMEM, "out of memory for the optimizer's queue");
    }
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        release(w);
        return st_fail(err, ST_ENOMEM, "cannot start the optimizer thread");
    }
    w->started = 1;
    return ST_OK;
}

void opt_worker_stop(opt_worker *w) {
    if (!w->started) return;
    pthread_mutex_lock(&w->lock);
    w->stop = 1;
    pthread_cond_broadcast(&w->job_ready);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);   /* it finishes the queued jobs first */
    release(w);
    w->started = 0;
}

void opt_worker_enqueue(opt_worker *w, const opt_job *job) {
    pthread_mutex_lock(&w->lock);
    while (w->count == w->cap) pthread_cond_wait(&w->job_done, &w->lock);
    w->jobs[(w->head + w->count) % w->cap] = *job;
    w->count++;
    w->unit_pending[job->task.unit]++;
    pthread_cond_signal(&w->job_ready);
    pthread_mutex_unlock(&w->lock);
}

st_status opt_worker_wait(opt_worker *w, int u, st_error *err) {
    double t0 = st_now();
    pthread_mutex_lock(&w->lock);
    while (u >= 0 ? w->unit_pending[u] > 0 : w->count > 0) pthread_cond_wait(&w->job_done, &w->lock);
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

void opt_worker_times(opt_worker *w, double *busy_s, double *io_s) {
    *busy_s = *io_s = 0;
    if (!w->started) return;
    pthread_mutex_lock(&w->lock);
    *busy_s = w->busy_s, *io_s = w->io_s;
    pthread_mutex_unlock(&w->lock);
}
