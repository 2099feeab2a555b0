# sys.exit with a status: the output before it, then the process exits with that status.
import sys
total = sum(range(10))
print("total", total)
if total == 45:
    sys.exit(3)
print("not reached")
