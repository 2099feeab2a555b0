# Classes: constructors, methods, inheritance, super(), class attributes, __str__/__repr__, isinstance.
class Animal:
    count = 0

    def __init__(self, name):
        self.name = name
        Animal.count += 1

    def speak(self):
        return "..."

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r})"

class Dog(Animal):
    def speak(self):
        return "Woof"

class Puppy(Dog):
    def __init__(self, name, age):
        super().__init__(name)
        self.age = age

    def speak(self):
        return super().speak() + "!" * self.age

    def __str__(self):
        return f"{self.name}, {self.age} months"

pets = [Animal("generic"), Dog("Rex"), Puppy("Bit", 3)]
for p in pets:
    print(repr(p), p.speak())
print(str(pets[2]), Animal.count, isinstance(pets[2], Dog), isinstance(pets[1], Puppy), issubclass(Puppy, Animal))

class Counter:
    def __init__(self):
        self._n = 0

    @property
    def n(self):
        return self._n

    def inc(self, by=1):
        self._n += by
        return self

    @staticmethod
    def describe():
        return "counts"

    @classmethod
    def starting_at(cls, n):
        c = cls()
        c._n = n
        return c

c = Counter().inc().inc(5)
print(c.n, Counter.describe(), Counter.starting_at(10).inc().n, hasattr(c, "n"), getattr(c, "missing", "default"))
