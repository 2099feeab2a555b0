/* One position of a compiled Qwen3.5 checkpoint's forward, for netlist2tf.fast (the "c" kernel).
 *
 * Every operation mirrors the stock transformers operation on the same values in the same dtype
 * (float32, or bfloat16 held in floats and rounded to nearest-even after each operation that the
 * stock forward rounds); the sparse products accumulate in double (exact for the compiled models).
 * The non-linear functions are evaluated only where every correct implementation gives the same
 * float (silu and sigmoid saturated or at 0, softplus beyond its threshold or underflowing, a decay
 * of exactly 1, one-hot or zero DeltaNet keys and queries); any other input stops the step with a
 * status naming the layer and the operation, and the caller runs the checkpoint with stock
 * transformers instead. Norms' mean squares come from the caller (``mean_rsqrt``: torch computes
 * rsqrt(mean + eps) for that sum, so the reduction's own rounding is torch's).
 * Compiled without -ffast-math and with -ffp-contract=off. */
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct { int64_t rows, cols; const int64_t *indptr; const int32_t *col; const float *val; } csr_t;

typedef struct {
    int64_t kind;                 /* 0: silent attention, 1: DeltaNet */
    const float *n1, *n2;         /* 1 + norm weight, float32, D each */
    csr_t gate_up, down;          /* MLP: gate rows, then up rows (neurons each) */
    int64_t neurons;
    csr_t qkv, z, ab, out;        /* DeltaNet projections */
    const float *conv_w;          /* conv_dim x K */
    const float *conv_b;          /* conv_dim, or NULL */
    int64_t conv_dim, K;
    const float *neg_exp_a;       /* nv: -exp(A_log.float()), as torch computed it */
    const float *dt_bias;         /* nv */
    const float *norm_w;          /* dv */
    int64_t nk, nv, dk, dv;
    float *conv_state;            /* batch x conv_dim x (K - 1) */
    float *rec;                   /* batch x nv x dk x dv */
    const int32_t *live;          /* the channels whose projection row or bias is non-zero: the others
                                     stay 0 (an empty row gives 0, its window stays 0, silu(0) = 0) */
    int64_t n_live;
} layer_t;

typedef float (*mean_rsqrt_t)(double sum, int64_t n, double eps);

typedef struct {
    int64_t D, V, n_layers, bf16, batch;
    const float *embed;           /* V x D */
    const float *final_n;         /* D */
    csr_t head;
    layer_t *layers;
    double eps;
    mean_rsqrt_t mean_rsqrt;
    float *scratch;               /* large enough for every buffer of one row (see fast.py) */
    int64_t err_layer, err_op;
    double err_value;
    int64_t cache_n[64];          /* (sum, n) -> rsqrt(mean + eps), filled from mean_rsqrt */
    double cache_sum[64];
    float cache_val[64];
    double *xd;                   /* as many doubles as the widest product's input */
} model_t;

/* rsqrt(mean + eps) for n values summing to s: from the small table, else from the caller (torch) */
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

enum { OK = 0, E_SILU = 1, E_SIGMOID = 2, E_SOFTPLUS = 3, E_DECAY = 4, E_KEY = 5, E_QUERY = 6, E_NORM = 7 };

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

static double *xd;               /* the input widened once per product (exactly): m->xd */

static void spmv(const csr_t *a, const float *x, float *y, int64_t bf16)
{
    for (int64_t i = 0; i < a->cols; i++)
        xd[i] = (double)x[i];
    const int64_t *ip = a->indptr;
    const int32_t *col = a->col;
    const float *val = a->val;
    for (int64_t r = 0; r < a->rows; r++) {
        double acc = 0.0;
        for (int64_t k = ip[r]; k < ip[r + 1]; k++)
            acc += (double)val[k] * xd[col[k]];
        y[r] = rnd((float)acc, bf16);
    }
}

/* silu where it is exact for any correct exp: x >= 18 gives x, x <= -90 gives -0, 0 gives 0 */
static inline int silu(float x, float *out)
{
    if (x >= 18.0f) { *out = x; return 0; }
    if (x <= -90.0f) { *out = -0.0f; return 0; }
    if (x == 0.0f) { *out = x * 0.5f; return 0; }
    return 1;
}

/* rsqrt(mean(h^2) + eps) as torch computes it: the float32 squares summed exactly (which must be a
 * float32 value, so that torch's sum in any order is the same), then torch's mean and rsqrt */
static int norm_factor(model_t *m, int64_t layer, const float *h, int64_t n, float *r)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float sq = h[i] * h[i];
        s += (double)sq;
    }
    if ((double)(float)s != s)
        return fail(m, layer, E_NORM, s);
    *r = mean_rsqrt(m, s, n);
    return OK;
}

/* Qwen3_5RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w), rounded to the dtype */
static int rms_norm(model_t *m, int64_t layer, const float *h, const float *scale, int64_t n, float *out)
{
    float r;
    int st = norm_factor(m, layer, h, n, &r);
    if (st)
        return st;
    for (int64_t i = 0; i < n; i++)
        out[i] = rnd((h[i] * r) * scale[i], m->bf16);
    return OK;
}

static int deltanet(model_t *m, int64_t li, layer_t *L, int64_t b, const float *x, float *out, float *buf)
{
    const int64_t bf = m->bf16, C = L->conv_dim, K = L->K, nv = L->nv, dk = L->dk, dv = L->dv;
    const int64_t key_dim = L->nk * dk, group = nv / L->nk;
    float *mixed = buf, *z = mixed + C, *ab = z + nv * dv, *normed = ab + 2 * nv;
    spmv(&L->qkv, x, mixed, bf);
    spmv(&L->z, x, z, bf);
    spmv(&L->ab, x, ab, bf);
    float *cs = L->conv_state + b * C * (K - 1);
    for (int64_t ci = 0; ci < L->n_live; ci++) {       /* causal_conv1d_update, then silu */
        const int64_t c = L->live[ci];
        float *st = cs + c * (K - 1);
        double acc = 0.0;
        for (int64_t k = 0; k < K - 1; k++)
            acc += (double)L->conv_w[c * K + k] * (double)st[k];
        acc += (double)L->conv_w[c * K + K - 1] * (double)mixed[c];
        if (L->conv_b)
            acc += (double)L->conv_b[c];
        for (int64_t k = 0; k + 1 < K - 1; k++)
            st[k] = st[k + 1];
        st[K - 2] = mixed[c];
        float o = rnd((float)acc, bf);
        float s;
        if (silu(o, &s))
            return fail(m, li, E_SILU, o);
        mixed[c] = rnd(s, bf);
    }
    const float *q = mixed, *k = mixed + key_dim, *v = mixed + 2 * key_dim;
    const float sqrt_dk = (float)sqrt((double)dk);    /* query / dk ** 0.5 */
    float *rec = L->rec + b * nv * dk * dv;
    int64_t *kidx = (int64_t *)(normed + nv * dv), *qidx = kidx + L->nk;
    for (int64_t kh = 0; kh < L->nk; kh++) {           /* the one non-zero entry of each key and query */
        const float *kk = k + kh * dk, *qq = q + kh * dk;
        int64_t ki = -1, qi = -1;
        for (int64_t i = 0; i < dk; i++) {
            if (kk[i] != 0.0f) { if (ki >= 0) return fail(m, li, E_KEY, (double)kh); ki = i; }
            if (qq[i] != 0.0f) { if (qi >= 0) return fail(m, li, E_QUERY, (double)kh); qi = i; }
        }
        kidx[kh] = ki;
        qidx[kh] = qi;
    }
    for (int64_t h = 0; h < nv; h++) {
        const float a = ab[h], bb = ab[nv + h];
        float beta;                                        /* b.sigmoid() */
        if (bb >= 18.0f) beta = 1.0f;
        else if (bb <= -90.0f) beta = 0.0f;
        else if (bb == 0.0f) beta = 0.5f;
        else return fail(m, li, E_SIGMOID, bb);
        float t = a + L->dt_bias[h], sp;                  /* softplus(a.float() + dt_bias) */
        if (t > 20.0f) sp = t;
        else if (t <= -104.0f) sp = 0.0f;
        else return fail(m, li, E_SOFTPLUS, t);
        float g = L->neg_exp_a[h] * sp;
        if (g != 0.0f)                                     /* exp(g) must be exactly 1 */
            return fail(m, li, E_DECAY, g);
        const float *kh = k + (h / group) * dk, *qh = q + (h / group) * dk;
        const int64_t ki = kidx[h / group], qi = qidx[h / group];
        float *S = rec + h * dk * dv;
        const float *vh = v + h * dv;
        if (ki >= 0) {                                     /* l2norm of a one-hot key */
            float kv = kh[ki];
            float kn = kv * (1.0f / sqrtf(kv * kv + 1e-6f));
            float *row = S + ki * dv;
            for (int64_t j = 0; j < dv; j++) {
                float delta = (vh[j] - row[j] * kn) * beta;
                row[j] = row[j] + kn * delta;
            }
        }
        float *core = normed + h * dv;
        if (qi >= 0) {
            float qv = qh[qi];
            float qn = (qv * (1.0f / sqrtf(qv * qv + 1e-6f))) / sqrt_dk;
            for (int64_t j = 0; j < dv; j++)
                core[j] = rnd(S[qi * dv + j] * qn, bf);
        } else {
            for (int64_t j = 0; j < dv; j++)
                core[j] = 0.0f;
        }
        /* Qwen3_5RMSNormGated over the head's dv values, gate silu(z) */
        float r;
        int st = norm_factor(m, li, core, dv, &r);
        if (st)
            return st;
        for (int64_t j = 0; j < dv; j++) {
            float y = rnd(rnd(core[j] * r, bf) * L->norm_w[j], bf), gz;
            if (silu(z[h * dv + j], &gz))
                return fail(m, li, E_SILU, z[h * dv + j]);
            core[j] = rnd(y * gz, bf);
        }
    }
    spmv(&L->out, normed, out, bf);
    return OK;
}

/* One position for every batch row: tokens (batch) -> logits (batch x V). hidden: NULL, or
 * (n_layers + 1) x batch x D floats receiving the hidden state after the embedding and after every
 * layer, the last one normalised (as output_hidden_states). Returns 0, or a status (m->err_*). */
int step(model_t *m, const int64_t *tokens, float *logits, float *hidden)
{
    const int64_t D = m->D, bf = m->bf16, B = m->batch;
    xd = m->xd;
    for (int64_t b = 0; b < B; b++) {
        float *h = m->scratch, *x = h + D, *o = x + D, *buf = o + D;
        memcpy(h, m->embed + tokens[b] * D, D * sizeof(float));
        if (hidden)
            memcpy(hidden + b * D, h, D * sizeof(float));
        for (int64_t li = 0; li < m->n_layers; li++) {
            layer_t *L = &m->layers[li];
            int st;
            if (L->kind == 1) {
                if ((st = rms_norm(m, li, h, L->n1, D, x)))
                    return st;
                if ((st = deltanet(m, li, L, b, x, o, buf)))
                    return st;
                for (int64_t i = 0; i < D; i++)
                    h[i] = rnd(h[i] + o[i], bf);
            }
            if ((st = rms_norm(m, li, h, L->n2, D, x)))
                return st;
            float *gu = buf, *prod = buf + 2 * L->neurons;
            spmv(&L->gate_up, x, gu, bf);
            for (int64_t j = 0; j < L->neurons; j++) {
                float s;
                if (silu(gu[j], &s))
                    return fail(m, li, E_SILU, gu[j]);
                prod[j] = rnd(rnd(s, bf) * gu[L->neurons + j], bf);
            }
            spmv(&L->down, prod, o, bf);
            for (int64_t i = 0; i < D; i++)
                h[i] = rnd(h[i] + o[i], bf);
            if (hidden)
                memcpy(hidden + ((li + 1) * B + b) * D, h, D * sizeof(float));
        }
        int st;
        if ((st = rms_norm(m, m->n_layers, h, m->final_n, D, x)))
            return st;
        if (hidden)
            memcpy(hidden + (m->n_layers * B + b) * D, x, D * sizeof(float));
        spmv(&m->head, x, logits + b * m->V, bf);
    }
    return OK;
}
