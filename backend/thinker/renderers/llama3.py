r"""Llama 3 chat format, as the Tinker cookbook's Llama3Renderer writes it.

    <|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n<content><|eot_id|>
    <|start_header_id|>user<|end_header_id|>\n\n<content><|eot_id|>
    <|start_header_id|>assistant<|end_header_id|>\n\n<content><|eot_id|>

(without the line breaks). Like the cookbook, and unlike Meta's stock template, no "Cutting
Knowledge Date" preamble is added to the system message. Tool results use the "ipython" role,
wrapped as {"output": ...}.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from thinker.renderers.base import Message, TerminationReason
from thinker.renderers.turns import (
    RenderedTurn,
    TurnRenderer,
    encode,
    parse_until_token,
    single_token,
)

if TYPE_CHECKING:
    from thinker.renderers.turns import Tokenizer


class Llama3Renderer(TurnRenderer):
    name = "llama3"

    def __init__(self, tokenizer: Tokenizer) -> None:
        super().__init__(tokenizer)
        self._bos = single_token(tokenizer, "<|begin_of_text|>", self.name)
        self._eot = single_token(tokenizer, "<|eot_id|>", self.name)
        single_token(tokenizer, "<|start_header_id|>", self.name)
        single_token(tokenizer, "<|end_header_id|>", self.name)

    def bos_tokens(self) -> list[int]:
        return [self._bos]

    def _header(self, role: str) -> list[int]:
        return encode(self.tokenizer, f"<|start_header_id|>{role}<|end_header_id|>\n\n")

    def render_turn(self, messages: list[Message], idx: int) -> RenderedTurn:
        role, content = messages[idx]["role"], messages[idx]["content"]
        if role == "tool":
            role, content = "ipython", json.dumps({"output": content})
        return RenderedTurn(
            header=self._header(role), output=encode(self.tokenizer, content + "<|eot_id|>")
        )

    def generation_header(self, messages: list[Message]) -> list[int]:
        return self._header("assistant")

    def get_stop_sequences(self) -> list[int]:
        return [self._eot]

    def parse_response(self, tokens: list[int]) -> tuple[Message, TerminationReason]:
        return parse_until_token(self.tokenizer, tokens, [self._eot])
