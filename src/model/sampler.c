/* sampler.c - picking the next token from logits (strata/generate.h):
 * greedy, temperature, top-k, top-p, seeded. Candidates are ordered by
 * logit, larger first, ties by the lower id: one total order, so the kept
 * sets and the draw depend on the logits and the seed alone. */
#include <math.h>
#include <stdlib.h>

#include "strata/generate.h"

typedef struct cand {
    float logit;
    int32_t id;
} cand;

struct sampler {
    sampler_params p;
    int vocab;
    st_rng rng;
    cand *c;        /* [vocab] the candidates */
    double *prob;   /* [vocab] their unnormalized probabilities, in the order of c */
};

st_status sampler_create(sampler **out, int vocab, const sampler_params *p, uint64_t seed, st_error *err) {
    if (vocab < 1) return st_fail(err, ST_EINVAL, "a sampler over %d tokens", vocab);
    if (!(p->temperature >= 0) || !isfinite(p->temperature))
        return st_fail(err, ST_EINVAL, "temperature %g: must be >= 0", p->temperature);
    if (p->top_k < 0) return st_fail(err, ST_EINVAL, "top-k %d: must be >= 0", p->top_k);
    if (!(p->top_p > 0 && p->top_p <= 1)) return st_fail(err, ST_EINVAL, "top-p %g: must be in (0, 1]", p->top_p);
    sampler *s = calloc(1, sizeof *s);
    if (s) {
        s->c = malloc((size_t)vocab * sizeof *s->c);
        s->prob = malloc((size_t)vocab * sizeof *s->prob);
    }
    if (!s || !s->c || !s->prob) {
        sampler_free(s);
        return st_fail(err, ST_ENOMEM, "out of memory allocating a sampler over %d tokens", vocab);
    }
    s->p = *p;
    s->vocab = vocab;
    st_rng_seed(&s->rng, seed);
    *out = s;
    return ST_OK;
}

void sampler_free(sampler *s) {
    if (!s) return;
    free(s->c);
    free(s->prob);
    free(s);
}

/* a before b: the larger logit, then the lower id */
static int before(const cand *a, const cand *b) { return a->logit > b->logit || (a->logit == b->logit && a->id < b->id); }
static int cmp_cand(const void *a, const void *b) { return before(a, b) ? -1 : before(b, a) ? 1 : 0; }

static void swap(cand *a, cand *b) {
    cand t = *a;
    *a = *b;
    *b = t;
}

/* Rearranges c[0..n) so that its first k are the k first in the order
 * (quickselect, median-of-three pivots: linear on average). */
static void select_first(cand *c, int n, int k) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (before(&c[mid], &c[lo])) swap(&c[mid], &c[lo]);
        if (before(&c[hi], &c[lo])) swap(&c[hi], &c[lo]);
        if (before(&c[hi], &c[mid])) swap(&c[hi], &c[mid]);
        const cand pivot = c[mid];
        int i = lo, j = hi;
        while (i <= j) {
            while (before(&c[i], &pivot)) i++;
            while (before(&pivot, &c[j])) j--;
            if (i <= j) swap(&c[i++], &c[j--]);
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
}

/* uniform in [0, 1) with 53 bits */
static double uniform(st_rng *r) { return (double)(st_rng_next(r) >> 11) * 0x1.0p-53; }

int32_t sampler_pick(sampler *s, const float *logits) {
    const int V = s->vocab;
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (s->p.temperature == 0 || s->p.top_k == 1) return best;

    cand *c = s->c;
    double *prob = s->prob;
    int n = V;
    for (int i = 0; i < V; i++) c[i] = (cand){logits[i], i};
    if (s->p.top_k > 0 && s->p.top_k < V) {
        select_first(c, V, s->p.top_k);
        n = s->p.top_k;
    }
    /* softmax(logits / T) over the candidates, unnormalized: p = exp((l - max) / T) */
    const double inv_t = 1.0 / s->p.temperature, top = logits[best];
    double sum = 0;
    for (int i = 0; i < n; i++) sum += prob[i] = exp(((double)c[i].logit - top) * inv_t);
    int sorted = 0;
    if (s->p.top_p < 1) {
        /* The nucleus: the most likely tokens until their mass reaches top_p.
         * None of it is below t = (1 - top_p) sum / n: the tokens below t weigh
         * less than n t = (1 - top_p) sum, so those at or above t reach top_p
         * first. Only they are sorted (a flat distribution keeps them all). */
        const double t = (1 - s->p.top_p) * sum / n;
        int m = 0;
        for (int i = 0; i < n; i++)
            if (prob[i] >= t) {
                c[m] = c[i];
                prob[m++] = prob[i];
            }
        qsort(c, (size_t)m, sizeof *c, cmp_cand);
        const double target = s->p.top_p * sum;
        double cum = 0;
        int keep = m;
        for (int i = 0; i < m; i++) {
            cum += prob[i] = exp(((double)c[i].logit - top) * inv_t);   /* in the sorted order */
            if (cum >= target) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
        sorted = 1;
    }
    if (!sorted && n < V) {   /* top-k alone: its k in the order, for a draw that depends on nothing else */
        qsort(c, (size_t)n, sizeof *c, cmp_cand);
        for (int i = 0; i < n; i++) prob[i] = exp(((double)c[i].logit - top) * inv_t);
    }
    double mass = 0;
    for (int i = 0; i < n; i++) mass += prob[i];
    const double r = uniform(&s->rng) * mass;
    double acc = 0;
    for (int i = 0; i < n; i++) {
        acc += prob[i];
        if (r < acc) return c[i].id;
    }
    return c[n - 1].id;
}
