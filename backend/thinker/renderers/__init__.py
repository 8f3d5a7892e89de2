"""Renderers: chat messages to tokens and per-token weights, and sampled tokens back to messages.

    renderer = get_renderer(default_renderer_name(base_model, tokenizer), tokenizer)
    tokens, weights = renderer.build_supervised_example(messages, TrainOnWhat.ALL_MESSAGES)
    datum = datum_from_tokens_weights(tokens, weights, max_length=2048)

See base.py for the interface.
"""

from thinker.renderers.base import Message, Renderer, TerminationReason, TrainOnWhat
from thinker.renderers.datum import datum_from_tokens_weights
from thinker.renderers.registry import (
    RENDERER_NAMES,
    default_renderer_name,
    get_renderer,
    known_renderer,
    renderer_for,
)

__all__ = [
    "RENDERER_NAMES",
    "Message",
    "Renderer",
    "TerminationReason",
    "TrainOnWhat",
    "datum_from_tokens_weights",
    "default_renderer_name",
    "get_renderer",
    "known_renderer",
    "renderer_for",
]
