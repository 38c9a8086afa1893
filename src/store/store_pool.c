/* store_pool.c - a fixed pool of aligned host buffers within a byte budget.
 * One arena is allocated up front and cut into equal buffers, so memory
 * never grows and io_uring can register the whole arena once. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "strata/store.h"

struct store_pool {
    pthread_mutex_t mu;
    pthread_cond_t freed;
    char *arena;
    uint64_t buffer_bytes;
    int count;
    int n_free;
    int *free_stack;           /* indices of free buffers */
    unsigned char *in_use;     /* per buffer, to ignore double releases */
    io_engine *engine;
};

st_status store_pool_create(uint64_t budget_bytes, uint64_t buffer_bytes, io_engine *engine, store_pool **out,
                            st_error *err) {
    if (buffer_bytes == 0 || buffer_bytes % 4096)
        return st_fail(err, ST_EINVAL, "buffer pool: buffer size %llu must be a positive multiple of 4096",
                       (unsigned long long)buffer_bytes);
    uint64_t count = budget_bytes / buffer_bytes;
    if (count == 0) {
        char b[32], s[32];
        return st_fail(err, ST_ENOMEM, "buffer pool: a budget of %s does not hold one buffer of %s",
                       st_format_bytes((double)budget_bytes, b, sizeof b),
                       st_format_bytes((double)buffer_bytes, s, sizeof s));
    }
    if (count > 1u << 20) return st_fail(err, ST_EINVAL, "buffer pool: %llu buffers is too many", (unsigned long long)count);
    store_pool *p = calloc(1, sizeof *p);
    if (!p) return st_fail(err, ST_ENOMEM, "buffer pool: out of memory");
    p->buffer_bytes = buffer_bytes;
    p->count = (int)count;
    p->arena = st_alloc_io((size_t)(count * buffer_bytes));
    p->free_stack = malloc(count * sizeof *p->free_stack);
    p->in_use = calloc(count, 1);
    if (!p->arena || !p->free_stack || !p->in_use) {
        char b[32];
        st_free_aligned(p->arena);
        free(p->free_stack);
        free(p->in_use);
        free(p);
        return st_fail(err, ST_ENOMEM, "buffer pool: cannot allocate %s",
                       st_format_bytes((double)(count * buffer_bytes), b, sizeof b));
    }
    for (int i = 0; i < p->count; i++) p->free_stack[i] = p->count - 1 - i;   /* hand out low addresses first */
    p->n_free = p->count;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->freed, NULL);
    if (engine) {
        st_status s = io_engine_register_buffer(engine, p->arena, (size_t)(count * buffer_bytes), err);
        if (s != ST_OK) {
            store_pool_destroy(p);
            return s;
        }
        p->engine = engine;
    }
    *out = p;
    return ST_OK;
}

void store_pool_destroy(store_pool *p) {
    if (!p) return;
    if (p->engine) io_engine_unregister_buffer(p->engine, p->arena);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->freed);
    st_free_aligned(p->arena);
    free(p->free_stack);
    free(p->in_use);
    free(p);
}

static void *take(store_pool *p) {
    int i = p->free_stack[--p->n_free];
    p->in_use[i] = 1;
    return p->arena + (uint64_t)i * p->buffer_bytes;
}

void *store_pool_acquire(store_pool *p) {
    pthread_mutex_lock(&p->mu);
    while (p->n_free == 0) pthread_cond_wait(&p->freed, &p->mu);
    void *b = take(p);
    pthread_mutex_unlock(&p->mu);
    return b;
}

void *store_pool_try_acquire(store_pool *p) {
    pthread_mutex_lock(&p->mu);
    void *b = p->n_free ? take(p) : NULL;
    pthread_mutex_unlock(&p->mu);
    return b;
}

void *store_pool_acquire_timeout(store_pool *p, double seconds) {
    /* Negative or NaN: do not wait (a negative tv_nsec would make
     * pthread_cond_timedwait fail with EINVAL forever); cap absurd waits. */
    if (!(seconds > 0)) seconds = 0;
    if (seconds > 1e9) seconds = 1e9;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double whole = (double)(long)seconds;
    until.tv_sec += (time_t)whole;
    until.tv_nsec += (long)((seconds - whole) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->mu);
    int rc = 0;
    while (p->n_free == 0 && rc == 0) rc = pthread_cond_timedwait(&p->freed, &p->mu, &until);
    void *b = p->n_free ? take(p) : NULL;
    pthread_mutex_unlock(&p->mu);
    return b;
}

void store_pool_release(store_pool *p, void *buf) {
    if (!buf) return;
    char *c = buf;
    if (c < p->arena || (uint64_t)(c - p->arena) % p->buffer_bytes) return;   /* not one of ours */
    uint64_t i = (uint64_t)(c - p->arena) / p->buffer_bytes;
    if (i >= (uint64_t)p->count) return;
    pthread_mutex_lock(&p->mu);
    if (p->in_use[i]) {
        p->in_use[i] = 0;
        p->free_stack[p->n_free++] = (int)i;
        pthread_cond_signal(&p->freed);
    }
    pthread_mutex_unlock(&p->mu);
}

uint64_t store_pool_buffer_bytes(const store_pool *p) { return p->buffer_bytes; }
int store_pool_count(const store_pool *p) { return p->count; }

int store_pool_in_use(store_pool *p) {
    pthread_mutex_lock(&p->mu);
    int n = p->count - p->n_free;
    pthread_mutex_unlock(&p->mu);
    return n;
}

uint64_t store_pool_allocated_bytes(const store_pool *p) { return (uint64_t)p->count * p->buffer_bytes; }
