# Matrices as lists of lists: product, transpose, identity, determinant by recursion, powers.
def matmul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]

def transpose(m):
    return [list(r) for r in zip(*m)]

def det(m):
    if len(m) == 1:
        return m[0][0]
    return sum((-1) ** j * m[0][j] * det([row[:j] + row[j + 1:] for row in m[1:]]) for j in range(len(m)))

def identity(n):
    return [[int(i == j) for j in range(n)] for i in range(n)]

def matpow(m, e):
    r = identity(len(m))
    while e:
        if e & 1:
            r = matmul(r, m)
        m = matmul(m, m)
        e >>= 1
    return r

a = [[1, 2, 3], [4, 5, 6]]
b = [[7, 8], [9, 10], [11, 12]]
print(matmul(a, b), transpose(a))
print(det([[2, 0, 1], [1, 3, 2], [1, 1, 1]]), det([[1, 2, 3, 4], [5, 6, 7, 8], [2, 6, 4, 8], [3, 1, 1, 2]]))
print(matpow([[1, 1], [1, 0]], 90)[0][1])
print(matmul([[0.5, 1.5], [2.0, -1.0]], [[2.0], [4.0]]))
