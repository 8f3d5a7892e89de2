r"""The base-model format of the Tinker cookbook's RoleColonRenderer.

    System: <content>\n\nUser: <content>\n\nAssistant: <content>\n\nUser:

Every message is "<Role>:" (header) then " <content>\n\n" (output). A turn ends where the next
"User:" begins, so the stop sequence is the string "\n\nUser:"; a supervised example that ends
with the assistant appends "User:" (trained with the assistant's weight) so the model learns to
stop. The tokenizer's BOS, if it has one, comes first.
"""

from __future__ import annotations

from thinker.renderers.base import Message, TerminationReason
from thinker.renderers.turns import RenderedTurn, TurnRenderer, decode, encode

STOP_SEQUENCE = "\n\nUser:"


class RoleColonRenderer(TurnRenderer):
    name = "role_colon"

    def bos_tokens(self) -> list[int]:
        bos = self.tokenizer.bos_token
        return encode(self.tokenizer, str(bos)) if bos else []

    def render_turn(self, messages: list[Message], idx: int) -> RenderedTurn:
        message = messages[idx]
        overlap = encode(self.tokenizer, "User:") if message["role"] == "assistant" else []
        return RenderedTurn(
            header=encode(self.tokenizer, message["role"].capitalize() + ":"),
            output=encode(self.tokenizer, " " + message["content"] + "\n\n"),
            stop_overlap=overlap,
        )

    def generation_header(self, messages: list[Message]) -> list[int]:
        return encode(self.tokenizer, "Assistant:")

    def get_stop_sequences(self) -> list[str]:
        return [STOP_SEQUENCE]

    def parse_response(self, tokens: list[int]) -> tuple[Message, TerminationReason]:
        # A base model may end a single turn with EOS instead of "\n\nUser:": also a clean stop.
        eos = self.tokenizer.eos_token_id
        ended_with_eos = bool(tokens) and eos is not None and tokens[-1] == eos
        text = decode(self.tokenizer, tokens[:-1] if ended_with_eos else tokens)
        answer, found, _ = text.partition(STOP_SEQUENCE)
        reason: TerminationReason = "stop" if found or ended_with_eos else "length"
        return Message(role="assistant", content=answer.strip()), reason
