"""Renderers: chat messages to tokens and per-token weights (see base.py for the interface).

The concrete renderers are being written; this module will export get_renderer.
"""

from thinker.renderers.base import Message, Renderer, TerminationReason, TrainOnWhat

__all__ = ["Message", "Renderer", "TerminationReason", "TrainOnWhat"]
