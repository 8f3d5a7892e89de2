r"""Any chat model, through its tokenizer's own Jinja chat template.

Tokens are those of the template's text for the whole conversation. Weights come from
rendering prefixes: message i spans the text between the renders of messages[:i] and
messages[:i + 1]. Within that span the header ends where the generation prompt of
messages[:i] ends (assistant messages), or else where the message's content first appears;
the header gets weight 0, the rest up to and including the end-of-turn token the message's
weight, and what follows that token (ChatML's "\n", never sampled) weight 0. A template that
rewrites earlier turns when later ones are added (Qwen3's strips old reasoning) has no such
spans and is refused: use its dedicated renderer.

A turn ends with the special token that the template writes right after an assistant message
(<|im_end|>, <|eot_id|>, <end_of_turn>...), and with the tokenizer's EOS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jinja2 import TemplateError
from tinker import types

from thinker.errors import ConfigError
from thinker.renderers.base import Message, TerminationReason, TrainOnWhat
from thinker.renderers.turns import (
    encode,
    header_weight,
    parse_until_token,
    trained_messages,
)

if TYPE_CHECKING:
    from thinker.renderers.turns import Tokenizer

_SENTINEL = "THINKER-SENTINEL-REPLY"


def has_chat_template(tokenizer: Tokenizer) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


class ChatTemplateRenderer:
    name = "chat_template"

    def __init__(self, tokenizer: Tokenizer) -> None:
        if not has_chat_template(tokenizer):
            raise ConfigError(
                "the chat_template renderer needs a tokenizer with a chat template, and this "
                "tokenizer has none; use role_colon for a base model, or a named renderer"
            )
        self.tokenizer = tokenizer
        self._stop_tokens = self._find_stop_tokens()

    def _render(self, messages: list[Message], add_generation_prompt: bool = False) -> str:
        plain = [{"role": m["role"], "content": m["content"]} for m in messages]
        text = self.tokenizer.apply_chat_template(
            plain, tokenize=False, add_generation_prompt=add_generation_prompt
        )
        return str(text)

    def build_supervised_example(
        self,
        messages: list[Message],
        train_on_what: TrainOnWhat = TrainOnWhat.LAST_ASSISTANT_MESSAGE,
    ) -> tuple[list[int], list[float]]:
        trained = trained_messages(messages, train_on_what)
        text = self._render(messages)
        tokens = encode(self.tokenizer, text)
        weights = [header_weight(train_on_what)] * len(tokens)
        for idx, is_trained in enumerate(trained):
            body_start, end = self._body_span(messages, idx, text)
            first = self._token_index(text, body_start, tokens)
            last = self._end_of_turn(tokens, first, self._token_index(text, end, tokens))
            weights[first:last] = [float(is_trained)] * (last - first)
        return tokens, weights

    def _end_of_turn(self, tokens: list[int], first: int, end: int) -> int:
        """Where the trained part of tokens[first:end] ends: just after its stop token, if any.

        What the template writes after the stop token (ChatML's newline) is never sampled.
        """
        stop = next((i for i in range(first, end) if tokens[i] in self._stop_tokens), None)
        return end if stop is None else stop + 1

    def _prefix_end(self, messages: list[Message], count: int, text: str) -> int:
        """Where the render of messages[:count] ends inside `text`, the whole render."""
        if count == 0:
            return 0
        if count == len(messages):
            return len(text)
        prefix = self._render(messages[:count])
        if not text.startswith(prefix):
            raise ConfigError(
                f"this chat template renders the first {count} messages differently once later "
                "messages follow (it rewrites earlier turns), so per-message weights cannot be "
                "found; use the model's dedicated renderer (e.g. qwen3) instead of chat_template"
            )
        return len(prefix)

    def _body_span(self, messages: list[Message], idx: int, text: str) -> tuple[int, int]:
        """Character span of message `idx` without its header: (body start, end)."""
        start = self._prefix_end(messages, idx, text)
        end = self._prefix_end(messages, idx + 1, text)
        if messages[idx]["role"] == "assistant" and idx > 0:
            prompt = self._render(messages[:idx], add_generation_prompt=True)
            if text.startswith(prompt) and start < len(prompt) <= end:
                return len(prompt), end
        content = messages[idx]["content"].strip()
        found = text.find(content, start, end) if content else -1
        # A template that rewrites the content leaves no header to find: train the whole span.
        return (found if found >= 0 else start), end

    def _token_index(self, text: str, char_pos: int, tokens: list[int]) -> int:
        """How many tokens of `tokens` (the whole text's) lie before character `char_pos`.

        A token that straddles the boundary counts after it.
        """
        if char_pos >= len(text):
            return len(tokens)
        count = 0
        for a, b in zip(encode(self.tokenizer, text[:char_pos]), tokens, strict=False):
            if a != b:
                break
            count += 1
        return count

    def build_generation_prompt(self, messages: list[Message]) -> types.ModelInput:
        text = self._render(messages, add_generation_prompt=True)
        return types.ModelInput.from_ints(encode(self.tokenizer, text))

    def _find_stop_tokens(self) -> list[int]:
        stops: list[int] = []
        probe: list[Message] = [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": _SENTINEL},
        ]
        try:
            _, found, after = self._render(probe).partition(_SENTINEL)
        except TemplateError:
            found, after = "", ""
        tail = encode(self.tokenizer, after) if found else []
        if tail and tail[0] in self._special_ids():
            stops.append(tail[0])
        eos = self.tokenizer.eos_token_id
        if isinstance(eos, int) and eos not in stops:
            stops.append(eos)
        if not stops:
            raise ConfigError(
                "the chat_template renderer cannot tell where an assistant turn ends: the "
                "template writes no special token after a reply and the tokenizer has no EOS"
            )
        return stops

    def _special_ids(self) -> set[int]:
        added = self.tokenizer.added_tokens_decoder
        return set(self.tokenizer.all_special_ids) | {i for i, t in added.items() if t.special}

    def get_stop_sequences(self) -> list[int]:
        return list(self._stop_tokens)

    def parse_response(self, tokens: list[int]) -> tuple[Message, TerminationReason]:
        return parse_until_token(self.tokenizer, tokens, self._stop_tokens)
