"""Model families (who made a model), so that a reviewer or a second opinion can come from
another family than the model it checks."""

from __future__ import annotations

_FAMILIES = (
    ("offline", ("offline/",)),
    ("openai", ("gpt-", "openai/", "o1", "o3", "o4", "chatgpt", "azure/")),
    ("anthropic", ("claude", "anthropic/", "bedrock/anthropic")),
    ("google", ("gemini", "vertex_ai/", "google/")),
    ("mistral", ("mistral", "codestral")),
    ("meta", ("llama", "meta-llama", "groq/llama")),
    ("deepseek", ("deepseek",)),
)


def model_family(model: str) -> str:
    """The family a model name belongs to (its maker), for the same-family warning."""
    name = (model or "").strip().lower()
    for family, prefixes in _FAMILIES:
        if any(name.startswith(p) or f"/{p}" in name for p in prefixes):
            return family
    return name.split("/", 1)[0] if "/" in name else name


def same_family(a: str, b: str) -> bool:
    return bool(a and b) and model_family(a) == model_family(b)


