/* backend_check.c - the checking backend (strata/backend.h): the CPU
 * backend's code on memory that only the backend's ops may touch.
 *
 * Each allocation is an mmap'd region of whole pages, PROT_NONE whenever no
 * op is running on it, so a direct host read or write of device memory
 * faults. Each op first checks its arguments: every device pointer, with
 * the extent the op touches, must lie inside one allocation (the host side
 * of to_device/to_host must lie outside all of them); otherwise it prints
 * what is wrong, naming the op and the argument, and aborts. Then it opens
 * the regions involved for reading and writing, runs the CPU backend's op
 * and closes them again. Ops may run from several threads at once (the
 * executor's optimizer thread beside compute): each region counts the ops
 * using it, and is closed only when the last one leaves. */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "strata/backend.h"

typedef struct region {
    struct region *next;
    uintptr_t base;    /* the mapping, page aligned; the allocation starts here */
    size_t bytes;      /* as asked for: an op's extents must lie within these */
    size_t mapped;     /* bytes rounded up to whole pages (at least one) */
    int users;         /* ops running on it now: readable and writable while > 0 */
} region;

/* The process's device memory: one table, as a device has one address space
 * per process, shared by every thread that runs ops; the mutex guards the
 * list and the use counts. */
static struct {
    pthread_mutex_t lock;
    region *head;
} device = {PTHREAD_MUTEX_INITIALIZER, NULL};

/* A misuse is a bug in the caller, found where it happens: the message goes
 * to stderr (this backend exists to say it), then abort for a core and a
 * stack. Called with or without the lock: the process ends either way. */
__attribute__((format(printf, 2, 3), noreturn)) static void die(const char *op, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "check backend: %s: ", op);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

/* The region that holds [p, p + bytes), or NULL. Lock held. */
static region *region_holding(const void *p, size_t bytes) {
    const uintptr_t a = (uintptr_t)p;
    for (region *r = device.head; r; r = r->next)
        if (a >= r->base && a - r->base <= r->bytes && bytes <= r->bytes - (a - r->base)) return r;
    return NULL;
}

/* The region that [p, p + bytes) overlaps (or starts in), or NULL. Lock held. */
static region *region_overlapping(const void *p, size_t bytes) {
    const uintptr_t a = (uintptr_t)p;
    for (region *r = device.head; r; r = r->next)
        if (a < r->base + r->mapped && (a >= r->base || r->base - a < bytes)) return r;
    return NULL;
}

static void protect(const char *op, region *r, int prot) {
    if (mprotect((void *)r->base, r->mapped, prot) != 0) die(op, "mprotect of %zu bytes failed", r->mapped);
}

/* --- an op's arguments ------------------------------------------------------- */

/* One pointer argument of an op: where it is and how many bytes the op
 * touches from there. */
typedef struct arg {
    const char *name;
    const void *p;
    size_t bytes;
    enum { DEVICE, DEVICE_OR_NULL, HOST } kind;
} arg;

enum { MAX_ARGS = 8 };

/* The regions an op is running on, each once. */
typedef struct in_use {
    const char *op;
    region *r[MAX_ARGS];
    int n;
} in_use;

/* Checks an op's arguments and opens the regions of its device arguments. */
static in_use enter(const char *op, const arg *args, int n) {
    in_use u = {.op = op};
    pthread_mutex_lock(&device.lock);
    for (int i = 0; i < n; i++) {
        const arg *a = &args[i];
        if (a->kind == HOST) {
            if (region_overlapping(a->p, a->bytes))
                die(op, "argument '%s' is device memory (%zu bytes at %p); it must be host memory", a->name,
                    a->bytes, a->p);
            continue;
        }
        if (!a->p) {
            if (a->kind == DEVICE_OR_NULL) continue;
            die(op, "argument '%s' is NULL", a->name);
        }
        region *r = region_holding(a->p, a->bytes);
        if (!r) {
            region *o = region_overlapping(a->p, 1);
            if (o)
                die(op, "argument '%s' (%zu bytes at offset %zu) runs past its device allocation of %zu bytes",
                    a->name, a->bytes, (size_t)((uintptr_t)a->p - o->base), o->bytes);
            die(op, "argument '%s' is not device memory (%zu bytes at %p)", a->name, a->bytes, a->p);
        }
        int seen = 0;
        for (int j = 0; j < u.n; j++) seen |= u.r[j] == r;
        if (!seen) u.r[u.n++] = r;
    }
    for (int j = 0; j < u.n; j++)
        if (u.r[j]->users++ == 0) protect(op, u.r[j], PROT_READ | PROT_WRITE);
    pthread_mutex_unlock(&device.lock);
    return u;
}

/* Closes the op's regions that no other op is using. */
static void leave(const in_use *u) {
    pthread_mutex_lock(&device.lock);
    for (int j = 0; j < u->n; j++)
        if (--u->r[j]->users == 0) protect(u->op, u->r[j], PROT_NONE);
    pthread_mutex_unlock(&device.lock);
}

#define ENTER(op, ...) enter(op, (const arg[]){__VA_ARGS__}, (int)(sizeof((const arg[]){__VA_ARGS__}) / sizeof(arg)))
#define DEV(name, bytes) {#name, name, bytes, DEVICE}
#define DEV_OR_NULL(name, bytes) {#name, name, bytes, DEVICE_OR_NULL}
#define HOST_MEM(name, bytes) {#name, name, bytes, HOST}

static size_t floats(size_t n) { return n * sizeof(float); }

/* Floats of a row-major [rows, cols] matrix with rows ld apart (0 when empty). */
static size_t matrix(int rows, int cols, int ld) {
    return rows > 0 && cols > 0 ? floats((size_t)(rows - 1) * (size_t)ld + (size_t)cols) : 0;
}

static const compute_backend *cpu(void) { return compute_backend_cpu(); }

/* --- memory -------------------------------------------------------------------- */

static void *check_alloc(const compute_backend *be, size_t bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (bytes > SIZE_MAX - page) return NULL;
    const size_t mapped = bytes == 0 ? page : (bytes + page - 1) / page * page;
    void *p = mmap(NULL, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    region *r = malloc(sizeof *r);
    if (!r) {
        munmap(p, mapped);
        return NULL;
    }
    *r = (region){.base = (uintptr_t)p, .bytes = bytes, .mapped = mapped};
    pthread_mutex_lock(&device.lock);
    r->next = device.head;
    device.head = r;
    pthread_mutex_unlock(&device.lock);
    return p;
}

static void check_free(const compute_backend *be, void *dev) {
    if (!dev) return;
    pthread_mutex_lock(&device.lock);
    region **link = &device.head;
    while (*link && (*link)->base != (uintptr_t)dev) link = &(*link)->next;
    region *r = *link;
    if (!r) die("free", "argument 'dev' is not the start of a device allocation (%p)", dev);
    if (r->users) die("free", "argument 'dev' is in use by %d op(s) on another thread", r->users);
    *link = r->next;
    pthread_mutex_unlock(&device.lock);
    munmap((void *)r->base, r->mapped);
    free(r);
}

static void check_to_device(const compute_backend *be, void *dst_dev, const void *src_host, size_t bytes) {
    in_use u = ENTER("to_device", DEV(dst_dev, bytes), HOST_MEM(src_host, bytes));
    cpu()->to_device(cpu(), dst_dev, src_host, bytes);
    leave(&u);
}

static void check_to_host(const compute_backend *be, void *dst_host, const void *src_dev, size_t bytes) {
    in_use u = ENTER("to_host", HOST_MEM(dst_host, bytes), DEV(src_dev, bytes));
    cpu()->to_host(cpu(), dst_host, src_dev, bytes);
    leave(&u);
}

static void check_copy(const compute_backend *be, void *dst_dev, const void *src_dev, size_t bytes) {
    in_use u = ENTER("copy", DEV(dst_dev, bytes), DEV(src_dev, bytes));
    cpu()->copy(cpu(), dst_dev, src_dev, bytes);
    leave(&u);
}

static void check_memset(const compute_backend *be, void *dst_dev, int byte, size_t bytes) {
    in_use u = ENTER("memset", DEV(dst_dev, bytes));
    cpu()->memset(cpu(), dst_dev, byte, bytes);
    leave(&u);
}

/* --- kernels --------------------------------------------------------------------- */

static void check_layernorm_forward(const compute_backend *be, float *out, float *mean, float *rstd,
                                    const float *inp, const float *w, const float *b, int N, int C) {
    const size_t NC = floats((size_t)N * C);
    in_use u = ENTER("layernorm_forward", DEV(out, NC), DEV(mean, floats(N)), DEV(rstd, floats(N)), DEV(inp, NC),
                     DEV(w, floats(C)), DEV(b, floats(C)));
    cpu()->layernorm_forward(cpu(), out, mean, rstd, inp, w, b, N, C);
    leave(&u);
}

static void check_layernorm_backward(const compute_backend *be, float *dinp, float *dw, float *db,
                                     const float *dout, const float *inp, const float *w, const float *mean,
                                     const float *rstd, int N, int C) {
    const size_t NC = floats((size_t)N * C);
    in_use u = ENTER("layernorm_backward", DEV(dinp, NC), DEV(dw, floats(C)), DEV(db, floats(C)), DEV(dout, NC),
                     DEV(inp, NC), DEV(w, floats(C)), DEV(mean, floats(N)), DEV(rstd, floats(N)));
    cpu()->layernorm_backward(cpu(), dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    leave(&u);
}

static void check_matmul_forward(const compute_backend *be, float *out, const float *inp, const float *w,
                                 const float *bias, int N, int IC, int OC) {
    in_use u = ENTER("matmul_forward", DEV(out, floats((size_t)N * OC)), DEV(inp, floats((size_t)N * IC)),
                     DEV(w, floats((size_t)IC * OC)), DEV_OR_NULL(bias, floats(OC)));
    cpu()->matmul_forward(cpu(), out, inp, w, bias, N, IC, OC);
    leave(&u);
}

static void check_matmul_backward(const compute_backend *be, float *dinp, float *dw, float *dbias,
                                  const float *dout, const float *inp, const float *w, int N, int IC, int OC) {
    in_use u = ENTER("matmul_backward", DEV_OR_NULL(dinp, floats((size_t)N * IC)), DEV(dw, floats((size_t)IC * OC)),
                     DEV_OR_NULL(dbias, floats(OC)), DEV(dout, floats((size_t)N * OC)),
                     DEV(inp, floats((size_t)N * IC)), DEV(w, floats((size_t)IC * OC)));
    cpu()->matmul_backward(cpu(), dinp, dw, dbias, dout, inp, w, N, IC, OC);
    leave(&u);
}

/* Floats of a qkv row: NH query heads and NKV key and value heads of C / NH. */
static size_t qkv_width(int C, int NH, int NKV) { return (size_t)C + 2 * (size_t)NKV * (size_t)(C / NH); }

static void check_attention_forward(const compute_backend *be, float *out, float *att, const float *qkv, int B,
                                    int T, int C, int NH, int NKV) {
    const size_t BT = (size_t)B * T;
    if (NH <= 0 || NKV <= 0 || NH % NKV != 0) die("attention_forward", "NH %d is not a multiple of NKV %d", NH, NKV);
    in_use u = ENTER("attention_forward", DEV(out, floats(BT * C)), DEV(att, floats((size_t)B * NH * T * T)),
                     DEV(qkv, floats(BT * qkv_width(C, NH, NKV))));
    cpu()->attention_forward(cpu(), out, att, qkv, B, T, C, NH, NKV);
    leave(&u);
}

static void check_attention_backward(const compute_backend *be, float *dqkv, float *dpre, const float *dout,
                                     const float *qkv, const float *att, int B, int T, int C, int NH, int NKV) {
    const size_t BT = (size_t)B * T, BHTT = floats((size_t)B * NH * T * T);
    if (NH <= 0 || NKV <= 0 || NH % NKV != 0) die("attention_backward", "NH %d is not a multiple of NKV %d", NH, NKV);
    const size_t W = qkv_width(C, NH, NKV);
    in_use u = ENTER("attention_backward", DEV(dqkv, floats(BT * W)), DEV(dpre, BHTT), DEV(dout, floats(BT * C)),
                     DEV(qkv, floats(BT * W)), DEV(att, BHTT));
    cpu()->attention_backward(cpu(), dqkv, dpre, dout, qkv, att, B, T, C, NH, NKV);
    leave(&u);
}

/* Beside the extents, the positions: a write past max_len would land in the
 * next head's rows, inside the allocation, where no extent check sees it. */
static void check_positions(const char *op, int N, int pos, int max_len, int NH, int NKV) {
    if (N < 1 || pos < 0 || pos + N > max_len) die(op, "positions %d .. %d are outside the cache's %d", pos, pos + N - 1, max_len);
    if (NKV < 1 || NH % NKV) die(op, "%d query heads do not share %d key/value heads evenly", NH, NKV);
}

static void check_kv_cache_write(const compute_backend *be, float *k_cache, float *v_cache, const float *k,
                                 const float *v, int ld, int N, int pos, int max_len, int NKV, int hs) {
    check_positions("kv_cache_write", N, pos, max_len, NKV, NKV);
    const size_t cache = floats((size_t)NKV * max_len * hs);
    in_use u = ENTER("kv_cache_write", DEV(k_cache, cache), DEV(v_cache, cache), DEV(k, matrix(N, NKV * hs, ld)),
                     DEV(v, matrix(N, NKV * hs, ld)));
    cpu()->kv_cache_write(cpu(), k_cache, v_cache, k, v, ld, N, pos, max_len, NKV, hs);
    leave(&u);
}

static void check_attention_cached_forward(const compute_backend *be, float *out, float *att, const float *q, int ldq,
                                           const float *k_cache, const float *v_cache, int N, int pos, int max_len,
                                           int NH, int NKV, int hs) {
    check_positions("attention_cached_forward", N, pos, max_len, NH, NKV);
    const size_t cache = floats((size_t)NKV * max_len * hs);
    in_use u = ENTER("attention_cached_forward", DEV(out, floats((size_t)N * NH * hs)),
                     DEV(att, floats((size_t)NH * N * (pos + N))), DEV(q, matrix(N, NH * hs, ldq)),
                     DEV(k_cache, cache), DEV(v_cache, cache));
    cpu()->attention_cached_forward(cpu(), out, att, q, ldq, k_cache, v_cache, N, pos, max_len, NH, NKV, hs);
    leave(&u);
}

static void check_gelu_forward(const compute_backend *be, float *out, const float *inp, size_t n) {
    in_use u = ENTER("gelu_forward", DEV(out, floats(n)), DEV(inp, floats(n)));
    cpu()->gelu_forward(cpu(), out, inp, n);
    leave(&u);
}

static void check_gelu_backward(const compute_backend *be, float *dinout, const float *inp, size_t n) {
    in_use u = ENTER("gelu_backward", DEV(dinout, floats(n)), DEV(inp, floats(n)));
    cpu()->gelu_backward(cpu(), dinout, inp, n);
    leave(&u);
}

static void check_residual_forward(const compute_backend *be, float *out, const float *a, const float *b, size_t n) {
    in_use u = ENTER("residual_forward", DEV(out, floats(n)), DEV(a, floats(n)), DEV(b, floats(n)));
    cpu()->residual_forward(cpu(), out, a, b, n);
    leave(&u);
}

static void check_crossentropy_softmax(const compute_backend *be, float *logits, float *losses,
                                       const int32_t *targets, int N, int V, int Vp, float dlogits_scale) {
    in_use u = ENTER("crossentropy_softmax", DEV(logits, floats((size_t)N * Vp)), DEV(losses, floats(N)),
                     DEV(targets, (size_t)N * sizeof(int32_t)));
    cpu()->crossentropy_softmax(cpu(), logits, losses, targets, N, V, Vp, dlogits_scale);
    leave(&u);
}

static void check_embed_forward(const compute_backend *be, float *out, const int32_t *tokens, const float *wte,
                                const float *wpe, int B, int T, int C, int Vp) {
    in_use u = ENTER("embed_forward", DEV(out, floats((size_t)B * T * C)), DEV(tokens, (size_t)B * T * sizeof(int32_t)),
                     DEV(wte, floats((size_t)Vp * C)), DEV_OR_NULL(wpe, floats((size_t)T * C)));
    cpu()->embed_forward(cpu(), out, tokens, wte, wpe, B, T, C, Vp);
    leave(&u);
}

static void check_embed_backward(const compute_backend *be, float *dwte, float *dwpe, const int32_t *tokens,
                                 const float *dout, int B, int T, int C, int Vp) {
    in_use u = ENTER("embed_backward", DEV(dwte, floats((size_t)Vp * C)), DEV_OR_NULL(dwpe, floats((size_t)T * C)),
                     DEV(tokens, (size_t)B * T * sizeof(int32_t)), DEV(dout, floats((size_t)B * T * C)));
    cpu()->embed_backward(cpu(), dwte, dwpe, tokens, dout, B, T, C, Vp);
    leave(&u);
}

/* --- the Llama family's kernels --- */

static void check_rmsnorm_forward(const compute_backend *be, float *out, float *rstd, const float *inp, const float *w,
                                  int N, int C, float eps) {
    const size_t NC = floats((size_t)N * C);
    in_use u = ENTER("rmsnorm_forward", DEV(out, NC), DEV(rstd, floats(N)), DEV(inp, NC), DEV(w, floats(C)));
    cpu()->rmsnorm_forward(cpu(), out, rstd, inp, w, N, C, eps);
    leave(&u);
}

static void check_rmsnorm_backward(const compute_backend *be, float *dinp, float *dw, const float *dout,
                                   const float *inp, const float *w, const float *rstd, int N, int C) {
    const size_t NC = floats((size_t)N * C);
    in_use u = ENTER("rmsnorm_backward", DEV(dinp, NC), DEV(dw, floats(C)), DEV(dout, NC), DEV(inp, NC),
                     DEV(w, floats(C)), DEV(rstd, floats(N)));
    cpu()->rmsnorm_backward(cpu(), dinp, dw, dout, inp, w, rstd, N, C);
    leave(&u);
}

static void check_linear_forward(const compute_backend *be, float *out, const float *inp, const float *w, int N,
                                 int IC, int OC) {
    in_use u = ENTER("linear_forward", DEV(out, floats((size_t)N * OC)), DEV(inp, floats((size_t)N * IC)),
                     DEV(w, floats((size_t)OC * IC)));
    cpu()->linear_forward(cpu(), out, inp, w, N, IC, OC);
    leave(&u);
}

static void check_linear_backward(const compute_backend *be, float *dinp, float *dw, const float *dout,
                                  const float *inp, const float *w, int N, int IC, int OC) {
    in_use u = ENTER("linear_backward", DEV_OR_NULL(dinp, floats((size_t)N * IC)), DEV(dw, floats((size_t)OC * IC)),
                     DEV(dout, floats((size_t)N * OC)), DEV(inp, floats((size_t)N * IC)),
                     DEV(w, floats((size_t)OC * IC)));
    cpu()->linear_backward(cpu(), dinp, dw, dout, inp, w, N, IC, OC);
    leave(&u);
}

/* rope's extent: n_heads * hs floats of each of N rows row_stride apart. */
static void check_rope_args(const char *op, int N, int T, int n_heads, int hs, int row_stride, int pos0) {
    if (hs <= 0 || hs % 2 != 0) die(op, "head size %d is not even", hs);
    if (T <= 0) die(op, "T is %d", T);
    if (n_heads < 0 || (long)n_heads * hs > row_stride) die(op, "%d heads of %d floats overrun rows of %d", n_heads, hs, row_stride);
    if (pos0 < 0 || (long)pos0 + T > (1L << 24)) die(op, "positions %d + %d are not exact in float32", pos0, T);
}

static void check_rope_forward(const compute_backend *be, float *x, int N, int T, int n_heads, int hs, int row_stride,
                               int pos0, rope_params rp) {
    check_rope_args("rope_forward", N, T, n_heads, hs, row_stride, pos0);
    in_use u = ENTER("rope_forward", DEV(x, matrix(N, n_heads * hs, row_stride)));
    cpu()->rope_forward(cpu(), x, N, T, n_heads, hs, row_stride, pos0, rp);
    leave(&u);
}

static void check_rope_backward(const compute_backend *be, float *dx, int N, int T, int n_heads, int hs,
                                int row_stride, int pos0, rope_params rp) {
    check_rope_args("rope_backward", N, T, n_heads, hs, row_stride, pos0);
    in_use u = ENTER("rope_backward", DEV(dx, matrix(N, n_heads * hs, row_stride)));
    cpu()->rope_backward(cpu(), dx, N, T, n_heads, hs, row_stride, pos0, rp);
    leave(&u);
}

static void check_swiglu_forward(const compute_backend *be, float *out, const float *gu, int N, int F) {
    in_use u = ENTER("swiglu_forward", DEV(out, floats((size_t)N * F)), DEV(gu, floats((size_t)N * 2 * F)));
    cpu()->swiglu_forward(cpu(), out, gu, N, F);
    leave(&u);
}

static void check_swiglu_backward(const compute_backend *be, float *dgu, const float *dout, const float *gu, int N,
                                  int F) {
    in_use u = ENTER("swiglu_backward", DEV(dgu, floats((size_t)N * 2 * F)), DEV(dout, floats((size_t)N * F)),
                     DEV(gu, floats((size_t)N * 2 * F)));
    cpu()->swiglu_backward(cpu(), dgu, dout, gu, N, F);
    leave(&u);
}

static void check_sgemm(const compute_backend *be, int trans_a, int trans_b, int M, int N, int K, float alpha,
                        const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    in_use u = ENTER("sgemm", DEV(A, trans_a ? matrix(K, M, lda) : matrix(M, K, lda)),
                     DEV(B, trans_b ? matrix(N, K, ldb) : matrix(K, N, ldb)), DEV(C, matrix(M, N, ldc)));
    cpu()->sgemm(cpu(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    leave(&u);
}

static double check_sum(const compute_backend *be, const float *x, size_t n) {
    in_use u = ENTER("sum", DEV(x, floats(n)));
    double s = cpu()->sum(cpu(), x, n);
    leave(&u);
    return s;
}

static double check_sum_sq(const compute_backend *be, const float *x, size_t n) {
    in_use u = ENTER("sum_sq", DEV(x, floats(n)));
    double s = cpu()->sum_sq(cpu(), x, n);
    leave(&u);
    return s;
}

static void check_bf16_to_f32(const compute_backend *be, float *out, const st_bf16 *inp, size_t n) {
    in_use u = ENTER("bf16_to_f32", DEV(out, floats(n)), DEV(inp, n * sizeof(st_bf16)));
    cpu()->bf16_to_f32(cpu(), out, inp, n);
    leave(&u);
}

static void check_f32_to_bf16(const compute_backend *be, st_bf16 *out, const float *inp, size_t n) {
    in_use u = ENTER("f32_to_bf16", DEV(out, n * sizeof(st_bf16)), DEV(inp, floats(n)));
    cpu()->f32_to_bf16(cpu(), out, inp, n);
    leave(&u);
}

static const compute_backend check_backend = {
    .name = "check",
    .unified = 0,
    .alloc = check_alloc,
    .free = check_free,
    .to_device = check_to_device,
    .to_host = check_to_host,
    .copy = check_copy,
    .memset = check_memset,
    .layernorm_forward = check_layernorm_forward,
    .layernorm_backward = check_layernorm_backward,
    .matmul_forward = check_matmul_forward,
    .matmul_backward = check_matmul_backward,
    .attention_forward = check_attention_forward,
    .attention_backward = check_attention_backward,
    .kv_cache_write = check_kv_cache_write,
    .attention_cached_forward = check_attention_cached_forward,
    .gelu_forward = check_gelu_forward,
    .gelu_backward = check_gelu_backward,
    .residual_forward = check_residual_forward,
    .crossentropy_softmax = check_crossentropy_softmax,
    .embed_forward = check_embed_forward,
    .embed_backward = check_embed_backward,
    .rmsnorm_forward = check_rmsnorm_forward,
    .rmsnorm_backward = check_rmsnorm_backward,
    .linear_forward = check_linear_forward,
    .linear_backward = check_linear_backward,
    .rope_forward = check_rope_forward,
    .rope_backward = check_rope_backward,
    .swiglu_forward = check_swiglu_forward,
    .swiglu_backward = check_swiglu_backward,
    .sgemm = check_sgemm,
    .sum = check_sum,
    .sum_sq = check_sum_sq,
    .bf16_to_f32 = check_bf16_to_f32,
    .f32_to_bf16 = check_f32_to_bf16,
};

const compute_backend *compute_backend_check(void) { return &check_backend; }
