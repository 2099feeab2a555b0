# Integer arithmetic: floor division and modulo with signs, powers, bit operations, divmod, abs.
for a in (7, -7, 123456, -98765):
    for b in (3, -3, 10):
        print(a, b, a + b, a - b, a * b, a // b, a % b, divmod(a, b))
print(2 ** 10, (-2) ** 7, 7 ** 0, abs(-42), -(-5))
print(0xFF & 0x0F, 0xF0 | 0x0F, 0xFF ^ 0xAA, ~5, 1 << 20, -1024 >> 3)
print(int("1234") + int("-34"), int("ff", 16), int("777", 8), int("1010", 2))
print(max(3, 9, 2), min(3, 9, 2), sum(range(101)), pow(3, 4), pow(3, 200, 1000007))
print(bool(0), bool(17), 10 == 10.0, 7 // 2 * 2 + 7 % 2)
