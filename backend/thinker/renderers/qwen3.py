r"""Qwen3's ChatML format with its thinking convention, as in Qwen3's own chat template.

    <|im_start|>system\n<content><|im_end|>\n<|im_start|>user\n<content><|im_end|>\n
    <|im_start|>assistant\n<think>\n<reasoning>\n</think>\n\n<answer><|im_end|>

The "\n" after each <|im_end|> belongs to the next message's header (weight 0), as in the Tinker
cookbook, so a supervised example ends with <|im_end|>, the stop token.

Thinking (the rules of Qwen3's template, which the cookbook's Qwen3Renderer reproduces):
- An assistant message after the last user message is "framed" when it is the last message or
  has reasoning: "<think>\n" + reasoning + "\n</think>\n\n" + answer, with an empty block when
  it did not reason. Reasoning is what precedes "</think>" in the content.
- Earlier assistant messages lose their reasoning: only the text after "</think>" is kept.
- qwen3 opens the reply with "<|im_start|>assistant\n" and lets the model think.
  qwen3_disable_thinking (enable_thinking=False) puts the empty block in the prompt, so on a
  trained turn without reasoning that block is header (weight 0): the model never samples it.
- qwen3_instruct (the 2507 instruct models, which never think) renders plain ChatML.
"""

from __future__ import annotations

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

EMPTY_THINKING = "<think>\n\n</think>\n\n"


def split_thinking(content: str) -> tuple[str, str]:
    """(reasoning, answer) of an assistant message, read the way Qwen3's template reads them."""
    if "</think>" not in content:
        return "", content
    pieces = content.split("</think>")
    reasoning = pieces[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
    return reasoning, pieces[-1].lstrip("\n")


class Qwen3Renderer(TurnRenderer):
    name = "qwen3"
    frames_thinking = True  # False for the instruct models, which have no <think> convention
    thinking_in_prompt = False  # True with thinking disabled: the prompt holds the empty block

    def __init__(self, tokenizer: Tokenizer) -> None:
        super().__init__(tokenizer)
        single_token(tokenizer, "<|im_start|>", self.name)
        self._im_end = single_token(tokenizer, "<|im_end|>", self.name)

    def render_turn(self, messages: list[Message], idx: int) -> RenderedTurn:
        message = messages[idx]
        role, content = message["role"], message["content"]
        header = ("\n" if idx > 0 else "") + f"<|im_start|>{'user' if role == 'tool' else role}\n"
        if role == "tool":
            content = f"<tool_response>\n{content}\n</tool_response>"
        elif role == "assistant" and self.frames_thinking:
            header_suffix, content = self._assistant_body(messages, idx)
            header += header_suffix
        return RenderedTurn(
            header=encode(self.tokenizer, header),
            output=encode(self.tokenizer, content + "<|im_end|>"),
        )

    def _assistant_body(self, messages: list[Message], idx: int) -> tuple[str, str]:
        """(text appended to the header, output text) of assistant message `idx`."""
        reasoning, answer = split_thinking(messages[idx]["content"])
        last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
        is_last = idx == len(messages) - 1
        if last_user is None or idx < last_user or not (is_last or reasoning):
            return "", answer
        if not reasoning and self.thinking_in_prompt:
            return EMPTY_THINKING, answer.lstrip("\n")
        return "", "<think>\n" + reasoning.strip("\n") + "\n</think>\n\n" + answer.lstrip("\n")

    def generation_header(self, messages: list[Message]) -> list[int]:
        header = ("\n" if messages else "") + "<|im_start|>assistant\n"
        return encode(self.tokenizer, header + (EMPTY_THINKING if self.thinking_in_prompt else ""))

    def get_stop_sequences(self) -> list[int]:
        return [self._im_end]

    def parse_response(self, tokens: list[int]) -> tuple[Message, TerminationReason]:
        # The content keeps its <think> block, so rendering it again gives the same tokens.
        return parse_until_token(self.tokenizer, tokens, [self._im_end])


class Qwen3DisableThinkingRenderer(Qwen3Renderer):
    name = "qwen3_disable_thinking"
    thinking_in_prompt = True


class Qwen3InstructRenderer(Qwen3Renderer):
    name = "qwen3_instruct"
    frames_thinking = False
