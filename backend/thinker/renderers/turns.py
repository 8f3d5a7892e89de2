"""What the hand-written renderers share: a conversation is BOS + one segment per message.

Each message renders to a header (role markers, weight 0) and an output (content plus the
end-of-turn marker, weight 1 when the message is trained), as the Tinker cookbook's
`RenderedMessage` does. `stop_overlap` holds tokens that complete the stop sequence but are
also the next message's header (role_colon's "User:"): they are appended only after the last
message of a supervised example.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

from tinker import types

from thinker.errors import ConfigError, DatasetError
from thinker.renderers.base import Message, TerminationReason, TrainOnWhat

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

# The renderers' tokenizer, named here for the other renderer modules (a string: transformers
# is imported for type checking only).
Tokenizer: TypeAlias = "PreTrainedTokenizerBase"


def encode(tokenizer: Tokenizer, text: str) -> list[int]:
    """Tokens of `text`; never lets the tokenizer add BOS/EOS on its own."""
    return list(tokenizer.encode(text, add_special_tokens=False))


def decode(tokenizer: Tokenizer, tokens: list[int]) -> str:
    return str(tokenizer.decode(tokens, clean_up_tokenization_spaces=False))


def single_token(tokenizer: Tokenizer, text: str, renderer: str) -> int:
    """The id of special token `text`, or a ConfigError naming the renderer that needs it."""
    tokens = encode(tokenizer, text)
    if len(tokens) != 1:
        raise ConfigError(
            f"the {renderer} renderer needs a tokenizer with {text!r} as a single special token, "
            f"but this tokenizer encodes it as {len(tokens)} tokens; pick the renderer that "
            "matches the model (see default_renderer_name)"
        )
    return tokens[0]


def trained_messages(messages: list[Message], train_on_what: TrainOnWhat | str) -> list[bool]:
    """Whether each message's output (content + end of turn) gets weight 1."""
    if not messages:
        raise DatasetError("a supervised example needs at least one message, got none")
    match _train_on_what(train_on_what):
        case TrainOnWhat.LAST_ASSISTANT_MESSAGE:
            # As in the cookbook: only when the conversation ends with the assistant.
            last = len(messages) - 1
            return [i == last and m["role"] == "assistant" for i, m in enumerate(messages)]
        case TrainOnWhat.ALL_ASSISTANT_MESSAGES:
            return [m["role"] == "assistant" for m in messages]
        case TrainOnWhat.ALL_MESSAGES | TrainOnWhat.ALL_TOKENS:
            return [True] * len(messages)
        case TrainOnWhat.CUSTOMIZED:
            missing = [i for i, m in enumerate(messages) if "trainable" not in m]
            if missing:
                raise DatasetError(
                    f"train_on_what='customized' needs a 'trainable' flag on every message; "
                    f"messages {missing} have none"
                )
            return [bool(m.get("trainable")) for m in messages]


def _train_on_what(value: TrainOnWhat | str) -> TrainOnWhat:
    try:
        return TrainOnWhat(value)
    except ValueError:
        valid = ", ".join(t.value for t in TrainOnWhat)
        raise ConfigError(f"unknown train_on_what {value!r}; valid values: {valid}") from None


def header_weight(train_on_what: TrainOnWhat | str) -> float:
    """Headers (and BOS) train only with train_on_what='all_tokens'."""
    return 1.0 if _train_on_what(train_on_what) == TrainOnWhat.ALL_TOKENS else 0.0


def parse_until_token(
    tokenizer: Tokenizer, tokens: list[int], stop_tokens: list[int]
) -> tuple[Message, TerminationReason]:
    """The text before the first stop token ("stop"), or all of it ("length")."""
    cut = next((i for i, token in enumerate(tokens) if token in stop_tokens), None)
    if cut is None:
        return Message(role="assistant", content=decode(tokenizer, tokens)), "length"
    return Message(role="assistant", content=decode(tokenizer, tokens[:cut])), "stop"


@dataclass(frozen=True)
class RenderedTurn:
    header: list[int]
    output: list[int]
    stop_overlap: list[int] = field(default_factory=list)


class TurnRenderer(ABC):
    """A renderer whose conversation is the concatenation of its messages' segments."""

    name: str

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def bos_tokens(self) -> list[int]:
        return []

    @abstractmethod
    def render_turn(self, messages: list[Message], idx: int) -> RenderedTurn:
        """Message `idx`, rendered knowing the whole conversation (Qwen3 needs it)."""

    @abstractmethod
    def generation_header(self, messages: list[Message]) -> list[int]:
        """What follows `messages` to open the assistant's reply."""

    @abstractmethod
    def get_stop_sequences(self) -> list[str] | list[int]: ...

    @abstractmethod
    def parse_response(self, tokens: list[int]) -> tuple[Message, TerminationReason]: ...

    def build_supervised_example(
        self,
        messages: list[Message],
        train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_MESSAGE,
    ) -> tuple[list[int], list[float]]:
        trained = trained_messages(messages, train_on_what)
        w_header = header_weight(train_on_what)
        tokens = self.bos_tokens()
        weights = [w_header] * len(tokens)
        for idx, is_trained in enumerate(trained):
            turn = self.render_turn(messages, idx)
            is_last = idx == len(messages) - 1
            output = turn.output + (turn.stop_overlap if is_last else [])
            tokens += turn.header + output
            weights += [w_header] * len(turn.header) + [float(is_trained)] * len(output)
        return tokens, weights

    def build_generation_prompt(self, messages: list[Message]) -> types.ModelInput:
        tokens = self.bos_tokens()
        for idx in range(len(messages)):
            turn = self.render_turn(messages, idx)
            tokens += turn.header + turn.output
        return types.ModelInput.from_ints(tokens + self.generation_header(messages))
