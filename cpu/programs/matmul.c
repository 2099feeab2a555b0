/* matmul: multiply two 10x10 integer matrices and a 10x10 by its transpose; print row sums, the
 * trace and a checksum. */
#include "runtime.h"

#define N 10
static int A[N][N], B[N][N], C[N][N];

static void matmul(int (*c)[N], int (*a)[N], int (*b)[N])
{
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            int s = 0;
            for (int k = 0; k < N; k++)
                s += a[i][k] * b[k][j];
            c[i][j] = s;
        }
}

int main(void)
{
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            A[i][j] = (i * 7 + j * 3) % 11 - 5;
            B[i][j] = (i * 5 + j * 9 + 2) % 13 - 6;
        }
    matmul(C, A, B);
    int trace = 0;
    unsigned checksum = 0;
    for (int i = 0; i < N; i++) {
        int row = 0;
        for (int j = 0; j < N; j++) {
            row += C[i][j];
            checksum = checksum * 17u + (unsigned)C[i][j];
        }
        trace += C[i][i];
        printf("row %d: sum %d, first %d, last %d\n", i, row, C[i][0], C[i][N - 1]);
    }
    printf("trace %d checksum %08x\n", trace, checksum);
    /* A times its transpose is symmetric with a non-negative diagonal */
    int T[N][N];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            T[i][j] = A[j][i];
    matmul(C, A, T);
    int symmetric = 1;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            if (C[i][j] != C[j][i])
                symmetric = 0;
    printf("A*At symmetric: %s, diagonal[0..2] = %d %d %d\n", symmetric ? "yes" : "no", C[0][0], C[1][1], C[2][2]);
    return 0;
}
