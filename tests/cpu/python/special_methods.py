# Special methods: operators, comparisons, containers, iteration, hashing, callable objects.
class Vec:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __add__(self, o):
        return Vec(self.x + o.x, self.y + o.y)

    def __sub__(self, o):
        return Vec(self.x - o.x, self.y - o.y)

    def __mul__(self, k):
        return Vec(self.x * k, self.y * k)

    def __eq__(self, o):
        return self.x == o.x and self.y == o.y

    def __lt__(self, o):
        return (self.x, self.y) < (o.x, o.y)

    def __hash__(self):
        return hash((self.x, self.y))

    def __repr__(self):
        return f"Vec({self.x}, {self.y})"

class Bag:
    def __init__(self, *items):
        self.items = list(items)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]

    def __contains__(self, v):
        return v in self.items

    def __iter__(self):
        return iter(self.items)

    def __call__(self, v):
        self.items.append(v)
        return len(self.items)

a, b = Vec(1, 2), Vec(3, -1)
print(a + b, a - b, a * 3, a == Vec(1, 2), a != b, sorted([b, a, Vec(0, 9)]))
print(len({a, Vec(1, 2), b}))
bag = Bag(3, 1, 2)
print(len(bag), bag[0], bag[-1], 2 in bag, 7 in bag, list(bag), bag(9), sorted(bag), max(bag))
