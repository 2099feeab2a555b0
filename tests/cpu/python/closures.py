# Functions: closures, nonlocal, default and keyword arguments, *args/**kwargs, lambdas, map/filter.
def make_counter(start=0):
    n = start
    def inc(by=1):
        nonlocal n
        n += by
        return n
    return inc

c = make_counter(10)
print(c(), c(), c(5))

def describe(a, b=2, *rest, sep="-", **opts):
    return sep.join(str(x) for x in (a, b) + rest) + " " + str(sorted(opts.items()))

print(describe(1), describe(1, 3, 5, 7, sep="+"), describe("x", k=1, j=2))
args = (4, 5)
kwargs = {"sep": "/"}
print(describe(*args, **kwargs))
compose = lambda f, g: lambda x: f(g(x))
inc_then_double = compose(lambda x: x * 2, lambda x: x + 1)
print(inc_then_double(5), list(map(inc_then_double, range(4))), list(filter(lambda v: v % 3, range(10))))
adders = [lambda x, k=k: x + k for k in range(3)]
print([f(10) for f in adders])
def apply_n(f, n, x):
    for _ in range(n):
        x = f(x)
    return x
print(apply_n(lambda v: v * v, 3, 2), apply_n(str.upper, 1, "shout"))
