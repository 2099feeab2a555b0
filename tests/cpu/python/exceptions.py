# Exceptions: try/except/else/finally, custom hierarchies, re-raising, arguments, nested handlers.
class AppError(Exception):
    pass

class NotFound(AppError):
    def __init__(self, key):
        super().__init__(key)
        self.key = key

def lookup(d, key):
    if key not in d:
        raise NotFound(key)
    return d[key]

data = {"a": 1}
for key in ("a", "b"):
    try:
        value = lookup(data, key)
    except NotFound as e:
        print("not found:", e.key, type(e).__name__, isinstance(e, AppError))
    else:
        print("found", value)
    finally:
        print("done", key)

def risky(n):
    try:
        return 10 // n
    except ZeroDivisionError:
        return "div0"
    finally:
        print("finally", n)

print(risky(2), risky(0))
log = []
try:
    try:
        [][1]
    except IndexError:
        log.append("inner")
        raise
except Exception as e:
    log.append(type(e).__name__)
print(log)
try:
    int("x")
except (TypeError, ValueError) as e:
    print("caught", type(e).__name__)
try:
    raise AppError("code", 7)
except AppError as e:
    print(e.args)
total = 0
for v in [1, "2", None, 4]:
    try:
        total += v
    except TypeError:
        total += 100
print(total)
