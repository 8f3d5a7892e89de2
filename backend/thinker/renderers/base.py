"""Shared renderer vocabulary: messages, what to train on, and the Renderer interface."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, NotRequired, Protocol, TypedDict

from tinker import types


class Message(TypedDict):
    role: str  # "system" | "user" | "assistant" (renderers may accept others, e.g. "tool")
    content: str
    trainable: NotRequired[bool]  # only read with TrainOnWhat.CUSTOMIZED


class TrainOnWhat(StrEnum):
    LAST_ASSISTANT_MESSAGE = "last_assistant_message"
    ALL_ASSISTANT_MESSAGES = "all_assistant_messages"
    ALL_MESSAGES = "all_messages"
    ALL_TOKENS = "all_tokens"
    CUSTOMIZED = "customized"  # each message's own `trainable` flag


# "stop": the response ended with one of the renderer's stop sequences;
# "length": it did not (the sampler ran out of tokens), so the message may be cut short.
TerminationReason = Literal["stop", "length"]


class Renderer(Protocol):
    """Turns chat messages into tokens plus per-token training weights, and back."""

    name: str

    def build_supervised_example(
        self,
        messages: list[Message],
        train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_MESSAGE,
    ) -> tuple[list[int], list[float]]:
        """Full-sequence tokens and one weight per token (header tokens get weight 0)."""
        ...

    def build_generation_prompt(self, messages: list[Message]) -> types.ModelInput:
        """The conversation so far plus the header of the assistant's reply."""
        ...

    def get_stop_sequences(self) -> list[str] | list[int]:
        """What ends an assistant turn: token ids where one token does, else strings."""
        ...

    def parse_response(self, tokens: list[int]) -> tuple[Message, TerminationReason]:
        """The assistant message in sampled tokens, and why it ended."""
        ...
