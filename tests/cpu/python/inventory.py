# A small program: an inventory with classes, a custom exception, dict bookkeeping and a report.
class OutOfStock(Exception):
    pass

class Item:
    def __init__(self, name, price, qty):
        self.name, self.price, self.qty = name, price, qty

    def value(self):
        return self.price * self.qty

class Inventory:
    def __init__(self):
        self.items = {}
        self.log = []

    def add(self, name, price, qty):
        if name in self.items:
            self.items[name].qty += qty
        else:
            self.items[name] = Item(name, price, qty)
        self.log.append(("add", name, qty))

    def take(self, name, qty):
        item = self.items.get(name)
        if item is None or item.qty < qty:
            raise OutOfStock(f"{name}: want {qty}, have {item.qty if item else 0}")
        item.qty -= qty
        self.log.append(("take", name, qty))

    def report(self):
        rows = sorted(self.items.values(), key=lambda i: -i.value())
        for it in rows:
            print(f"{it.name:<8}{it.qty:>4} x {it.price:>7.2f} = {it.value():>9.2f}")
        print(f"{'total':<8}{sum(i.qty for i in rows):>4}{'':13}{sum(i.value() for i in rows):>9.2f}")

inv = Inventory()
inv.add("bolt", 0.25, 400)
inv.add("nut", 0.1, 1000)
inv.add("gear", 12.5, 8)
inv.add("bolt", 0.25, 100)
for name, qty in [("gear", 3), ("nut", 2000), ("washer", 1), ("bolt", 50)]:
    try:
        inv.take(name, qty)
    except OutOfStock as e:
        print("refused:", e)
inv.report()
print(len(inv.log), inv.log[-1])
