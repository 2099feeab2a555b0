# Primes: a sieve of Eratosthenes, trial division, prime factorization, twin primes.
N = 3000
sieve = [True] * (N + 1)
sieve[0] = sieve[1] = False
for i in range(2, int(N ** 0.5) + 1):
    if sieve[i]:
        for j in range(i * i, N + 1, i):
            sieve[j] = False
primes = [i for i, p in enumerate(sieve) if p]
print(len(primes), sum(primes), primes[:12], primes[-3:])

def factor(n):
    out, d = [], 2
    while d * d <= n:
        while n % d == 0:
            out.append(d)
            n //= d
        d += 1
    if n > 1:
        out.append(n)
    return out

print(factor(360), factor(9973), factor(999983), factor(600851475143))
print([(p, p + 2) for p in primes[:40] if sieve[p + 2]][:8])
