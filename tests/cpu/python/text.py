# Text processing: word frequencies, a Caesar cipher, palindromes, run-length encoding, wrapping.
text = """It was the best of times, it was the worst of times, it was the age of wisdom,
it was the age of foolishness, it was the epoch of belief"""
words = [w.strip(",.").lower() for w in text.split()]
freq = {}
for w in words:
    freq[w] = freq.get(w, 0) + 1
top = sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
print(len(words), top)

def caesar(s, k):
    out = []
    for ch in s:
        if "a" <= ch <= "z":
            out.append(chr((ord(ch) - 97 + k) % 26 + 97))
        elif "A" <= ch <= "Z":
            out.append(chr((ord(ch) - 65 + k) % 26 + 65))
        else:
            out.append(ch)
    return "".join(out)

secret = caesar("Hello, World!", 3)
print(secret, caesar(secret, -3))
print([w for w in ["level", "hello", "racecar", "abba", "abc"] if list(w) == list(reversed(w))])

def rle(s):
    out, i = [], 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        out.append(f"{j - i}{s[i]}")
        i = j
    return "".join(out)

print(rle("aaabccddddde"), rle(""), rle("x"))
line, lines = "", []
for w in text.split():
    if len(line) + len(w) + 1 > 30:
        lines.append(line)
        line = w
    else:
        line = (line + " " + w).strip()
lines.append(line)
print("\n".join(f"|{l:<30}|" for l in lines))
