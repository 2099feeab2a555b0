"""A stage package's public face, loaded on first use.

Each stage package's ``__init__`` names what other stages may use, module by module::

    __getattr__, __dir__, __all__ = public(__name__, {"plan": ("plan_model", "CompileSettings")})

and ``from netlist2tf.compile import plan_model`` imports ``netlist2tf.compile.plan`` when the name is
first asked for, not before: a command imports only the modules it uses (``cpu run --engine unicorn``
never loads torch), and the planner stays importable where torch is missing. Everything else in the
package is private to it."""

import importlib


def public(package: str, faces: dict) -> tuple:
    """(``__getattr__``, ``__dir__``, ``__all__``) for the package ``package`` whose public names are
    ``faces`` ({module: (name, ...)}; PEP 562)."""
    where = {name: module for module, names in faces.items() for name in names}
    names = sorted(where)

    def __getattr__(name):
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__():
        return names

    return __getattr__, __dir__, names
