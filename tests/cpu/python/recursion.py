# Recursion: memoized Fibonacci, Towers of Hanoi, permutations, Ackermann, flattening, gcd.
memo = {}
def fib(n):
    if n < 2:
        return n
    if n not in memo:
        memo[n] = fib(n - 1) + fib(n - 2)
    return memo[n]

def hanoi(n, a, b, c, moves):
    if n:
        hanoi(n - 1, a, c, b, moves)
        moves.append((a, c))
        hanoi(n - 1, b, a, c, moves)
    return moves

def perms(items):
    if len(items) <= 1:
        return [items]
    out = []
    for i in range(len(items)):
        for p in perms(items[:i] + items[i + 1:]):
            out.append(items[i:i + 1] + p)
    return out

def ack(m, n):
    if m == 0:
        return n + 1
    if n == 0:
        return ack(m - 1, 1)
    return ack(m - 1, ack(m, n - 1))

def flatten(x):
    return [y for v in x for y in flatten(v)] if isinstance(x, list) else [x]

def gcd(a, b):
    return a if b == 0 else gcd(b, a % b)

print(fib(90), len(hanoi(8, "A", "B", "C", [])), hanoi(2, "A", "B", "C", []))
print(perms("abc"), len(perms([1, 2, 3, 4])))
print(ack(2, 3), flatten([1, [2, [3, [4, 5]], 6], [[7]]]), gcd(1071, 462))
