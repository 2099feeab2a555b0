# Generators: yield, state across calls, yield from, send, infinite generators, generator expressions.
def count_up(n):
    i = 0
    while i < n:
        yield i
        i += 1

def fib():
    a, b = 0, 1
    while True:
        yield a
        a, b = b, a + b

def chain(*iterables):
    for it in iterables:
        yield from it

def running_total():
    total = 0
    while True:
        value = yield total
        total += value

print(list(count_up(5)), sum(count_up(101)))
f = fib()
print([next(f) for _ in range(15)])
print(list(chain([1, 2], "ab", range(3))))
acc = running_total()
next(acc)
print([acc.send(v) for v in (5, 10, -3)])
g = (x * x for x in range(6))
print(next(g), next(g), list(g))
def take(n, it):
    for i, v in enumerate(it):
        if i >= n:
            return
        yield v
print(list(take(5, fib())), list(zip(count_up(3), "xyz")))
