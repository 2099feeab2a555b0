# Dicts: get/setdefault/pop/update, membership, counting, nested dicts, comprehensions. (MicroPython's
# dicts do not keep insertion order as CPython's do: the script prints them in sorted order.)
d = {"one": 1, "two": 2}
d["three"] = 3
print(sorted(d.items()), len(d), d["two"], d.get("four"), d.get("four", 4), "one" in d)
d.update({"four": 4, "one": 11})
print(sorted(d.keys()), sorted(d.values()), sorted(d.items()))
print(d.pop("two"), sorted(d.items()), d.setdefault("five", 5), d.setdefault("one", 0))
counts = {}
for word in "the cat and the hat and the bat".split():
    counts[word] = counts.get(word, 0) + 1
for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
    print(k, v)
nested = {"a": {"x": 1}, "b": {"y": [1, 2, 3]}}
nested["a"]["z"] = 26
print(sorted(nested["a"].items()), nested["b"], nested["b"]["y"][-1], {"only": [1, {"k": None}]})
inverse = {v: k for k, v in {"p": 1, "q": 2}.items()}
print(inverse[1], inverse[2], dict(zip("abc", range(3)))["c"], dict([(1, "one"), (2, "two")])[2])
del d["three"]
print(sorted(d), {} == dict(), {1: 2} == {1: 2}, {1: 2, 3: 4} == {3: 4, 1: 2}, len({}))
total = sum(v for k, v in d.items() if k != "one")
print(total, max(d, key=d.get), min(d.values()), list({"single": 1}.items()))
