"""Frontend: a design name -> Amaranth elaboration -> RTLIL -> Yosys -> JSON netlist (cached).

A DESIGN is named one of these ways:

* ``package.module:Class`` or ``package.module:Class(width=16)`` (an importable module),
* ``path/to/file.py:Class`` (a file; its folder is put on ``sys.path`` while it is imported),
* ``path/to/file.il`` / ``file.v`` / ``file.sv`` (RTLIL or Verilog read by Yosys directly;
  ``file.v:name`` picks the top module, else the file's only/top module is used).

The class must build, with the literal arguments given (none by default), an Amaranth
``Elaboratable`` with a single clock domain; a ``wiring.Component`` gives its ports by its signature,
a plain ``Elaboratable`` must have a ``ports()`` method (or ``ports`` list) naming its port signals.

The JSON output is cached under ``BUILD/synth/`` by a hash of what Yosys reads: the RTLIL text
(which carries a ``src`` attribute for every statement, so it changes exactly when a source file that
contributes to this design changes), the Yosys version and the flow's command list. Elaboration (cheap)
runs every time; Yosys (the slow step) only on a cache miss. Editing one design's file therefore
re-synthesises that design and nothing else.
"""

import ast
import hashlib
import importlib
import importlib.util
import json
import os
import re
import sys
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

from netlist2tf.common import DesignElaborationError, DesignNotFoundError
from netlist2tf.frontend.yosys import flow_script, premap_script, run_yosys, yosys_version

#: Bumped when the cache layout or the meaning of a cached file changes (2: the compile flows'
#: memories of several write ports or per-bit enables split, ``multiport.py``; 3: their chained
#: multiply-adds fused, ``maccfuse.py``).
CACHE_FORMAT = 3
#: The flows whose netlist the compiler takes: their memories are rewritten to one whole-word write
#: port each (``multiport.split_write_ports``) and their chained multiply-adds fused into one cell
#: (``maccfuse.fuse_maccs``) before the netlist is cached.
COMPILE_FLOWS = ("lut", "macro", "macro6")
_HDL_SUFFIXES = {".il": "read_rtlil", ".v": "read_verilog", ".sv": "read_verilog -sv"}


@dataclass(frozen=True, slots=True)
class SynthResult:
    """What ``synthesize`` produced: the Yosys JSON text and where it is cached."""
    design: str            # the DESIGN string as given
    flow: str              # "word", "gate" or "lut"
    json_text: str
    json_path: Path
    cache_hit: bool        # True when Yosys was not run
    sources: tuple[str, ...]  # source files named by the design's src attributes, sorted
    # how to get the gate netlist before abc (compile flows): (cache path, read commands, inputs,
    # commands, display names); ``premap_text`` runs it once and caches it beside the netlist
    premap_job: tuple | None = None

    def premap_text(self) -> str | None:
        """The compile flow's gate-level netlist just before abc maps it to LUTs (``yosys.premap_script``),
        from the cache or by a second Yosys run (seconds to half a minute; only the layer report
        asks for it); None for a flow without abc."""
        if self.premap_job is None:
            return None
        path, read_cmds, inputs, commands, shown = self.premap_job
        cached = _read_cache_entry(path) if path.is_file() else None
        if cached is not None:
            return cached
        text = run_yosys(read_cmds, inputs, commands, display_names=shown)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)
        return text


def _parse_class_ref(ref: str, design: str):
    """``Class`` or ``Class(1, width=8)`` -> (name, args, kwargs); only literal arguments."""
    try:
        node = ast.parse(ref, mode="eval").body
    except SyntaxError:
        raise DesignNotFoundError(f"cannot read the class part {ref!r} of design {design!r}; "
                                  f"write it as Class or Class(arg=literal, ...)")
    if isinstance(node, ast.Name):
        return node.id, (), {}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        try:
            args = tuple(ast.literal_eval(a) for a in node.args)
            kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        except ValueError:
            raise DesignNotFoundError(f"the arguments in {ref!r} (design {design!r}) must be Python "
                                      f"literals (numbers, strings, tuples, lists)")
        return node.func.id, args, kwargs
    raise DesignNotFoundError(f"cannot read the class part {ref!r} of design {design!r}; "
                              f"write it as Class or Class(arg=literal, ...)")


def _import_module(mod_ref: str, design: str):
    if mod_ref.endswith(".py") or os.sep in mod_ref or "/" in mod_ref:
        path = Path(mod_ref).resolve()
        if not path.is_file():
            what = "is not a regular file" if path.exists() else "does not exist"
            raise DesignNotFoundError(f"design file {mod_ref} {what} (design {design!r}); "
                                      f"give an existing .py file or an importable module path")
        digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
        name = f"_netlist2tf_design_{path.stem}_{digest}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.parent))
        try:
            sys.modules[name] = module
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise DesignElaborationError(_describe_exception(f"importing {path}", exc)) from exc
        finally:
            sys.path.remove(str(path.parent))
        return module
    try:
        return importlib.import_module(mod_ref)
    except ModuleNotFoundError as exc:
        if exc.name and (mod_ref == exc.name or mod_ref.startswith(exc.name + ".")):
            raise DesignNotFoundError(
                f"no module named {mod_ref!r} (design {design!r}); check the spelling, run from the "
                f"project root, or give a file path like path/to/file.py:Class") from exc
        raise DesignElaborationError(_describe_exception(f"importing {mod_ref}", exc)) from exc
    except Exception as exc:
        raise DesignElaborationError(_describe_exception(f"importing {mod_ref}", exc)) from exc


def _describe_exception(what: str, exc: BaseException) -> str:
    """One message naming the exception and the innermost frame outside the libraries."""
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if "site-packages" not in f.filename and "netlist2tf" not in f.filename]
    where = f" at {user[-1].filename}:{user[-1].lineno}" if user else ""
    detail = str(exc)
    if not detail and frames:        # a bare assert inside a library: say which one
        inner = frames[-1]
        lib = inner.filename.split("site-packages/")[-1]
        detail = f"`{inner.line}` failed in {lib}:{inner.lineno}"
        if "amaranth" in lib and "1 << 16" in (inner.line or ""):
            detail += " (Amaranth's netlist holds at most 65,536 bits in one value: split the wider signal)"
    return f"{what} raised {type(exc).__name__}: {detail}{where}"


def load_design(design: str):
    """Import and construct the Amaranth design named by ``design`` (``module:Class`` form).

    Returns the constructed object. Raises DesignNotFoundError (no such module/file/class) or
    DesignElaborationError (import or constructor raised, or the object is not elaboratable).
    """
    from amaranth.hdl import Elaboratable

    if ":" not in design:
        raise DesignNotFoundError(
            f"design {design!r} has no class part; write module.path:Class, path/to/file.py:Class, "
            f"or give an .il/.v file")
    mod_ref, cls_ref = design.rsplit(":", 1)
    cls_name, args, kwargs = _parse_class_ref(cls_ref, design)
    module = _import_module(mod_ref, design)
    if not hasattr(module, cls_name):
        public = sorted(n for n, v in vars(module).items() if isinstance(v, type) and not n.startswith("_"))
        raise DesignNotFoundError(f"{mod_ref} has no class {cls_name!r} (design {design!r}); "
                                  f"classes there: {', '.join(public) or 'none'}")
    cls = getattr(module, cls_name)
    try:
        obj = cls(*args, **kwargs)
    except Exception as exc:
        hint = ""
        if isinstance(exc, TypeError) and "argument" in str(exc):
            hint = f"; give constructor arguments in the design name, e.g. {mod_ref}:{cls_name}(width=8)"
        raise DesignElaborationError(
            _describe_exception(f"constructing {cls_ref} (design {design!r})", exc) + hint) from exc
    if not isinstance(obj, Elaboratable):
        raise DesignElaborationError(
            f"{cls_ref} (design {design!r}) built a {type(obj).__name__}, which is not an Amaranth "
            f"Elaboratable; the design class must subclass amaranth.lib.wiring.Component or "
            f"amaranth.hdl.Elaboratable")
    return obj


def design_ports(obj, design: str):
    """The port signals of a constructed design, as rtlil.convert wants them (None for Components).

    A port of a ``ShapeCastable`` shape (an enum, a ``lib.data`` struct/union/array) is a view;
    rtlil.convert takes only signals, so it is given the view's underlying signal (its raw bits).
    """
    from amaranth.hdl import Value, ValueCastable
    from amaranth.lib import wiring

    if isinstance(obj, wiring.Component):
        return None
    ports = getattr(obj, "ports", None)
    if callable(ports):
        ports = ports()
    if not ports:
        raise DesignElaborationError(
            f"design {design!r} is a plain Elaboratable without ports; make it a "
            f"amaranth.lib.wiring.Component, or give it a ports() method returning its port signals")
    return [Value.cast(p) if isinstance(p, ValueCastable) else p for p in ports]


def to_rtlil(obj, design: str) -> str:
    """Elaborate ``obj`` and convert it to RTLIL text (top module named ``top``).

    Raises DesignElaborationError with the innermost user frame if elaboration raises.
    """
    from amaranth.back import rtlil

    ports = design_ports(obj, design)
    with warnings.catch_warnings():
        # Amaranth warns about elaboratables that were created but never elaborated; those are the
        # user's business and would only clutter every run.
        warnings.simplefilter("ignore")
        try:
            return rtlil.convert(obj, name="top", ports=ports)
        except Exception as exc:
            raise DesignElaborationError(_describe_exception(f"elaborating {design}", exc)) from exc


def design_source(design: str) -> tuple[list[str], dict[str, str], str | None, dict[str, str]]:
    """Yosys read commands, input files, top-module name and the files' display names.

    Amaranth designs are elaborated here; .il/.v/.sv files are read as they are.
    """
    path_part, _, top = design.partition(":")
    suffix = Path(path_part).suffix
    if suffix in _HDL_SUFFIXES:
        path = Path(path_part)
        if not path.is_file():
            what = "is not a regular file (a folder, a device or a pipe)" if path.exists() else "does not exist"
            raise DesignNotFoundError(f"design file {path} {what}; give an existing "
                                      f"{'/'.join(_HDL_SUFFIXES)} file or a module:Class design")
        name = "design" + suffix
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DesignNotFoundError(f"design file {path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                                      f"offset {exc.start}); save it as UTF-8 or ASCII") from None
        except OSError as exc:
            raise DesignNotFoundError(f"cannot read design file {path}: {exc.strerror or exc}") from None
        return [f"{_HDL_SUFFIXES[suffix]} {name}"], {name: text}, top or None, {name: str(path)}
    obj = load_design(design)
    return (["read_rtlil design.il"], {"design.il": to_rtlil(obj, design)}, "top",
            {"design.il": f"{design} (as RTLIL)"})


def _src_files(text: str) -> tuple[str, ...]:
    files = set()
    for m in re.finditer(r'src"?\s*[:=]?\s*"([^"]+)"', text):
        for loc in m.group(1).split("|"):
            file = re.sub(r"(:\d+(\.\d+)?(-\d+(\.\d+)?)?)$", "", loc)
            if file:
                files.add(file)
    return tuple(sorted(files))


def synthesize(design: str, flow: str = "word", build_dir: str | os.PathLike | None = None,
               use_cache: bool = True) -> SynthResult:
    """Synthesize ``design`` with the named Yosys flow; return the JSON netlist (cached).

    Raises DesignNotFoundError, DesignElaborationError or YosysError.
    """
    read_cmds, inputs, top, shown = design_source(design)
    script = flow_script(flow, top)
    version = yosys_version()
    key_material = json.dumps({"format": CACHE_FORMAT, "yosys": version, "read": read_cmds,
                               "inputs": inputs, "script": script}, sort_keys=True)
    key = hashlib.sha256(key_material.encode()).hexdigest()[:24]
    from netlist2tf.common import build_dir as default_build_dir
    cache_dir = default_build_dir(build_dir) / "synth"
    json_path = cache_dir / f"{key}.json"
    sources = _src_files("\n".join(inputs.values()))
    pre = premap_script(script) if flow in COMPILE_FLOWS else None
    job = (cache_dir / f"{key}.premap.json", read_cmds, inputs, pre, shown) if pre is not None else None
    if use_cache and json_path.is_file():
        cached = _read_cache_entry(json_path)
        if cached is not None:
            _check_simulation_only(cached, shown)
            return SynthResult(design, flow, cached, json_path, True, sources, job)
        print(f"netlist2tf: the cached netlist {json_path} is damaged (not a readable Yosys JSON file); "
              f"discarded, running Yosys again", file=sys.stderr)
        json_path.unlink(missing_ok=True)
    text = run_yosys(read_cmds, inputs, script, display_names=shown)
    if flow in COMPILE_FLOWS:
        from netlist2tf.frontend.maccfuse import fuse_maccs
        from netlist2tf.frontend.multiport import split_write_ports
        text = fuse_maccs(split_write_ports(text))
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Write-then-rename: an interrupted run never leaves a half-written cache entry behind.
    tmp = json_path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, json_path)
    meta = {"design": design, "flow": flow, "yosys": version, "script": list(script),
            "sources": {f: _file_digest(f) for f in sources}}
    meta_path = cache_dir / f"{key}.meta.json"
    tmp = meta_path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, meta_path)
    _check_simulation_only(text, shown)
    return SynthResult(design, flow, text, json_path, False, sources, job)


def _check_simulation_only(text: str, shown: dict[str, str]) -> None:
    """Raise one line naming the user's file and line if the netlist has $display/Print/Assert
    cells (``validate.check_simulation_only``); cheap when it has none."""
    if '"$print"' in text or '"$check"' in text or re.search(r'"\$(assert|assume|cover|live|fair)"', text):
        from netlist2tf.netlist import check_simulation_only
        check_simulation_only(text, shown)


def _read_cache_entry(path: Path) -> str | None:
    """The text of a cached netlist, or None if it is not a JSON object with modules (a torn or
    edited cache entry: it is then discarded and rebuilt)."""
    try:
        text = path.read_text(encoding="utf-8")
        doc = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return text if isinstance(doc, dict) and isinstance(doc.get("modules"), dict) and doc["modules"] else None


def _file_digest(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None
