# f-strings: expressions, conversions, widths, alignment, fill, integer bases, nesting.
name, n, pi = "Ada", 42, 3.14159
print(f"{name} has {n} items")
print(f"{name!r} {n * 2} {n // 5} {n % 5} {len(name)}")
print(f"[{n:5}] [{n:<5}] [{n:^5}] [{n:>5}] [{n:05}]")
print(f"[{name:>6}] [{name:<6}] [{name:^7}] [{name:*^9}]")
print(f"{n:x} {n:X} {n:o} {n:b} {255:#x} {-n:d} {n:+d}")
print(f"{pi:.2f} {pi:8.3f} {pi * 100:.0f}")
items = {"a": 1, "b": 2}
print(f"{items['a'] + items['b']} {[x * x for x in range(4)]} {'yes' if n > 40 else 'no'}")
width = 10
print(f"{'nested':>{width}}|")
print(f"{{literal}} {n}")
