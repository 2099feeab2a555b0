/* The fast executor's C kernel (netlist2tf.fast, kernel "c"): a compiled Qwen3.5 checkpoint's forward
 * one position at a time, computed INCREMENTALLY and exactly.
 *
 * A compiled model's activations change little from one position to the next (the CPU's next token
 * changes a few bits of the residual stream; most of its state is the same), so every vector of the
 * forward is kept per batch row from the previous position with the list of entries that changed this
 * position (index and previous value), and every stage recomputes only what depends on a changed
 * entry:
 *
 *   - a weight product y = W x keeps its exact sums in double (acc, one per output row) and, for each
 *     changed input x_j, subtracts W[:, j] * old and adds W[:, j] * new (W stored by columns: CSC);
 *     only the touched rows are rounded to the output dtype and compared with their previous value;
 *   - an RMSNorm keeps its exact sum of float32 squares the same way; a changed rsqrt recomputes
 *     every output, an unchanged one only the changed entries;
 *   - the residual adds, the FFN's silu(gate) * up, the short convolution (a channel whose window
 *     and input are all one value is a fixed point and is skipped), the DeltaNet keys and queries
 *     (counted non-zero entries per head), the delta rule's heads and the gated norm likewise;
 *   - the greedy token is the arg max over per-block maxima of the logits (blocks of 64 rows),
 *     kept as rows change (a block is scanned again only when its maximum row falls).
 *
 * Exactness, proved per product rather than assumed: every product of two float32 values is exact in
 * double. Let every weight of column j be a multiple of 2^wlow_j, every input value that ever entered
 * the sums in column j a multiple of 2^xlow_j, ulow the least wlow_j + xlow_j over those columns, the
 * rows' absolute sums of weights below 2^l1 and the inputs below 2^xexp in magnitude. Then a change
 * new - old in column j is a multiple of 2^xlow_j below 2^(xexp + 1), its product with a weight a
 * multiple of 2^ulow below 2^(l1 + xexp + 1), and every partial sum the kernel forms (the exact sum
 * of a row's products with the inputs updated so far) a multiple of 2^ulow below 2^(l1 + xexp):
 * double holds all of them exactly while l1 + xexp + 1 - ulow <= 53, so each subtraction, product
 * and addition is exact, in any order, and acc is the exact sum of W[r, :] x. (Per column, not one
 * wlow for the matrix: a merged model's LM head has the base's fine weights in columns that never see
 * a non-zero input on a trace.) The kernel checks this bound for every product at
 * every position (from the new inputs only: the bounds are running minima and maxima); where it
 * fails it recomputes the product from scratch with the current inputs' bounds, and where that fails
 * too it stops (E_SUM). The same bound on the squares proves the norms' sums. The exact sum rounded
 * once to float32 (and then to bfloat16, where the stock layer's output is bfloat16) is the stock
 * layer's result wherever the stock float32 accumulation is exact, which is what the compiler
 * engineers (its pre-activations are integers well inside float32's exact range) and
 * tests/test_fast.py checks against stock transformers.
 *
 * Every element-wise operation mirrors the stock transformers operation on the same values in the
 * same dtype (bfloat16 held in floats, rounded to nearest-even after each operation the stock forward
 * rounds). The non-linear functions are evaluated only where every correct implementation gives the
 * same float (silu and sigmoid saturated or at 0, softplus beyond its threshold or underflowing, a
 * decay of exactly 1, one-hot or zero DeltaNet keys and queries); any other input stops the step with
 * a status naming the layer and the operation, and the caller runs stock transformers instead. Norms'
 * rsqrt(mean + eps) comes from the caller (torch) for the exact sum. After a non-zero status a row's
 * state is unusable. Compiled without -ffast-math and with -ffp-contract=off. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {                  /* a weight matrix by columns (CSC) */
    int64_t rows, cols;
    const int64_t *colptr;        /* column j: entries colptr[j] .. colptr[j + 1] - 1 */
    const int32_t *row;
    const float *val;
    int64_t l1;                   /* every row's absolute weight sum is below 2^l1 (see above) */
    const int32_t *cwlow;         /* per column: every weight there is a multiple of 2^cwlow[j] */
} mat_t;

typedef struct {
    int64_t kind;                 /* 0: silent attention (o_proj all zero: skipped), 1: DeltaNet,
                                     2: attention checked silent (its values v_proj(x) must be 0),
                                     3: one-hot attention (lookup, below) */
    const float *n1, *n2;         /* 1 + norm weight, float32, D each */
    mat_t gate_up, down;          /* MLP: gate rows, then up rows (neurons each) */
    int64_t neurons;
    mat_t qkv, z, ab, out;        /* DeltaNet projections */
    mat_t v;                      /* kind 2: v_proj */
    const float *conv_w;          /* conv_dim x K */
    const float *conv_b;          /* conv_dim, or NULL */
    int64_t conv_dim, K;
    const float *neg_exp_a;       /* nv: -exp(A_log.float()), as torch computed it */
    const float *dt_bias;         /* nv */
    const float *norm_w;          /* dv */
    int64_t nk, nv, dk, dv;
    const int32_t *live;          /* channels whose projection row or bias is non-zero (the others stay 0) */
    int64_t n_live;
    const uint8_t *lagged;        /* per channel: a tap other than the last (lag 0) is non-zero; the
                                     others' output depends on the current input only: no window */
    mat_t aq, ak, av, ao;         /* kind 3 (one-hot attention: compiled lookups): q_proj (query and gate
                                     rows per head), k_proj, v_proj, o_proj */
    const float *qn_w, *kn_w;     /* 1 + q_norm / k_norm weight, float32, hd each */
    int64_t nh, nkv, hd;
    double scaling;               /* the scores' factor, head_dim ** -0.5 */
} layer_t;

typedef float (*mean_rsqrt_t)(double sum, int64_t n, double eps);

typedef struct {
    int64_t D, V, n_layers, bf16;
    const float *embed;           /* V x D, or NULL: by rows (eptr, below) */
    const float *final_n;         /* D */
    mat_t head;
    layer_t *layers;
    double eps;
    mean_rsqrt_t mean_rsqrt;
    int64_t err_layer, err_op;
    double err_value;
    int64_t cache_n[64];          /* (sum, n) -> rsqrt(mean + eps), filled from mean_rsqrt */
    double cache_sum[64];
    float cache_val[64];
    uint8_t *flag;                /* scratch, as many as the longest vector, all 0 between uses */
    int32_t *list;                /* scratch, as long */
    int64_t max_len;
    int64_t positions, resets;    /* counters: positions computed, products recomputed from scratch */
    int64_t blocks_computed;      /* counter: blocks of 64 logits scanned again for their maximum */
    int64_t updates;              /* counter: weights applied to changed inputs */
    int64_t updates_head;         /* of which the LM head's */
    int64_t tree;                 /* S, a power of two >= V: the LM head's max tree; 0: rows only */
    const int64_t *tptr;          /* per head column: its weights as (tree node, weight), each node a */
    const int32_t *tnode;         /* run of 2^k rows, 2^k-aligned, of one weight (tptr[j] .. ) */
    const float *tw;
    const int64_t *eptr;          /* embed NULL: the embedding by rows, every entry that is not +0.0 */
    const int32_t *ecol;          /* (V + 1 row pointers, columns, values) */
    const float *eval;
} model_t;

enum { OK = 0, E_SILU = 1, E_SIGMOID = 2, E_SOFTPLUS = 3, E_DECAY = 4, E_KEY = 5, E_QUERY = 6, E_NORM = 7,
       E_SUM = 8, E_TOKEN = 10, E_ATTN = 11 };

/* -- per-row state ------------------------------------------------------------------------------ */

typedef struct { float *v; int32_t *idx; float *old; int64_t n, len; } vec_t;   /* values + this position's changes */
typedef struct { double *acc; vec_t out; int32_t ulow, xexp; } prod_t;     /* ulow, xexp: see above */
typedef struct { double s; int32_t low, exp; float r; vec_t out; } norm_t;

typedef struct {
    norm_t n1, n2;
    prod_t qkv, z, ab, out, gate_up, down;
    vec_t mixed, core, act, h1, h2;      /* conv + silu output; heads' gated output; silu(g) * u; residuals */
    float *window;                       /* conv_dim x (K - 1), oldest first */
    int32_t *active;                     /* channels to recompute next position (window not a fixed point) */
    int64_t n_active;
    int32_t *kcount, *qcount;            /* per key head: non-zero entries of the key / query */
    int64_t *ksum, *qsum;                /* and the sum of their indices (the index when there is one) */
    float *rec;                          /* dk x nv x dv: a key row of every head together (a read
                                            or write touches one row of a key head's value heads) */
    int32_t *prev_qi;                    /* per value head: the query index and value read last position */
    float *prev_qv;
    uint8_t *zdirty;                     /* per value head, scratch */
    uint8_t *written;                    /* per value head: its state was ever written (may be non-zero) */
    uint8_t *decay_ok;                   /* per value head: written, and its decay checked exact for the
                                            current a (cleared when a changes) */
    uint8_t *vstale;                     /* per value head: its value changed since its last write */
    uint8_t *wnoop;                      /* per value head: its last write changed no bit of its state */
    int8_t *wn;                          /* ... that write's key entries (0 to 2), rows, values, beta */
    int32_t *wki;
    float *wkn, *wbeta;
    float *pcore;                        /* per value head: the read (nv x dv) its output was last computed
                                            from, before the gated norm */
    uint8_t *cvalid;                     /* ... 1 once computed */
    prod_t v;                            /* a checked-silent attention layer: v_proj of its input norm */
    prod_t aq, ak, av, ao;               /* kind 3: the projections */
    vec_t attn;                          /* kind 3: the gated attention output, nh x hd */
    float *qn, *kn;                      /* kind 3, scratch: one head's normed query / key */
    float *ek, *ev;                      /* kind 3: per distinct (KV head, normed key) seen: the key, the
                                            value first offered with it */
    int64_t *ecount;                     /* ... how many positions offered it */
    uint8_t *emixed;                     /* ... 1 where they offered different values */
    double *escore;                      /* scratch: each entry's score for the head being read */
    int32_t *ehead;
    int64_t n_e, cap_e;
    int64_t *htab;                       /* open addressing over the entries (index + 1; 0: empty) */
    int64_t hcap;
} lrow_t;

typedef struct {
    vec_t h0;
    norm_t nf;
    prod_t head;
    lrow_t *L;
    float *bmax;                         /* per block of 64 logits: the max and its first index */
    int32_t *bidx;
    uint8_t *stale;                      /* blocks to scan again */
    int64_t last;                        /* the greedy token after the last position */
    int64_t prev_token;                  /* the token fed last (-1: none), whose embedding h0 holds */
    int64_t on_tree;                     /* the LM head is kept as the max tree (else by rows) */
    double *lz, *mx;                     /* the tree: per node, the weights' sum added to its whole run,
                                            and the largest row sum beneath it (lz included) */
    int32_t *tlist;                      /* scratch: dirty nodes, by level */
    int64_t *tcount;
    uint8_t *tdirty;
    double *tsum;                        /* scratch: the sums root to node (full logits) */
    void **blocks;                       /* every allocation, freed by row_free */
    int64_t n_blocks, cap_blocks;
    int64_t bytes;
    int64_t n_layers;                    /* of L (its kind 3 stores grow: freed by row_free) */
} row_t;

static void *row_alloc(row_t *r, int64_t n, int64_t size)
{
    if (r->n_blocks == r->cap_blocks) {
        int64_t cap = r->cap_blocks ? 2 * r->cap_blocks : 64;
        void **b = realloc(r->blocks, cap * sizeof(void *));
        if (!b)
            return NULL;
        r->blocks = b;
        r->cap_blocks = cap;
    }
    void *p = calloc(n > 0 ? n : 1, size);
    if (p) {
        r->blocks[r->n_blocks++] = p;
        r->bytes += n * size;
    }
    return p;
}

void n2t_row_free(row_t *r)
{
    if (!r)
        return;
    for (int64_t i = 0; r->L && i < r->n_layers; i++) {
        free(r->L[i].ek);
        free(r->L[i].ev);
        free(r->L[i].ecount);
        free(r->L[i].emixed);
        free(r->L[i].escore);
        free(r->L[i].ehead);
        free(r->L[i].htab);
    }
    for (int64_t i = 0; i < r->n_blocks; i++)
        free(r->blocks[i]);
    free(r->blocks);
    free(r);
}

static int vec_init(row_t *r, vec_t *v, int64_t len)
{
    v->len = len;
    v->n = 0;
    v->v = row_alloc(r, len, sizeof(float));
    v->idx = row_alloc(r, len, sizeof(int32_t));
    v->old = row_alloc(r, len, sizeof(float));
    return v->v && v->idx && v->old;
}

static int prod_init(row_t *r, prod_t *p, const mat_t *W)
{
    p->acc = row_alloc(r, W->rows, sizeof(double));
    p->ulow = 1 << 20;                   /* no input yet: the bound holds */
    p->xexp = -(1 << 20);
    return p->acc && vec_init(r, &p->out, W->rows);
}

static int norm_init(row_t *r, norm_t *n, int64_t D)
{
    n->s = 0.0;
    n->low = 1 << 20;
    n->exp = -(1 << 20);
    n->r = NAN;                          /* no factor yet: the first position computes every output */
    return vec_init(r, &n->out, D);
}

int64_t n2t_row_bytes(const row_t *r) { return r->bytes; }

/* A new row: every vector 0 (the value of every stage for an all-zero input, except the convolution's
 * biased channels and the norms, which the first position computes in full). NULL if out of memory. */
row_t *n2t_row_new(const model_t *m)
{
    row_t *r = calloc(1, sizeof(row_t));
    if (!r)
        return NULL;
    r->prev_token = -1;
    int ok = vec_init(r, &r->h0, m->D) && norm_init(r, &r->nf, m->D) && prod_init(r, &r->head, &m->head);
    r->L = row_alloc(r, m->n_layers, sizeof(lrow_t));
    r->n_layers = m->n_layers;
    int64_t nb = (m->V + 63) / 64;
    r->bmax = row_alloc(r, nb, sizeof(float));
    r->bidx = row_alloc(r, nb, sizeof(int32_t));
    r->stale = row_alloc(r, nb, 1);
    ok = ok && r->L && r->bmax && r->bidx && r->stale;
    if (ok && m->tree) {
        const int64_t S = m->tree;
        r->on_tree = 1;
        r->lz = row_alloc(r, 2 * S, sizeof(double));
        r->mx = row_alloc(r, 2 * S, sizeof(double));
        r->tlist = row_alloc(r, 2 * S, sizeof(int32_t));   /* level L at [2^L, 2^(L+1)) */
        r->tcount = row_alloc(r, 64, sizeof(int64_t));
        r->tdirty = row_alloc(r, 2 * S, 1);
        r->tsum = row_alloc(r, 2 * S, sizeof(double));
        ok = r->lz && r->mx && r->tlist && r->tcount && r->tdirty && r->tsum;
        for (int64_t n = 2 * S - 1; ok && n >= 1; n--)     /* every row sum 0; rows past V: -inf */
            r->mx[n] = n >= S ? (n - S < m->V ? 0.0 : -INFINITY) : fmax(r->mx[2 * n], r->mx[2 * n + 1]);
    }
    for (int64_t b = 0; ok && b < nb; b++)
        r->bidx[b] = (int32_t)(b * 64);
    for (int64_t li = 0; ok && li < m->n_layers; li++) {
        const layer_t *L = &m->layers[li];
        lrow_t *R = &r->L[li];
        ok = norm_init(r, &R->n2, m->D) && prod_init(r, &R->gate_up, &L->gate_up) &&
             prod_init(r, &R->down, &L->down) && vec_init(r, &R->act, L->neurons) &&
             vec_init(r, &R->h1, m->D) && vec_init(r, &R->h2, m->D);
        if (ok && L->kind == 2)
            ok = norm_init(r, &R->n1, m->D) && prod_init(r, &R->v, &L->v);
        if (ok && L->kind == 3) {
            ok = norm_init(r, &R->n1, m->D) && prod_init(r, &R->aq, &L->aq) && prod_init(r, &R->ak, &L->ak) &&
                 prod_init(r, &R->av, &L->av) && prod_init(r, &R->ao, &L->ao) &&
                 vec_init(r, &R->attn, L->nh * L->hd);
            R->qn = row_alloc(r, L->hd, sizeof(float));
            R->kn = row_alloc(r, L->hd, sizeof(float));
            ok = ok && R->qn && R->kn;
        }
        if (ok && L->kind == 1) {
            const int64_t C = L->conv_dim;
            ok = norm_init(r, &R->n1, m->D) && prod_init(r, &R->qkv, &L->qkv) && prod_init(r, &R->z, &L->z) &&
                 prod_init(r, &R->ab, &L->ab) && prod_init(r, &R->out, &L->out) &&
                 vec_init(r, &R->mixed, C) && vec_init(r, &R->core, L->nv * L->dv);
            R->window = row_alloc(r, C * (L->K - 1), sizeof(float));
            R->active = row_alloc(r, C, sizeof(int32_t));
            R->kcount = row_alloc(r, L->nk, sizeof(int32_t));
            R->qcount = row_alloc(r, L->nk, sizeof(int32_t));
            R->ksum = row_alloc(r, L->nk, sizeof(int64_t));
            R->qsum = row_alloc(r, L->nk, sizeof(int64_t));
            R->rec = row_alloc(r, L->nv * L->dk * L->dv, sizeof(float));
            R->prev_qi = row_alloc(r, L->nv, sizeof(int32_t));
            R->prev_qv = row_alloc(r, L->nv, sizeof(float));
            R->zdirty = row_alloc(r, L->nv, 1);
            R->written = row_alloc(r, L->nv, 1);
            R->decay_ok = row_alloc(r, L->nv, 1);
            R->vstale = row_alloc(r, L->nv, 1);
            R->wnoop = row_alloc(r, L->nv, 1);
            R->wn = row_alloc(r, L->nv, 1);
            R->wki = row_alloc(r, 2 * L->nv, sizeof(int32_t));
            R->wkn = row_alloc(r, 2 * L->nv, sizeof(float));
            R->wbeta = row_alloc(r, L->nv, sizeof(float));
            R->pcore = row_alloc(r, L->nv * L->dv, sizeof(float));
            R->cvalid = row_alloc(r, L->nv, 1);
            ok = ok && R->decay_ok && R->vstale && R->wnoop && R->wn && R->wki && R->wkn && R->wbeta && R->pcore &&
                 R->cvalid && R->written && R->window && R->active && R->kcount && R->qcount && R->ksum && R->qsum && R->rec &&
                 R->prev_qi && R->prev_qv && R->zdirty;
            if (ok) {
                memcpy(R->active, L->live, L->n_live * sizeof(int32_t));      /* the first position: all */
                R->n_active = L->n_live;
                for (int64_t h = 0; h < L->nv; h++)
                    R->prev_qi[h] = -2;          /* never read: the first position computes every head */
            }
        }
    }
    if (!ok) {
        n2t_row_free(r);
        return NULL;
    }
    return r;
}

/* -- helpers ------------------------------------------------------------------------------------ */

/* torch's ``torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)`` on float32, for n values whose squares
 * sum (exactly) to ``s``: a float32 tensor holds s rounded to float32; its float32 sum over the n values
 * (zeros beside it) is that value; mean divides it by n in float32 (at::mean on the CPU: sum, then
 * div_); the Python float eps is added as a float32 scalar; rsqrt is 1 / sqrt, each correctly rounded.
 * tests/run/test_fast.py compares this function with torch over many (s, n, eps). The model's
 * mean_rsqrt points here (a pointer, so a test can route it elsewhere). */
float n2t_mean_rsqrt(double s, int64_t n, double eps)
{
    volatile float t = (float)s;          /* volatile: each step rounded to float32 as torch does */
    volatile float mean = t / (float)n;
    volatile float x = mean + (float)eps;
    return 1.0f / sqrtf(x);
}

static float mean_rsqrt(model_t *m, double s, int64_t n)
{
    uint64_t bits;
    memcpy(&bits, &s, 8);
    uint64_t slot = (bits * 0x9E3779B97F4A7C15ull + (uint64_t)n) >> 58;      /* 64 slots */
    if (m->cache_n[slot] == n && m->cache_sum[slot] == s)
        return m->cache_val[slot];
    float r = m->mean_rsqrt(s, n, m->eps);
    m->cache_n[slot] = n;
    m->cache_sum[slot] = s;
    m->cache_val[slot] = r;
    return r;
}

static inline float rnd(float x, int64_t bf16)
{
    if (!bf16)
        return x;
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)          /* NaN stays NaN */
        u |= 0x00400000u;
    else
        u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

static int fail(model_t *m, int64_t layer, int64_t op, double v)
{
    m->err_layer = layer;
    m->err_op = op;
    m->err_value = v;
    return (int)op;
}

/* x != 0: x is a multiple of 2^low and |x| < 2^hi; returns 1 for an infinity or NaN */
static inline int bits_of(float x, int32_t *low, int32_t *hi)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    const uint32_t e = (u >> 23) & 0xffu, mant = u & 0x7fffffu;
    if (e == 255u)
        return 1;
    if (e == 0u) {                                  /* subnormal: mant * 2^-149 */
        *low = __builtin_ctz(mant) - 149;
        *hi = 32 - __builtin_clz(mant) - 149;
    } else {
        *low = __builtin_ctz(mant | 0x800000u) + (int32_t)e - 150;
        *hi = (int32_t)e - 126;
    }
    return 0;
}

/* record v->v[i] = x as a change (an equal value, -0.0 against 0.0 included, is no change) */
static inline void set(vec_t *v, int64_t i, float x)
{
    const float o = v->v[i];
    if (x != o || x != x) {
        v->idx[v->n] = (int32_t)i;
        v->old[v->n] = o;
        v->n++;
        v->v[i] = x;
    }
}

/* a float's bits (to tell -0 from +0 and compare NaNs as stored) */
static inline uint32_t fbits(float x)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    return b;
}

/* silu where it is exact for any correct exp: x >= 18 gives x, x <= -90 gives -0, 0 gives 0 */
static inline int silu(float x, float *out)
{
    if (x >= 18.0f) { *out = x; return 0; }
    if (x <= -90.0f) { *out = -0.0f; return 0; }
    if (x == 0.0f) { *out = x * 0.5f; return 0; }
    return 1;
}

/* -- stages ------------------------------------------------------------------------------------- */

/* y = W x from x's changes (module comment: the exactness bound, checked every call) */
/* the running bounds (module comment) widened by x's new values in the columns that feed W (a
 * column without weights adds nothing); 0 if a new value is infinite or NaN anywhere (stock's
 * product with a zero weight is NaN then) */
static int widen(const mat_t *W, const vec_t *x, int32_t *lo, int32_t *hi)
{
    int32_t l, h;
    for (int64_t k = 0; k < x->n; k++) {
        const int64_t j = x->idx[k];
        const float v = x->v[j];
        if (v != 0.0f) {
            if (bits_of(v, &l, &h))
                return 0;
            if (W->colptr[j + 1] > W->colptr[j]) {
                if (l + W->cwlow[j] < *lo) *lo = l + W->cwlow[j];
                if (h > *hi) *hi = h;
            }
        }
    }
    return 1;
}

/* the bounds of every value of x in the columns that feed W; 0 for an infinite or NaN value */
static int bounds(const mat_t *W, const float *x, int32_t *lo, int32_t *hi)
{
    int32_t l, h;
    *lo = 1 << 20;
    *hi = -(1 << 20);
    for (int64_t j = 0; j < W->cols; j++) {
        if (x[j] != 0.0f) {
            if (bits_of(x[j], &l, &h))
                return 0;
            if (W->colptr[j + 1] > W->colptr[j]) {
                if (l + W->cwlow[j] < *lo) *lo = l + W->cwlow[j];
                if (h > *hi) *hi = h;
            }
        }
    }
    return 1;
}

static int product_(model_t *m, int64_t li, const mat_t *W, prod_t *p, const vec_t *x, int force)
{
    p->out.n = 0;
    if (x->n == 0 && !force)
        return OK;
    int32_t lo = p->ulow, hi = p->xexp;
    const int finite = widen(W, x, &lo, &hi) && !force;
    const int32_t *row = W->row;
    const float *val = W->val;
    uint8_t *flag = m->flag;
    int32_t *touched = m->list;
    int64_t nt = 0;
    if (finite && W->l1 + hi - lo <= 52) {
        p->ulow = lo;
        p->xexp = hi;
        double *acc = p->acc;
        for (int64_t k = 0; k < x->n; k++) {
            const int64_t j = x->idx[k];
            const double dx = (double)x->v[j] - (double)x->old[k];      /* exact (bound) */
            m->updates += W->colptr[j + 1] - W->colptr[j];
            for (int64_t e = W->colptr[j]; e < W->colptr[j + 1]; e++) {
                const int32_t r = row[e];
                acc[r] += (double)val[e] * dx;
                touched[nt] = r;
                nt += !flag[r];
                flag[r] = 1;
            }
        }
    } else {                                        /* from scratch, with the current inputs' bounds */
        m->resets++;
        if (!bounds(W, x->v, &lo, &hi))
            return fail(m, li, E_SUM, INFINITY);
        if (W->l1 + hi - lo > 52)
            return fail(m, li, E_SUM, (double)(W->l1 + hi + 1 - lo));
        p->ulow = lo;
        p->xexp = hi;
        memset(p->acc, 0, W->rows * sizeof(double));
        for (int64_t j = 0; j < W->cols; j++) {
            const double xv = (double)x->v[j];
            if (xv != 0.0)
                for (int64_t e = W->colptr[j]; e < W->colptr[j + 1]; e++)
                    p->acc[row[e]] += (double)val[e] * xv;
        }
        for (int64_t r = 0; r < W->rows; r++) {
            flag[r] = 1;
            touched[nt++] = (int32_t)r;
        }
    }
    for (int64_t k = 0; k < nt; k++) {
        const int32_t r = touched[k];
        flag[r] = 0;
        set(&p->out, r, rnd((float)p->acc[r], m->bf16));
    }
    return OK;
}

static int product(model_t *m, int64_t li, const mat_t *W, prod_t *p, const vec_t *x)
{
    return product_(m, li, W, p, x, 0);
}

/* Qwen3_5RMSNorm of h from h's changes: x * rsqrt(mean(x^2) + eps) * (1 + w), rounded to the dtype.
 * The sum of the float32 squares is kept exactly (the same bound as a product's); it must be a float32
 * value, so that torch's float32 sum of those squares in any order is that sum. */
static int norm(model_t *m, int64_t li, norm_t *N, const vec_t *h, const float *scale, int64_t D)
{
    const int64_t bf = m->bf16;
    N->out.n = 0;
    if (h->n == 0 && N->r == N->r)
        return OK;
    int32_t lo = N->low, hi = N->exp, l, e;
    for (int64_t k = 0; k < h->n; k++) {
        const float v = h->v[h->idx[k]], sq = v * v;
        if (sq != 0.0f) {
            if (bits_of(sq, &l, &e))
                return fail(m, li, E_NORM, (double)v);
            if (l < lo) lo = l;
            if (e > hi) hi = e;
        }
    }
    int32_t logD = 0;
    while ((1ll << logD) < D)
        logD++;
    if (logD + hi - lo <= 53) {
        for (int64_t k = 0; k < h->n; k++) {
            const float o = h->old[k], v = h->v[h->idx[k]];
            N->s -= (double)(o * o);
            N->s += (double)(v * v);
        }
    } else {
        m->resets++;
        lo = 1 << 20;
        hi = -(1 << 20);
        double s = 0.0;
        for (int64_t i = 0; i < D; i++) {
            const float sq = h->v[i] * h->v[i];
            if (sq != 0.0f) {
                if (bits_of(sq, &l, &e))
                    return fail(m, li, E_NORM, (double)h->v[i]);
                if (l < lo) lo = l;
                if (e > hi) hi = e;
            }
            s += (double)sq;
        }
        if (logD + hi - lo > 53)
            return fail(m, li, E_SUM, (double)(logD + hi - lo));
        N->s = s;
    }
    N->low = lo;
    N->exp = hi;
    if ((double)(float)N->s != N->s)
        return fail(m, li, E_NORM, N->s);
    const float r = mean_rsqrt(m, N->s, D);
    if (r != N->r) {
        N->r = r;
        for (int64_t i = 0; i < D; i++)
            set(&N->out, i, rnd((h->v[i] * r) * scale[i], bf));
    } else {
        for (int64_t k = 0; k < h->n; k++) {
            const int64_t i = h->idx[k];
            set(&N->out, i, rnd((h->v[i] * r) * scale[i], bf));
        }
    }
    return OK;
}

/* out = h + o, rounded, from the changes of both */
static void residual(model_t *m, vec_t *out, const vec_t *h, const vec_t *o)
{
    const int64_t bf = m->bf16;
    uint8_t *flag = m->flag;
    int32_t *list = m->list;
    int64_t n = 0;
    out->n = 0;
    for (int64_t k = 0; k < h->n; k++)
        if (!flag[h->idx[k]]) { flag[h->idx[k]] = 1; list[n++] = h->idx[k]; }
    for (int64_t k = 0; k < o->n; k++)
        if (!flag[o->idx[k]]) { flag[o->idx[k]] = 1; list[n++] = o->idx[k]; }
    for (int64_t k = 0; k < n; k++) {
        const int32_t i = list[k];
        flag[i] = 0;
        set(out, i, rnd(h->v[i] + o->v[i], bf));
    }
}

/* the FFN: down(silu(gate(x)) * up(x)) */
static int mlp(model_t *m, int64_t li, const layer_t *L, lrow_t *R, const vec_t *x)
{
    const int64_t bf = m->bf16, N = L->neurons;
    int st;
    if ((st = product(m, li, &L->gate_up, &R->gate_up, x)))
        return st;
    const vec_t *gu = &R->gate_up.out;
    uint8_t *flag = m->flag;
    int32_t *list = m->list;
    int64_t n = 0;
    R->act.n = 0;
    for (int64_t k = 0; k < gu->n; k++) {
        const int32_t j = gu->idx[k] < N ? gu->idx[k] : (int32_t)(gu->idx[k] - N);
        if (!flag[j]) { flag[j] = 1; list[n++] = j; }
    }
    for (int64_t k = 0; k < n; k++)
        flag[list[k]] = 0;
    for (int64_t k = 0; k < n; k++) {
        const int32_t j = list[k];
        float s;
        if (silu(gu->v[j], &s))
            return fail(m, li, E_SILU, gu->v[j]);
        set(&R->act, j, rnd(rnd(s, bf) * gu->v[N + j], bf));
    }
    return product(m, li, &L->down, &R->down, &R->act);
}

/* The non-zero entries (at most two) of a key or query head, l2-normalised as transformers'
 * l2norm does (x * rsqrt(sum(x * x) + 1e-6), float32; the squares of two entries sum to the same
 * float in any order, and 1 / sqrtf is torch's rsqrt: both correctly rounded): their number, or -1
 * for more than two (a sum whose order would matter). */
static int entries(const float *x, int64_t dk, int32_t count, int64_t sum, int64_t *idx, float *val)
{
    if (count == 0)
        return 0;
    if (count > 2)
        return -1;
    if (count == 1) {
        idx[0] = sum;
    } else {
        int n = 0;
        for (int64_t i = 0; i < dk && n < 2; i++)
            if (x[i] != 0.0f)
                idx[n++] = i;
    }
    float ss = x[idx[0]] * x[idx[0]];
    if (count == 2)
        ss = ss + x[idx[1]] * x[idx[1]];
    const float inv = 1.0f / sqrtf(ss + 1e-6f);
    for (int e = 0; e < count; e++)
        val[e] = x[idx[e]] * inv;
    return count;
}

/* count the non-zero entries of a key or query head as one of its channels changes */
static inline void count(int32_t *cnt, int64_t *sum, int64_t head, int64_t i, float old, float now)
{
    if (old != 0.0f) { cnt[head]--; sum[head] -= i; }
    if (now != 0.0f) { cnt[head]++; sum[head] += i; }
}

/* one Qwen3_5GatedDeltaNet layer, recurrent, from x's changes; its output is R->out.out */
static int deltanet(model_t *m, int64_t li, const layer_t *L, lrow_t *R, const vec_t *x)
{
    const int64_t bf = m->bf16, K = L->K, nv = L->nv, dk = L->dk, dv = L->dv;
    const int64_t key_dim = L->nk * dk, group = nv / L->nk, rs = nv * dv;
    int st;
    if ((st = product(m, li, &L->qkv, &R->qkv, x)) || (st = product(m, li, &L->z, &R->z, x)) ||
        (st = product(m, li, &L->ab, &R->ab, x)))
        return st;
    /* causal_conv1d_update + silu on the channels whose input changed or whose window is moving */
    const vec_t *in = &R->qkv.out;
    uint8_t *flag = m->flag;
    int32_t *list = m->list;
    int64_t n = 0;
    for (int64_t k = 0; k < R->n_active; k++)
        if (!flag[R->active[k]]) { flag[R->active[k]] = 1; list[n++] = R->active[k]; }
    for (int64_t k = 0; k < in->n; k++)
        if (!flag[in->idx[k]]) { flag[in->idx[k]] = 1; list[n++] = in->idx[k]; }
    R->n_active = 0;
    R->mixed.n = 0;
    for (int64_t k = 0; k < n; k++) {
        const int32_t c = list[k];
        flag[c] = 0;
        const float cur = in->v[c];
        double acc = 0.0;
        if (L->lagged[c]) {                         /* the window's taps, then the current input's */
            float *w = R->window + c * (K - 1);
            int fixed = 1;
            for (int64_t t = 0; t < K - 1; t++) {
                acc += (double)L->conv_w[c * K + t] * (double)w[t];
                fixed &= (w[t] == cur);
            }
            for (int64_t t = 0; t + 1 < K - 1; t++)
                w[t] = w[t + 1];
            w[K - 2] = cur;
            if (!fixed)
                R->active[R->n_active++] = c;
        }                                           /* else: products with 0 taps add exactly 0 */
        acc += (double)L->conv_w[c * K + K - 1] * (double)cur;
        if (L->conv_b)
            acc += (double)L->conv_b[c];
        float o = rnd((float)acc, bf), s;
        if (silu(o, &s))
            return fail(m, li, E_SILU, o);
        set(&R->mixed, c, rnd(s, bf));
    }
    const vec_t *mx = &R->mixed;
    for (int64_t k = 0; k < mx->n; k++) {              /* keep the keys' and queries' non-zero counts */
        const int64_t c = mx->idx[k];
        if (c < key_dim)
            count(R->qcount, R->qsum, c / dk, c % dk, mx->old[k], mx->v[c]);
        else if (c < 2 * key_dim)
            count(R->kcount, R->ksum, (c - key_dim) / dk, (c - key_dim) % dk, mx->old[k], mx->v[c]);
        else
            R->vstale[(c - 2 * key_dim) / dv] = 1;
    }
    const vec_t *abo = &R->ab.out;
    for (int64_t k = 0; k < abo->n; k++)               /* a changed: its decay is checked again */
        if (abo->idx[k] < nv)
            R->decay_ok[abo->idx[k]] = 0;
    const float *q = mx->v, *kk = mx->v + key_dim, *v = mx->v + 2 * key_dim, *ab = R->ab.out.v;
    const float sqrt_dk = (float)sqrt((double)dk);    /* query / dk ** 0.5 */
    const int64_t nk = L->nk;
    int64_t kidx[2 * nk], qidx[2 * nk];
    float kval[2 * nk], qval[2 * nk];
    int nkey[nk], nq[nk];
    for (int64_t kh = 0; kh < nk; kh++) {              /* each key head's key and query, l2-normalised */
        nkey[kh] = entries(kk + kh * dk, dk, R->kcount[kh], R->ksum[kh], kidx + 2 * kh, kval + 2 * kh);
        nq[kh] = entries(q + kh * dk, dk, R->qcount[kh], R->qsum[kh], qidx + 2 * kh, qval + 2 * kh);
        if (nkey[kh] < 0)
            return fail(m, li, E_KEY, (double)kh);
        if (nq[kh] < 0)
            return fail(m, li, E_QUERY, (double)kh);
        for (int e = 0; e < nq[kh]; e++)
            qval[2 * kh + e] = qval[2 * kh + e] / sqrt_dk;
    }
    const vec_t *z = &R->z.out;
    memset(R->zdirty, 0, nv);
    for (int64_t k = 0; k < z->n; k++)
        R->zdirty[z->idx[k] / dv] = 1;
    R->core.n = 0;
    for (int64_t h = 0; h < nv; h++) {
        const float a = ab[h], bb = ab[nv + h];
        const int64_t kh = h / group;
        const int nkh = nkey[kh], nqh = nq[kh];
        const int64_t *ki = kidx + 2 * kh, *qi = qidx + 2 * kh;
        const float *kn = kval + 2 * kh, *qs = qval + 2 * kh;
        /* The decay matters only to a state that was ever written (a zero state times any finite
         * decay is zero: a merged model's base layers on a trace), beta only to a write (a zero key
         * adds k * delta = 0). Where they matter they must be exact: */
        if (R->written[h] && !R->decay_ok[h]) {            /* once per value of a */
            float t = a + L->dt_bias[h], sp;              /* softplus(a.float() + dt_bias) */
            if (t > 20.0f) sp = t;
            else if (t <= -104.0f) sp = 0.0f;
            else return fail(m, li, E_SOFTPLUS, t);
            float g = L->neg_exp_a[h] * sp;
            if (g != 0.0f)                                 /* exp(g) must be exactly 1 */
                return fail(m, li, E_DECAY, g);
            R->decay_ok[h] = 1;
        }
        float beta = 0.0f;                                 /* b.sigmoid() */
        if (nkh) {
            if (bb >= 18.0f) beta = 1.0f;
            else if (bb <= -90.0f) beta = 0.0f;
            else if (bb == 0.0f) beta = 0.5f;
            else return fail(m, li, E_SIGMOID, bb);
            if (!R->written[h])
                R->decay_ok[h] = 0;                        /* next position checks its decay */
            R->written[h] = 1;
        }
        float *S = R->rec + h * dv;                       /* row i of head h: S[i * rs] */
        const float *vh = v + h * dv;
        int hit = 0;                                       /* the write changes a row the query reads */
        /* A write is a function of the key's rows of the state, the key, beta and the value only, and
         * nothing else changes the state: a write with the inputs of the head's last write, which
         * changed no bit, and no value change since, changes nothing either (skipped). */
        int same = nkh && R->wnoop[h] && !R->vstale[h] && R->wn[h] == nkh && R->wbeta[h] == beta;
        for (int e = 0; same && e < nkh; e++)
            same = R->wki[2 * h + e] == ki[e] && R->wkn[2 * h + e] == kn[e];
        if (nkh && !same) {                                /* the rule on the key's (one or two) rows */
            uint32_t changed = 0;
            for (int64_t j = 0; j < dv; j++) {
                float kv_mem = S[ki[0] * rs + j] * kn[0];
                if (nkh == 2)                              /* two terms: the same sum in any order */
                    kv_mem = kv_mem + S[ki[1] * rs + j] * kn[1];
                const float delta = (vh[j] - kv_mem) * beta;
                for (int e = 0; e < nkh; e++) {
                    const float was = S[ki[e] * rs + j], now = was + kn[e] * delta;
                    changed |= fbits(was) ^ fbits(now);
                    S[ki[e] * rs + j] = now;
                }
            }
            R->wnoop[h] = changed == 0;
            R->vstale[h] = 0;
            R->wn[h] = (int8_t)nkh;
            R->wbeta[h] = beta;
            for (int e = 0; e < nkh; e++) {
                R->wki[2 * h + e] = (int32_t)ki[e];
                R->wkn[2 * h + e] = kn[e];
            }
            for (int e = 0; changed && e < nkh; e++)
                for (int f = 0; f < nqh; f++)
                    hit |= ki[e] == qi[f];
        }
        const int64_t q0 = nqh == 1 ? qi[0] : nqh == 0 ? -1 : -3;     /* -3: two entries, recomputed */
        const float qv = nqh == 1 ? qs[0] : 0.0f;
        if (!hit && !R->zdirty[h] && q0 != -3 && q0 == R->prev_qi[h] && qv == R->prev_qv[h])
            continue;                                      /* its output is last position's */
        R->prev_qi[h] = (int32_t)q0;
        R->prev_qv[h] = qv;
        float *core = R->pcore + h * dv;
        uint32_t moved = !R->cvalid[h] || R->zdirty[h];
        for (int64_t j = 0; j < dv; j++) {
            float o = 0.0f;
            if (nqh) {
                o = S[qi[0] * rs + j] * qs[0];
                if (nqh == 2)
                    o = o + S[qi[1] * rs + j] * qs[1];
            }
            o = rnd(o, bf);
            moved |= fbits(o) ^ fbits(core[j]);
            core[j] = o;
        }
        if (!moved)                                        /* the read and the gate as when last computed */
            continue;
        R->cvalid[h] = 1;
        /* Qwen3_5RMSNormGated over the head's dv values, gate silu(z) */
        double s = 0.0;
        for (int64_t j = 0; j < dv; j++)
            s += (double)(core[j] * core[j]);
        if ((double)(float)s != s)
            return fail(m, li, E_NORM, s);
        const float r = mean_rsqrt(m, s, dv);
        for (int64_t j = 0; j < dv; j++) {
            float y = rnd(rnd(core[j] * r, bf) * L->norm_w[j], bf), gz;
            if (silu(z->v[h * dv + j], &gz))
                return fail(m, li, E_SILU, z->v[h * dv + j]);
            set(&R->core, h * dv + j, rnd(y * gz, bf));
        }
    }
    return product(m, li, &L->out, &R->out, &R->core);
}

/* The LM head by rows (a product like the others) and the greedy token: the arg max of the logits,
 * the first of equal maxima (as torch.argmax), from per-block maxima kept as rows change: a row that
 * rises above its block's maximum (or equals it at a lower index) becomes the block's; a block whose
 * maximum row falls is scanned again (64 rows). ``force``: the product from scratch. */
static int head_rows(model_t *m, row_t *r, int force)
{
    const int64_t before = m->updates;
    int st = product_(m, m->n_layers, &m->head, &r->head, &r->nf.out, force);
    if (st)
        return st;
    m->updates_head += m->updates - before;
    const vec_t *lg = &r->head.out;
    const int64_t V = m->V, nb = (V + 63) / 64;
    if (force)
        memset(r->stale, 1, nb);
    for (int64_t k = 0; k < lg->n; k++) {
        const int32_t i = lg->idx[k], b = i >> 6;
        if (r->stale[b])
            continue;
        const float v = lg->v[i];
        if (i == r->bidx[b]) {
            if (v < r->bmax[b])
                r->stale[b] = 1;
            else
                r->bmax[b] = v;
        } else if (v > r->bmax[b] || (v == r->bmax[b] && i < r->bidx[b])) {
            r->bmax[b] = v;
            r->bidx[b] = i;
        }
    }
    for (int64_t b = 0; b < nb; b++) {
        if (!r->stale[b])
            continue;
        r->stale[b] = 0;
        const int64_t lo = b * 64, hi = lo + 64 < V ? lo + 64 : V;
        int64_t best = lo;
        for (int64_t i = lo + 1; i < hi; i++)
            if (lg->v[i] > lg->v[best])
                best = i;
        r->bmax[b] = lg->v[best];
        r->bidx[b] = (int32_t)best;
        m->blocks_computed++;
    }
    int64_t best = 0;
    for (int64_t b = 1; b < nb; b++)
        if (r->bmax[b] > r->bmax[best])
            best = b;
    r->last = r->bidx[best];
    return OK;
}

/* The LM head as a max tree over its rows (a segment tree with range additions): a head column's
 * weights are stored as runs of 2^k equal weights on 2^k-aligned rows, each a tree node, so a changed
 * input adds w * (new - old) to a few nodes' lz instead of to every row; mx is recomputed for the
 * dirty nodes, deepest first, and the greedy token is found from the root, left child first on equal
 * maxima (the first index, as torch.argmax). Every lz and mx is a sum of a row's products (exact by
 * the products' bound), and while the head's sums are provably exact in the output dtype too (all
 * multiples of 2^ulow below 2^(l1 + xexp), at most 24 bits for float32, 8 for bfloat16),
 * rounding a row's sum to a logit is the identity, so the arg max of the sums is the arg max of the
 * logits. Where that bound fails the head goes over to the rows (head_rows), for good. */
static int head(model_t *m, row_t *r, float *logits)
{
    if (!r->on_tree)
        return head_rows(m, r, 0);
    const vec_t *x = &r->nf.out;
    prod_t *p = &r->head;
    const int64_t S = m->tree;
    int32_t lo = p->ulow, hi = p->xexp;
    if (!widen(&m->head, x, &lo, &hi))
        return fail(m, m->n_layers, E_SUM, INFINITY);
    const int64_t bits = m->head.l1 + hi - lo;
    const int exact = bits <= (m->bf16 ? 8 : 24) && lo >= (m->bf16 ? -133 : -149) && m->head.l1 + hi <= 127;
    if (!exact) {                                   /* rounding may matter: over to the rows */
        r->on_tree = 0;
        return head_rows(m, r, 1);
    }
    p->ulow = lo;
    p->xexp = hi;
    int64_t *cnt = r->tcount;
    int32_t *list = r->tlist;
    int levels = 0;
    while ((1ll << levels) < 2 * S)
        levels++;
    int64_t total = 0;
    for (int64_t k = 0; k < x->n; k++)
        total += m->tptr[x->idx[k] + 1] - m->tptr[x->idx[k]];
    m->updates_head += total;
    m->updates += total;
    if (total > S / 8) {
        /* many nodes: add to them, then recompute every internal node bottom-up (a level is a
         * contiguous stretch: cheaper than marking the dirty ones) */
        for (int64_t k = 0; k < x->n; k++) {
            const int64_t j = x->idx[k];
            const double dx = (double)x->v[j] - (double)x->old[k];      /* exact (bound) */
            for (int64_t e = m->tptr[j]; e < m->tptr[j + 1]; e++)
                r->lz[m->tnode[e]] += (double)m->tw[e] * dx;
        }
        for (int64_t i = 0; i < m->V; i++)
            r->mx[S + i] = r->lz[S + i];
        for (int64_t n = S - 1; n >= 1; n--) {
            const double a = r->mx[2 * n], b = r->mx[2 * n + 1];         /* finite, or -inf past V */
            r->mx[n] = r->lz[n] + (a >= b ? a : b);
        }
    } else {
        memset(cnt, 0, 64 * sizeof(int64_t));
        for (int64_t k = 0; k < x->n; k++) {
            const int64_t j = x->idx[k];
            const double dx = (double)x->v[j] - (double)x->old[k];      /* exact (bound) */
            for (int64_t e = m->tptr[j]; e < m->tptr[j + 1]; e++) {
                int64_t n = m->tnode[e];
                r->lz[n] += (double)m->tw[e] * dx;
                if (r->tdirty[n])
                    continue;
                int L = 63 - __builtin_clzll((uint64_t)n);
                while (n >= 1 && !r->tdirty[n]) {    /* n and its ancestors need their mx again: */
                    r->tdirty[n] = 1;                /* level L's dirty nodes go to list[2^L ..] */
                    list[(1ll << L) + cnt[L]++] = (int32_t)n;
                    n >>= 1;
                    L--;
                }
            }
        }
        for (int L = levels - 1; L >= 0; L--)        /* recompute them, deepest level first */
            for (int64_t k = 0; k < cnt[L]; k++) {
                const int64_t n = list[(1ll << L) + k];
                r->tdirty[n] = 0;
                if (n >= S) {
                    r->mx[n] = r->lz[n];
                } else {
                    const double a = r->mx[2 * n], b = r->mx[2 * n + 1];
                    r->mx[n] = r->lz[n] + (a >= b ? a : b);
                }
            }
    }
    int64_t n = 1;
    while (n < S)
        n = r->mx[2 * n] >= r->mx[2 * n + 1] ? 2 * n : 2 * n + 1;
    r->last = n - S;
    if (logits) {                                    /* every row's sum: its nodes' lz, root to leaf */
        double *sum = r->tsum;
        sum[1] = r->lz[1];
        for (int64_t a = 2; a < 2 * S; a++)
            sum[a] = sum[a >> 1] + r->lz[a];
        for (int64_t i = 0; i < m->V; i++)
            r->head.out.v[i] = logits[i] = rnd((float)sum[S + i], m->bf16);
    }
    return OK;
}

/* -- entry points ------------------------------------------------------------------------------- */

/* One position of one row: feed ``token``; ``logits`` (V floats) and ``hidden`` ((n_layers + 1) x D:
 * after the embedding and after every layer, the last one normalised, as output_hidden_states) may
 * be NULL. The greedy next token is in r->last (row_last). Returns 0 or a status (m->err_*). */
/* -- one-hot attention (kind 3: the compiler's lookups, gadgets/rom_lookup.py) ------------------- */

/* Qwen3_5RMSNorm of one head's hd values x (the projection's output in the dtype): torch's float32
 * x * rsqrt(mean(x^2) + eps) * (1 + w), rounded to the dtype. Its sum of float32 squares must be exact
 * in float32 in any order: every square exact, all multiples of 2^low, the sum below 2^(low + 24). */
static int head_norm(model_t *m, int64_t li, const float *x, const float *w, int64_t hd, float *out)
{
    double s = 0.0;
    int32_t lo = 1 << 20, hi = -(1 << 20), l, e;
    for (int64_t d = 0; d < hd; d++) {
        const float sq = x[d] * x[d];
        if ((double)sq != (double)x[d] * (double)x[d])
            return fail(m, li, E_NORM, (double)x[d]);
        if (sq != 0.0f) {
            if (bits_of(sq, &l, &e))
                return fail(m, li, E_NORM, (double)x[d]);
            if (l < lo) lo = l;
        }
        s += (double)sq;
    }
    if (s != 0.0) {
        if (bits_of((float)s, &l, &hi) || (double)(float)s != s || hi - lo > 24)
            return fail(m, li, E_NORM, s);
    }
    const float r = mean_rsqrt(m, s, hd);
    for (int64_t d = 0; d < hd; d++)
        out[d] = rnd((x[d] * r) * w[d], m->bf16);
    return OK;
}

static uint64_t entry_hash(int32_t head, const float *k, int64_t hd)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)head;
    const uint32_t *a = (const uint32_t *)k;
    for (int64_t d = 0; d < hd; d++)
        h = (h ^ a[d]) * 0x100000001B3ull;
    return h ^ (h >> 29);
}

/* Add this position's (head, key, value) to the row's entries: one entry per distinct key (equal
 * bits), with the value first offered, how many positions offered the key and whether their values
 * differed; so the state grows with the distinct keys (a lookup's addresses), not with the trace.
 * Positions with one key score alike, so a key that wins is exact only if offered once, or if every
 * value offered with it is 0 (``lookup``). -1 when out of memory. */
static int64_t remember(row_t *r, lrow_t *R, int32_t head, const float *k, const float *v, int64_t hd)
{
    if (2 * (R->n_e + 1) > R->hcap) {                    /* grow the table (and the entries) */
        const int64_t cap = R->hcap ? 2 * R->hcap : 64;
        int64_t *t = calloc(cap, sizeof(int64_t));
        if (!t)
            return -1;
        for (int64_t i = 0; i < R->n_e; i++) {
            uint64_t p = entry_hash(R->ehead[i], R->ek + i * hd, hd) & (uint64_t)(cap - 1);
            while (t[p])
                p = (p + 1) & (uint64_t)(cap - 1);
            t[p] = i + 1;
        }
        free(R->htab);
        R->htab = t;
        r->bytes += (cap - R->hcap) * (int64_t)sizeof(int64_t);
        R->hcap = cap;
    }
    if (R->n_e == R->cap_e) {
        const int64_t cap = R->cap_e ? 2 * R->cap_e : 32;
        float *ek = realloc(R->ek, cap * hd * sizeof(float));
        if (ek) R->ek = ek;
        float *ev = realloc(R->ev, cap * hd * sizeof(float));
        if (ev) R->ev = ev;
        int64_t *c = realloc(R->ecount, cap * sizeof(int64_t));
        if (c) R->ecount = c;
        int32_t *hh = realloc(R->ehead, cap * sizeof(int32_t));
        if (hh) R->ehead = hh;
        uint8_t *mx = realloc(R->emixed, cap);
        if (mx) R->emixed = mx;
        double *sc = realloc(R->escore, cap * sizeof(double));
        if (sc) R->escore = sc;
        if (!ek || !ev || !c || !hh || !mx || !sc)
            return -1;
        r->bytes += (cap - R->cap_e) * (int64_t)(2 * hd * sizeof(float) + 2 * sizeof(int64_t) + sizeof(int32_t) + 1);
        R->cap_e = cap;
    }
    uint64_t p = entry_hash(head, k, hd) & (uint64_t)(R->hcap - 1);
    while (R->htab[p]) {
        const int64_t i = R->htab[p] - 1;
        if (R->ehead[i] == head && !memcmp(R->ek + i * hd, k, hd * sizeof(float))) {
            R->ecount[i]++;
            R->emixed[i] |= memcmp(R->ev + i * hd, v, hd * sizeof(float)) != 0;
            return i;
        }
        p = (p + 1) & (uint64_t)(R->hcap - 1);
    }
    const int64_t i = R->n_e++;
    memcpy(R->ek + i * hd, k, hd * sizeof(float));
    memcpy(R->ev + i * hd, v, hd * sizeof(float));
    R->ecount[i] = 1;
    R->emixed[i] = 0;
    R->ehead[i] = head;
    R->htab[p] = i + 1;
    return i;
}

/* A full-attention layer whose softmax is provably one-hot at every position (the compiler's lookups:
 * the image builder checked that on every rotary pair only queries or only keys are non-zero, so RoPE
 * changes no score and is not applied). Per q head: the scores against every distinct key seen
 * (``remember``), scaled; the winner must lead every other entry by 104 after
 * any rounding of the scores to the dtype (exp(-104) is 0.0 in float32: softmax 1 on it, 0 elsewhere),
 * and be offered once, or every entry within that lead must carry the value 0 (then the output is 0).
 * Then the output gate, which must saturate (sigmoid exactly 0 or 1), and o_proj. */
static int lookup(model_t *m, int64_t li, const layer_t *L, row_t *r, lrow_t *R, const vec_t *x)
{
    const int64_t hd = L->hd, nh = L->nh, nkv = L->nkv, group = L->nh / L->nkv;
    int st;
    if ((st = product_(m, li, &L->aq, &R->aq, x, 0)) || (st = product_(m, li, &L->ak, &R->ak, x, 0)) ||
        (st = product_(m, li, &L->av, &R->av, x, 0)))
        return st;
    for (int64_t g = 0; g < nkv; g++) {
        if ((st = head_norm(m, li, R->ak.out.v + g * hd, L->kn_w, hd, R->kn)))
            return st;
        if (remember(r, R, (int32_t)g, R->kn, R->av.out.v + g * hd, hd) < 0)
            return fail(m, li, E_ATTN, -1.0);
    }
    const int64_t *cp = L->ao.colptr;
    for (int64_t h = 0; h < nh; h++) {
        const int64_t g = h / group;
        const float *gate = R->aq.out.v + h * 2 * hd + hd;
        /* a dim whose o_proj column is empty adds nothing whatever it holds (0 times a finite value);
           a head with no such column, or every gate shut, adds exactly 0 */
        int any = 0;
        for (int64_t d = 0; d < hd; d++)
            any |= cp[h * hd + d + 1] > cp[h * hd + d] && gate[d] > -90.0f;
        if (!any) {
            for (int64_t d = 0; d < hd; d++)
                set(&R->attn, h * hd + d, 0.0f);
            continue;
        }
        if ((st = head_norm(m, li, R->aq.out.v + h * 2 * hd, L->qn_w, hd, R->qn)))
            return st;
        int32_t *nz = m->list;
        int64_t nn = 0;
        for (int64_t d = 0; d < hd; d++)
            if (R->qn[d] != 0.0f)
                nz[nn++] = (int32_t)d;
        double best = -INFINITY;
        int64_t win = -1;
        for (int64_t e = 0; e < R->n_e; e++) {
            if (R->ehead[e] != g)
                continue;
            const float *k = R->ek + e * hd;
            double sc = 0.0;
            for (int64_t t = 0; t < nn; t++)
                sc += (double)R->qn[nz[t]] * (double)k[nz[t]];
            R->escore[e] = sc *= L->scaling;
            if (sc > best) { best = sc; win = e; }
        }
        /* every entry within reach of the best: one offered once, or all of value 0 */
        int zero_only = 1, others = 0;
        for (int64_t e = 0; e < R->n_e; e++) {
            if (R->ehead[e] != g)
                continue;
            const double sc = R->escore[e];
            /* each score rounded at most twice to bfloat16 (the product, then an inexact scaling): 2^-8 */
            if (best - sc < 104.0 + 0x1p-8 * (fabs(best) + fabs(sc)) + 1e-9 * fabs(best)) {
                const float *v = R->ev + e * hd;
                zero_only &= !R->emixed[e];
                for (int64_t d = 0; d < hd; d++)
                    zero_only &= v[d] == 0.0f;
                others += e != win;
            }
        }
        if (win < 0 || (!zero_only && (others || R->ecount[win] > 1 || R->emixed[win])))
            return fail(m, li, E_ATTN, best);
        const float *v = R->ev + win * hd;
        for (int64_t d = 0; d < hd; d++) {
            const int used = cp[h * hd + d + 1] > cp[h * hd + d];
            const float val = zero_only || !used ? 0.0f : v[d];
            float sg = 1.0f;                 /* a value of 0 times any finite gate is 0 */
            if (val != 0.0f) {
                if (gate[d] >= 18.0f) sg = 1.0f;
                else if (gate[d] <= -90.0f) sg = 0.0f;
                else return fail(m, li, E_SIGMOID, (double)gate[d]);
            } else if (!(fabsf(gate[d]) < INFINITY)) {
                return fail(m, li, E_SIGMOID, (double)gate[d]);
            }
            set(&R->attn, h * hd + d, rnd(val * sg, m->bf16));
        }
    }
    return product_(m, li, &L->ao, &R->ao, &R->attn, 0);
}

static int step(model_t *m, row_t *r, int64_t token, float *logits, float *hidden)
{
    const int64_t D = m->D;
    if (token < 0 || token >= m->V)
        return fail(m, -1, E_TOKEN, (double)token);
    r->h0.n = 0;
    if (m->embed) {
        const float *e = m->embed + token * D;
        for (int64_t i = 0; i < D; i++)
            set(&r->h0, i, e[i]);
    } else {
        /* the same changes as the dense loop, by rows: the previous token's entries that the new row
           does not have become +0.0, then the new row's entries are set (each index once) */
        const int64_t a = m->eptr[token], b = m->eptr[token + 1];
        for (int64_t k = a; k < b; k++)
            m->flag[m->ecol[k]] = 1;
        if (r->prev_token >= 0)
            for (int64_t k = m->eptr[r->prev_token]; k < m->eptr[r->prev_token + 1]; k++)
                if (!m->flag[m->ecol[k]])
                    set(&r->h0, m->ecol[k], 0.0f);
        for (int64_t k = a; k < b; k++) {
            m->flag[m->ecol[k]] = 0;
            set(&r->h0, m->ecol[k], m->eval[k]);
        }
    }
    r->prev_token = token;
    if (hidden)
        memcpy(hidden, r->h0.v, D * sizeof(float));
    const vec_t *h = &r->h0;
    for (int64_t li = 0; li < m->n_layers; li++) {
        const layer_t *L = &m->layers[li];
        lrow_t *R = &r->L[li];
        int st;
        if (L->kind == 2) {         /* attention adds exactly 0 while its values are all 0 */
            if ((st = norm(m, li, &R->n1, h, L->n1, D)) || (st = product(m, li, &L->v, &R->v, &R->n1.out)))
                return st;
            for (int64_t k = 0; k < R->v.out.n; k++)
                if (R->v.out.v[R->v.out.idx[k]] != 0.0f)
                    return fail(m, li, E_ATTN, (double)R->v.out.idx[k]);
        }
        if (L->kind == 1) {
            if ((st = norm(m, li, &R->n1, h, L->n1, D)) || (st = deltanet(m, li, L, R, &R->n1.out)))
                return st;
            residual(m, &R->h1, h, &R->out.out);
            h = &R->h1;
        }
        if (L->kind == 3) {
            R->attn.n = 0;
            if ((st = norm(m, li, &R->n1, h, L->n1, D)) || (st = lookup(m, li, L, r, R, &R->n1.out)))
                return st;
            residual(m, &R->h1, h, &R->ao.out);
            h = &R->h1;
        }
        if ((st = norm(m, li, &R->n2, h, L->n2, D)) || (st = mlp(m, li, L, R, &R->n2.out)))
            return st;
        residual(m, &R->h2, h, &R->down.out);
        h = &R->h2;
        if (hidden)
            memcpy(hidden + (li + 1) * D, h->v, D * sizeof(float));
    }
    int st;
    if ((st = norm(m, m->n_layers, &r->nf, h, m->final_n, D)) || (st = head(m, r, logits)))
        return st;
    if (hidden)
        memcpy(hidden + m->n_layers * D, r->nf.out.v, D * sizeof(float));
    if (logits && !r->on_tree)
        memcpy(logits, r->head.out.v, m->V * sizeof(float));
    m->positions++;
    return OK;
}

int64_t n2t_row_last(const row_t *r) { return r->last; }

int n2t_step(model_t *m, row_t *r, int64_t token, float *logits, float *hidden)
{
    return step(m, r, token, logits, hidden);
}

/* Feed ``n_feed`` tokens, then generate greedily (each generated token is fed too) until a token
 * whose ``end`` flag is set (end may be NULL) or ``max_new`` tokens; with n_feed = 0 the first
 * generated token is the greedy token after the row's last position. The tokens go to ``out``,
 * their number to ``*n_out``. Returns 0 or a status. */
int n2t_generate(model_t *m, row_t *r, const int64_t *feed, int64_t n_feed, const uint8_t *end, int64_t max_new,
             int64_t *out, int64_t *n_out)
{
    int st;
    *n_out = 0;
    for (int64_t k = 0; k < n_feed; k++)
        if ((st = step(m, r, feed[k], NULL, NULL)))
            return st;
    while (*n_out < max_new) {
        const int64_t t = r->last;
        out[(*n_out)++] = t;
        if ((st = step(m, r, t, NULL, NULL)))
            return st;
        if (end && end[t])
            break;
    }
    return OK;
}
