# Comprehensions: list, dict and set comprehensions, nested loops, conditions, generator expressions.
squares = [x * x for x in range(10)]
evens = [x for x in squares if x % 2 == 0]
pairs = [(i, j) for i in range(3) for j in range(3) if i != j]
print(squares, evens, pairs)
print(sorted({k: len(k) for k in ["a", "bb", "ccc"]}.items()), sorted({c.upper() for c in "hello"}))
matrix = [[1, 2, 3], [4, 5, 6]]
print([[row[i] for row in matrix] for i in range(3)], [v for row in matrix for v in row])
print(sum(x for x in range(100) if x % 7 == 0), any(x > 8 for x in squares), all(x >= 0 for x in squares))
print(["fizzbuzz" if i % 15 == 0 else "fizz" if i % 3 == 0 else "buzz" if i % 5 == 0 else i for i in range(1, 16)])
words = "the quick brown fox jumps over the lazy dog".split()
print(sorted({w: i for i, w in enumerate(words)}.items()), ["".join(reversed(w)) for w in words if len(w) > 3])
print(max(len(w) for w in words), sorted(set(len(w) for w in words)))
