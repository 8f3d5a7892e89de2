"""Renderers by name, and the default one for a model."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from thinker.errors import ConfigError
from thinker.renderers.base import Renderer
from thinker.renderers.chat_template import ChatTemplateRenderer, has_chat_template
from thinker.renderers.llama3 import Llama3Renderer
from thinker.renderers.qwen3 import (
    Qwen3DisableThinkingRenderer,
    Qwen3InstructRenderer,
    Qwen3Renderer,
)
from thinker.renderers.role_colon import RoleColonRenderer

if TYPE_CHECKING:
    from thinker.renderers.turns import Tokenizer

_FACTORIES: dict[str, Callable[[Tokenizer], Renderer]] = {
    "role_colon": RoleColonRenderer,
    "llama3": Llama3Renderer,
    "qwen3": Qwen3Renderer,
    "qwen3_disable_thinking": Qwen3DisableThinkingRenderer,
    "qwen3_instruct": Qwen3InstructRenderer,
    "chat_template": ChatTemplateRenderer,
}
RENDERER_NAMES: tuple[str, ...] = tuple(_FACTORIES)


def known_renderer(name: str | None) -> str | None:
    """`name` if it is a renderer (or None: the model's default); a config field's validator.

    Raises:
        ValueError: an unknown name, with the names there are.
    """
    if name is not None and name not in RENDERER_NAMES:
        raise ValueError(f"unknown renderer {name!r}; expected one of {', '.join(RENDERER_NAMES)}")
    return name


def get_renderer(name: str, tokenizer: Tokenizer) -> Renderer:
    """The renderer called `name` over `tokenizer`.

    Raises:
        ConfigError: `name` is unknown, or the tokenizer lacks what the format needs.
    """
    factory = _FACTORIES.get(name)
    if factory is None:
        raise ConfigError(
            f"unknown renderer {name!r}; valid renderers: {', '.join(RENDERER_NAMES)}"
        )
    return factory(tokenizer)


def default_renderer_name(base_model: str, tokenizer: Tokenizer) -> str:
    """The renderer that matches `base_model`'s chat format.

    Base models (no chat template, or a "-Base" name, as in the cookbook) get role_colon;
    Qwen3 (not Qwen3.5, whose format differs) gets qwen3, or qwen3_instruct for the 2507
    instruct models; Llama 3 gets llama3; any other model with a template gets chat_template.
    """
    name = base_model.lower()
    if name == "thinker/tiny" or not has_chat_template(tokenizer) or name.endswith("-base"):
        return "role_colon"
    if re.search(r"qwen3(?![.\d])", name):
        return "qwen3_instruct" if "instruct" in name else "qwen3"
    if "llama-3" in name or "llama3" in name:
        return "llama3"
    return "chat_template"


def renderer_for(name: str | None, base_model: str, tokenizer: Tokenizer) -> Renderer:
    """The renderer a config names, or `base_model`'s default one when it names none."""
    return get_renderer(name or default_renderer_name(base_model, tokenizer), tokenizer)
