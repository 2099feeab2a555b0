# Strings: slicing, methods, membership, repetition, comparison, ord/chr, escapes.
s = "Hello, World"
print(s[0], s[-1], s[2:5], s[-5:], s[:-7], "".join(reversed(s)), len(s))
print(s.upper(), s.lower(), s.replace("l", "L"), s.find("World"), s.find("x"), s.count("l"))
print(s.split(", "), "a-b-c".split("-"), "  pad  ".strip(), "xxhixx".strip("x"), " a b  c ".split())
print("-".join(["x", "y", "z"]), "ab" * 3, "abc" < "abd", "Z" < "a", "ell" in s)
print(s.startswith("Hell"), s.endswith("d"), "42".isdigit(), "abc".isalpha(), " ".isspace())
print(ord("A"), chr(97), [ord(c) for c in "xyz"], "".join(chr(c) for c in range(65, 70)))
print(repr("it's"), repr('say "hi"'), "tab\there", "line1\nline2")
print("a,b,,c".split(","), "key=value".partition("="), "Capitalize me".upper().lower())
print(str(12) + str(3.5) + str(True) + str(None), "%s is %d years" % ("Ann", 30))
print("{} and {}".format("A", "B"), "{1}{0}".format("x", "y"), "{name}!".format(name="hey"))
print("center".center(12) + "|", "{:*^12}".format("mid"), "{:<8}|{:>8}".format("left", "right"), "%03d" % 7)
