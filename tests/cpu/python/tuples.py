# Tuples and None/bool: packing, unpacking, swapping, comparison, hashing as keys, truthiness.
point = (3, 4)
x, y = point
x, y = y, x
print(point, x, y, point + (5,), point * 2, len(point), point.index(4), (1, 2) < (1, 3))
grid = {(0, 0): "origin", (1, 2): "p"}
print(grid[(1, 2)], (0, 0) in grid, sorted(grid))
single = (42,)
print(single, type(single).__name__, tuple([1, 2]), tuple("ab"))
print([v for v in (0, 1, "", "a", [], [0], None, 0.0) if v], None is None, not None, bool([]))
def minmax(seq):
    return min(seq), max(seq)
lo, hi = minmax([4, -2, 9])
print(lo, hi, divmod(17, 5), sorted([(2, "b"), (1, "z"), (2, "a")]))
print(True + True, True * 10, 3 if None else 4, None or "fallback", 0 and 1, [] or {} or "last")
