# Lists: building, mutating, slicing, slice assignment, nesting, copying, searching.
a = [5, 3, 8]
a.append(1)
a.extend([9, 2])
a.insert(0, 7)
print(a, len(a), a.index(8), a.count(3))
print(a.pop(), a.pop(0), a)
a.remove(8)
a.reverse()
print(a, a[1:3], a[::-1], a[-2:])
a[1:3] = [10, 20, 30]
print(a)
del a[0]
print(a, 20 in a, 99 in a)
b = a[:]
b.append(0)
print(a, b, a == b, [1, 2] + [3], [0] * 4)
grid = [[i * j for j in range(4)] for i in range(3)]
print(grid, grid[2][3], sum(sum(row) for row in grid))
print(list(range(10, 0, -3)), sorted([3, 1, 2]), list("abc"), [x for x in a if x % 2 == 0])
stack = []
for i in range(5):
    stack.append(i * i)
while stack:
    print(stack.pop(), end=" ")
print()
