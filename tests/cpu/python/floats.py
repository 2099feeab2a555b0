# Floats: arithmetic, repr of common values, conversions, rounding, comparisons.
print(0.1 + 0.2, 1 / 3, 2 / 3, 10 / 4, 7.0 // 2, 7.5 % 2, -7.5 % 2)
print(1e22, 1e-5, 123.456, 2.5e-10, 1.5e300 * 10, -0.0, 3.0)
print(float("1.25"), float("-3e4"), float(7), int(3.99), int(-3.99))
print(round(2.5), round(3.5), round(-2.5), round(3.14159, 2), round(1234.5678, -2))
print(2 ** 0.5, 10 ** -2, 1.1 * 3, 100 * 1.1, 0.1 * 3)
print(abs(-2.25), max(1.5, 2), min(-0.5, 0), sum([0.1] * 10))
print(3 * 1.5 == 4.5, 0.1 + 0.2 == 0.3, 1.0 < 2, float("inf") > 1e308, 1e308 * 10)
x = 0.0
for i in range(1, 21):
    x += 1 / i
print(x, x * 1000, x / 1000)
print(7 / 2, -7 / 2, 1 / 8, 5e-324 > 0, 1.7976931348623157e308)
