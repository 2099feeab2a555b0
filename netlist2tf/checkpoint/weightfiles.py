"""A checkpoint folder's safetensors weights in the layouts Hugging Face writes.

Reading (``WeightFiles``): one ``model.safetensors``, or shards named by
``model.safetensors.index.json``; ``text_name`` maps a key of the published multimodal ``qwen3_5``
layout (text weights under ``model.language_model.``, the vision tower under ``model.visual.``, the
MTP head under ``mtp.``) to the text model's name (``model.layers...``, ``lm_head.weight``), or None
for a weight that is not part of the text model.

Writing (``write_shards``): one file, or shards of at most ``shard_bytes`` each with an index in
``save_pretrained``'s format (``model-00001-of-00003.safetensors``; ``{"metadata": {"total_size"},
"weight_map"}``). Keys are written in sorted order, so the same tensors give byte-identical files.
"""

import json
from pathlib import Path

from netlist2tf.common import Netlist2TFError

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"
TEXT_PREFIX = "model.language_model."      # the multimodal layout's text weights


def text_name(key: str, multimodal: bool) -> str | None:
    """The text model's name of checkpoint key ``key`` (``Qwen3_5ForCausalLM``'s: ``model.*`` and
    ``lm_head.weight``), or None where ``key`` is not a text weight (vision tower, MTP head)."""
    if key == "lm_head.weight":
        return key
    if multimodal:
        return "model." + key[len(TEXT_PREFIX):] if key.startswith(TEXT_PREFIX) else None
    return key if key.startswith("model.") else None


def checkpoint_name(name: str, multimodal: bool) -> str:
    """The inverse of ``text_name``: where text weight ``name`` is stored in that layout."""
    if multimodal and name.startswith("model."):
        return TEXT_PREFIX + name[len("model."):]
    return name


class WeightFiles:
    """Every tensor of a checkpoint folder, read lazily. ``error``: the exception class raised for a
    folder without weights or with an unreadable file (Netlist2TFError; the fast executor passes its
    FastUnsupported); ``role`` names the folder in its messages."""

    def __init__(self, folder, role: str = "checkpoint", error=Netlist2TFError):
        from safetensors import safe_open

        self.folder = folder = Path(folder)
        index = folder / INDEX
        if index.is_file():
            try:
                files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            except (json.JSONDecodeError, KeyError, AttributeError, TypeError) as exc:
                raise error(f"{role} {index} is malformed ({exc}); it must hold a weight_map")
            self.files = [INDEX] + files
        elif (folder / SINGLE).is_file():
            files = [SINGLE]
            self.files = files
        else:
            raise error(f"{role} {folder} has no {SINGLE} (nor {INDEX} and its shards)")
        self.where = {}
        for name in files:
            try:
                handle = safe_open(str(folder / name), "pt")
            except Exception as exc:            # safetensors raises its own error types
                raise error(f"{role} {folder / name} is not a readable safetensors file: {exc}")
            for key in handle.keys():
                self.where[key] = handle

    def keys(self):
        return self.where.keys()

    def __contains__(self, key) -> bool:
        return key in self.where

    def get(self, key: str):
        return self.where[key].get_tensor(key)

    def shape(self, key: str) -> tuple:
        return tuple(self.where[key].get_slice(key).get_shape())

    def file_bytes(self) -> int:
        """The size of the largest weight file (the shard size a copy of this layout should keep)."""
        return max((self.folder / f).stat().st_size for f in self.files if f != INDEX)


def write_shards(folder, tensors: dict, shard_bytes: int | None = None) -> list[str]:
    """Write ``tensors`` ({name: tensor}) into ``folder``: one ``model.safetensors`` when
    ``shard_bytes`` is None, else shards of at most ``shard_bytes`` bytes of tensor data (a tensor
    larger than that gets a shard of its own) and the index. Returns the file names written."""
    from safetensors.torch import save_file

    folder = Path(folder)
    names = sorted(tensors)
    if shard_bytes is None:
        save_file({k: tensors[k].contiguous() for k in names}, str(folder / SINGLE), metadata={"format": "pt"})
        return [SINGLE]
    groups, size = [[]], 0
    for k in names:
        n = tensors[k].numel() * tensors[k].element_size()
        if groups[-1] and size + n > shard_bytes:
            groups.append([])
            size = 0
        groups[-1].append(k)
        size += n
    written, weight_map = [INDEX], {}
    for i, group in enumerate(groups):
        fname = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        save_file({k: tensors[k].contiguous() for k in group}, str(folder / fname), metadata={"format": "pt"})
        written.append(fname)
        weight_map.update({k: fname for k in group})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    (folder / INDEX).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map},
                                           indent=2, sort_keys=True) + "\n")
    return written
