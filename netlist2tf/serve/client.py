"""Any OpenAI-compatible server as a trace model: the checkpoint served by llama.cpp (llama-cpp-python's
server), vLLM or SGLang, driven through ``POST /v1/completions`` behind the interface the trace hosts
call (``generate``), like the fast executor and ``LlamaTrace``.

The protocol is text, which every such server speaks: a trace token is its name (the checkpoint's
tokenizer: ``<reg:count[0:8]=0x01|p1>``), a prompt is the names separated by spaces (a WordLevel
tokenizer splits on them; llama.cpp's user-defined tokens match the names and drop the spaces), and a
completion's text is parsed back into names. Requests are greedy (``temperature`` 0, ``top_k`` 1, every
penalty off: llama-cpp-python's server applies a repeat penalty unless told not to) and stateless: each carries the row's whole trace, so a server that caches prompt prefixes recomputes only
the new tokens. A frame that ends at a token (gated protocols: a frame's length depends on its gate)
is asked for one token a request, so the server never generates past the frame's end (a recurrent
model's state cannot take tokens back); a fixed frame in one request.
"""

import json
import re
import urllib.error
import urllib.request

from netlist2tf.common import Netlist2TFError
from netlist2tf.serve.llama import EngineTrace

_NAME = re.compile(r"<[^<>\s]*>")


class ServerError(Netlist2TFError):
    """The server cannot be reached, refuses a request, or returns text that is not trace tokens."""


class ServerCache:
    """The rows' traces so far (token ids): what each request sends again."""

    def __init__(self, batch: int):
        self.rows = [[] for _ in range(batch)]


class ServerTrace(EngineTrace):
    """The trace hosts' model over an OpenAI-compatible server at ``url`` (e.g. http://127.0.0.1:8000)
    that serves the checkpoint whose token names are ``names`` (id -> name; the GGUF export's or the
    folder's own tokenizer). ``model``: the name the server knows it by (default: the first it lists)."""

    what = "a served model"

    def __init__(self, url: str, names: list, model: str | None = None, timeout: float = 600.0,
                 config_folder=None):
        self.url = url.rstrip("/")
        if not re.match(r"https?://", self.url):
            raise ServerError(f"--server {url}: give the server's address as http://HOST:PORT")
        self.names, self.timeout, self.config_folder = list(names), timeout, config_folder
        self.ids = {n: i for i, n in enumerate(self.names)}
        self.vocab_size = len(self.names)
        self.requests = 0
        self.model = model or self._first_model()

    def _call(self, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                text = r.read().decode()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:300]
            raise ServerError(f"the server at {self.url} refused {path} (HTTP {exc.code}): {detail}")
        except (urllib.error.URLError, OSError) as exc:
            raise ServerError(f"cannot reach a server at {self.url} ({getattr(exc, 'reason', exc)}); start one "
                              f"(docs/guide/serve-it.md) or check the address")
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise ServerError(f"the server at {self.url} answered {path} with something that is not JSON: "
                              f"{text[:200]!r}")

    def _first_model(self) -> str:
        models = self._call("/v1/models").get("data") or []
        if not models or "id" not in models[0]:
            raise ServerError(f"the server at {self.url} lists no model at /v1/models")
        return models[0]["id"]

    def new_cache(self, batch: int) -> ServerCache:
        return ServerCache(batch)

    def complete(self, ids: list, n: int) -> list:
        """The server's greedy continuation of ``ids`` by ``n`` tokens, as token ids."""
        prompt = " ".join(self.names[i] for i in ids)
        # greedy and nothing else: llama-cpp-python's server applies a repeat penalty of 1.1 unless told
        # (a trace repeats tokens all the time); the other names are vLLM's and OpenAI's
        body = {"model": self.model, "prompt": prompt, "max_tokens": n, "temperature": 0.0, "top_k": 1,
                "top_p": 1.0, "min_p": 0.0, "repeat_penalty": 1.0, "repetition_penalty": 1.0,
                "frequency_penalty": 0.0, "presence_penalty": 0.0, "seed": 0, "stream": False}
        self.requests += 1
        reply = self._call("/v1/completions", body)
        try:
            text = reply["choices"][0]["text"]
        except (KeyError, IndexError, TypeError):
            raise ServerError(f"the server at {self.url} answered /v1/completions without choices[0].text: "
                              f"{json.dumps(reply)[:200]}")
        found = _NAME.findall(text)
        rest = _NAME.sub("", text).strip()
        unknown = [t for t in found if t not in self.ids]
        counted = (reply.get("usage") or {}).get("completion_tokens")
        if isinstance(counted, int) and counted != len(found) and not rest:
            rest = f"{counted} tokens printed as {len(found)} names"
            found = []
        if rest or unknown or not found:
            what = (unknown[0] if unknown else rest or text)[:80]
            short = "" if found and not rest else (
                " (an empty or cut text: llama-cpp-python's server prints at most 32 bytes of a token, and this "
                "checkpoint's names are longer; serve it with llama.cpp's own llama-server)")
            raise ServerError(f"the server at {self.url} generated {what!r}, not a trace token of this checkpoint"
                              f"{short}: serve the checkpoint's own GGUF export (`netlist2tf export-gguf`) or "
                              f"folder, with greedy decoding")
        return [self.ids[t] for t in found[:n]]

    def generate(self, cache: ServerCache, row: int, feed, end_mask, max_new: int) -> list:
        """Feed ``feed`` to row ``row``, then generate greedily until a token whose ``end_mask`` entry
        is set or ``max_new`` tokens (each generated token joins the row's trace)."""
        trace = cache.rows[row]
        trace += list(feed)
        if not trace:
            raise ServerError("nothing to generate from: the row has been fed no token")
        out: list = []
        want = max(max_new, 1)
        while len(out) < want:
            step = 1 if end_mask is not None else want - len(out)
            for t in self.complete(trace, step):
                out.append(t)
                trace.append(t)
                if end_mask is not None and end_mask[t]:
                    return out
        return out

    def __call__(self, input_ids, cache=None, **kw):
        raise ServerError("a server returns generated tokens, not every position's logits: check a served model by "
                          "generation (drop --teacher-forced)")
