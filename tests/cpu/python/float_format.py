# Formatting floats: fixed, exponent and general formats, widths, str.format and the % operator.
# (MicroPython rounds a decimal tie such as 2.25 -> "2.3" up, CPython to even: no ties here.)
values = [3.14159265, -2.5, 1234567.891, 0.000123456, 100.0, 1e10]
for v in values:
    print("%.3f" % v, "%.2e" % v, "%g" % v, "{:.1f}".format(v), "{:12.4f}".format(v), f"{v:+.2f}")
print("%5.1f|%-8.3f|%08.2f" % (2.26, 1.5, -3.75))
print("{:.0f} {:.0f} {:.0f}".format(0.4, 1.6, 2.7))
print(f"{1/3:.10f} {2/3:.5g} {12345.6789:.3e}")
print(str(1.0), str(1.5e-7), repr(2.0 ** 60), str(123456789.0))
