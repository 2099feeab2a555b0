/* Sparse matrix times dense rows, for netlist2tf.fast: y[b][r] = sum_k val[k] * x[b][col[k]] over the
 * non-zero entries k of row r (CSR), accumulated in double and stored as float.
 *
 * Exactness: val and x are float32 values (the weights and activations of a float32 or bfloat16
 * model, widened exactly), so every product is exact in double (24 + 24 < 53 bits); the compiled
 * models' sums are of few small integers and halves, exact in double in any order. Compiled without
 * -ffast-math and with -ffp-contract=off: the order of the additions is the loop's, nothing else. */
#include <stdint.h>

void n2t_spmv(int64_t rows, int64_t batch, int64_t n_in, const int64_t *indptr, const int64_t *col,
          const float *val, const float *x, float *y)
{
    for (int64_t b = 0; b < batch; b++) {
        const float *xb = x + b * n_in;
        float *yb = y + b * rows;
        for (int64_t r = 0; r < rows; r++) {
            double acc = 0.0;
            for (int64_t k = indptr[r]; k < indptr[r + 1]; k++)
                acc += (double)val[k] * (double)xb[col[k]];
            yb[r] = (float)acc;
        }
    }
}
