# Unbounded integers: factorials, powers, Fibonacci, division and modulo of big numbers.
def factorial(n):
    r = 1
    for i in range(2, n + 1):
        r *= i
    return r

print(factorial(30))
print(factorial(52))
print(2 ** 200)
print(-(3 ** 90))
a, b = 0, 1
for _ in range(250):
    a, b = b, a + b
print(a)
x = factorial(40)
y = 2 ** 64 + 13
print(x // y, x % y, -x // y, -x % y)
print(pow(7, 12345, 10 ** 20))
print(sum(int(d) for d in str(2 ** 500)))
print(hex(2 ** 100 - 1), (1 << 130) >> 65, (12345678901234567890 * 98765432109876543210))
print(int("123456789012345678901234567890") * 3, len(str(factorial(100))))
