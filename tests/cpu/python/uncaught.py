# An uncaught exception: the output before it, then a traceback and exit status 1.
def check(values):
    for v in values:
        print("checking", v)
        if v < 0:
            raise ValueError("negative value: " + str(v))
    return True

print(check([1, 2]))
check([3, -4, 5])
print("not reached")
