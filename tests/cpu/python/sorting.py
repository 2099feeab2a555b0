# Sorting: sorted and list.sort, keys, reverse, tuples, strings, a hand-written merge sort. (MicroPython's
# sort is not stable as CPython's is: every key here orders the items completely.)
people = [("bob", 25), ("alice", 30), ("carol", 25), ("dave", 20)]
print(sorted(people), sorted(people, key=lambda p: (p[1], p[0])))
print(sorted(people, key=lambda p: (-p[1], p[0])), sorted(people, key=lambda p: (p[1], p[0]), reverse=True))
words = ["banana", "Apple", "cherry", "apple", "Banana"]
print(sorted(words), sorted(words, key=lambda w: (w.lower(), w)), sorted(words, key=lambda w: (len(w), w)))
nums = [5, -3, 8, 0, -1, 7, 2]
nums.sort()
print(nums)
nums.sort(key=abs, reverse=True)
print(nums, sorted("hello world"), sorted([3.5, 1, 2.25]))

def merge_sort(a):
    if len(a) <= 1:
        return a
    mid = len(a) // 2
    left, right = merge_sort(a[:mid]), merge_sort(a[mid:])
    out, i, j = [], 0, 0
    while i < len(left) and j < len(right):
        if left[i] <= right[j]:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return out + left[i:] + right[j:]

seq = [(i * 7919) % 101 for i in range(40)]
print(merge_sort(seq) == sorted(seq), merge_sort(seq)[:10], min(seq), max(seq))
