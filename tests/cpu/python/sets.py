# Sets: operations, membership, mutation, frozensets; printed sorted (iteration order is not Python's promise).
a = {1, 2, 3, 4, 5}
b = {4, 5, 6, 7}
print(sorted(a | b), sorted(a & b), sorted(a - b), sorted(a ^ b))
print(3 in a, 9 in a, len(a), a <= {1, 2, 3, 4, 5, 6}, {1, 2} < a, a.isdisjoint({8, 9}))
a.add(10)
a.discard(1)
a.discard(100)
print(sorted(a), sorted(set("mississippi")), len(set([1, 1, 2, 2, 3])))
s = set()
for x in [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]:
    s.add(x)
print(sorted(s), sorted(s, reverse=True), sum(s), max(s))
f = frozenset([1, 2, 3])
print(sorted(f | {4}), 2 in f, sorted({x % 3 for x in range(10)}))
a.remove(10)
print(sorted(a.union([20, 30])), sorted(a.intersection(range(4))), sorted(a.difference({2})))
