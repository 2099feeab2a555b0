# Iteration helpers: enumerate, zip, reversed, range with steps, min/max with keys, iter/next, unpacking.
names = ["ann", "bob", "cy"]
ages = [31, 25, 40]
for i, (n, a) in enumerate(zip(names, ages), 1):
    print(i, n, a)
print(list(reversed(names)), list(range(20, 0, -4)), list(range(-3, 3)))
print(max(zip(ages, names)), min(names, key=len), max(names, key=lambda s: s[-1]))
first, *middle, last = range(6)
print(first, middle, last)
it = iter([10, 20, 30])
print(next(it), next(it), next(it), next(it, "end"))
a, (b, c) = 1, (2, 3)
print(a, b, c, [x for pair in zip("ab", "cd") for x in pair])
total = 0
for i in range(10):
    if i == 7:
        break
    if i % 2:
        continue
    total += i
else:
    total = -1
print(total)
n = 0
while True:
    n += 1
    if n * n > 50:
        break
print(n, list(enumerate("xyz")), sorted(dict(enumerate("ab")).items()))
