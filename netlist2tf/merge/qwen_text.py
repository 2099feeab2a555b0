"""The embedded default base's text side: a byte-level tokenizer with Qwen3.5's special tokens and a
chat template that writes Qwen3.5's format (tools declared in the system prompt, tool calls as
``<tool_call><function=NAME><parameter=P>``, results in ``<tool_response>`` inside a user turn), so that a
chat over a merged checkpoint runs end to end without real weights (cpu/chat.py). A real Qwen3.5
checkpoint brings its own tokenizer and template; nothing here is used then.
"""

import json
from pathlib import Path

# Qwen3.5's added tokens that a chat uses (the published tokenizer has them, with these spellings).
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>",
           "</tool_response>", "<think>", "</think>")

# Qwen3.5's chat format, written for this tokenizer (the published template has more: vision content,
# reasoning content kept or dropped per turn). Tools as JSON lines in <tools>, the XML call format.
TEMPLATE = r"""{%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\n\n' }}{%- endif %}
{{- '# Tools\n\nYou have access to the following functions:\n\n<tools>' }}
{%- for tool in tools %}{{- '\n' }}{{- tool | tojson }}{%- endfor %}
{{- '\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n</function>\n</tool_call><|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' %}
{{- '<|im_start|>user\n' + message.content + '<|im_end|>\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant\n' + (message.content or '') }}
{%- for call in message.tool_calls or [] %}
{%- set call = call.function if call.function is defined else call %}
{{- ('\n\n' if loop.first and (message.content or '') | trim else ('' if loop.first else '\n')) + '<tool_call>\n<function=' + call.name + '>\n' }}
{%- for name, value in call.arguments | items %}{{- '<parameter=' + name + '>\n' + (value if value is string else value | tojson) + '\n</parameter>\n' }}{%- endfor %}
{{- '</function>\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or loop.previtem.role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
{%- if loop.last or loop.nextitem.role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n<think>\n\n</think>\n\n' }}{%- endif %}"""


def write_text_tokenizer(folder: Path, vocab_size: int) -> None:
    """tokenizer.json (byte-level BPE over the 256 bytes, no merges: any UTF-8 text encodes; then
    SPECIAL; the ids up to ``vocab_size`` as unused special tokens, so that the tokenizer has exactly
    the model's vocabulary), tokenizer_config.json and chat_template.jinja with TEMPLATE."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    byte_chars = sorted(alphabet, key=lambda c: _byte_of(c))
    vocab = {c: i for i, c in enumerate(byte_chars)}
    tok = Tokenizer(models.BPE(vocab, [], fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    names = list(SPECIAL) + [f"<|unused_{i}|>" for i in range(vocab_size - 256 - len(SPECIAL))]
    tok.add_special_tokens([AddedToken(n, special=True, normalized=False) for n in names])
    (folder / "tokenizer.json").write_text(json.dumps(json.loads(tok.to_str()), indent=2) + "\n")
    decoder = {str(tok.token_to_id(n)): {"content": n, "lstrip": False, "normalized": False, "rstrip": False,
                                          "single_word": False, "special": True} for n in names}
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
         "added_tokens_decoder": decoder, "chat_template": TEMPLATE, "model_max_length": 262144,
         "clean_up_tokenization_spaces": False}, indent=2, sort_keys=True) + "\n")
    (folder / "chat_template.jinja").write_text(TEMPLATE + "\n")


def _byte_of(char: str) -> int:
    """The byte GPT-2's byte-level alphabet maps to ``char``."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    code = ord(char)
    if code in printable:
        return code
    others = [b for b in range(256) if b not in printable]
    return others[code - 256]
