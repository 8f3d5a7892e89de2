"""Renderers against the exact strings of each chat format, and the exact tokens they train.

`trained_text` decodes each run of weight-1 tokens, so a test reads as the text that is
learned: ["4<|eot_id|>"] means "4" and the end-of-turn token train, and nothing else does.
"""

from __future__ import annotations

import pytest
from tinker import types
from tokenizer_fixtures import (
    QWEN3_SPECIALS,
    byte_level_tokenizer,
    chatml_tokenizer,
    llama3_tokenizer,
    plain_tokenizer,
    qwen3_tokenizer,
)
from transformers import ByT5Tokenizer, PreTrainedTokenizerBase

from thinker.errors import ConfigError, DatasetError
from thinker.renderers import (
    RENDERER_NAMES,
    Message,
    Renderer,
    TrainOnWhat,
    datum_from_tokens_weights,
    default_renderer_name,
    get_renderer,
)

# Shared conversations. CONVO: one question, one answer. MULTI: two rounds, the first answer
# with reasoning (which Qwen3 strips from history).
CONVO: list[Message] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "4"},
]
MULTI: list[Message] = [
    {"role": "system", "content": "S"},
    {"role": "user", "content": "Q1"},
    {"role": "assistant", "content": "<think>\nr1\n</think>\n\nA1"},
    {"role": "user", "content": "Q2"},
    {"role": "assistant", "content": "A2"},
]
# For train_on_what="customized": the first user and the last assistant message train.
FLAGS = [False, True, False, False, True]


def _byt5() -> ByT5Tokenizer:
    return ByT5Tokenizer()


def renderer(name: str) -> Renderer:
    tokenizers = {
        "role_colon": _byt5,
        "llama3": llama3_tokenizer,
        "qwen3": qwen3_tokenizer,
        "qwen3_disable_thinking": qwen3_tokenizer,
        "qwen3_instruct": qwen3_tokenizer,
        "chat_template": chatml_tokenizer,
    }
    return get_renderer(name, tokenizers[name]())


def tok_of(r: Renderer) -> PreTrainedTokenizerBase:
    return r.tokenizer  # type: ignore[attr-defined]


def decode(r: Renderer, tokens: list[int]) -> str:
    return tok_of(r).decode(tokens)


def trained_text(r: Renderer, tokens: list[int], weights: list[float]) -> list[str]:
    """The decoded runs of consecutive weight-1 tokens."""
    assert set(weights) <= {0.0, 1.0}
    runs: list[list[int]] = []
    for i, (token, weight) in enumerate(zip(tokens, weights, strict=True)):
        if weight and (i == 0 or not weights[i - 1]):
            runs.append([])
        if weight:
            runs[-1].append(token)
    return [decode(r, run) for run in runs]


def render(r: Renderer, messages: list[Message], mode: str) -> tuple[str, list[str]]:
    tokens, weights = r.build_supervised_example(messages, TrainOnWhat(mode))
    assert len(tokens) == len(weights)
    return decode(r, tokens), trained_text(r, tokens, weights)


def customized(messages: list[Message]) -> list[Message]:
    return [{**m, "trainable": flag} for m, flag in zip(messages, FLAGS, strict=True)]


def encode(r: Renderer, text: str) -> list[int]:
    return tok_of(r).encode(text, add_special_tokens=False)


# --- role_colon ------------------------------------------------------------------------------

ROLE_COLON_MULTI = (
    "System: S\n\nUser: Q1\n\nAssistant: <think>\nr1\n</think>\n\nA1\n\n"
    "User: Q2\n\nAssistant: A2\n\nUser:"
)


def test_role_colon_renders_system_user_assistant_and_trains_reply_with_stop():
    text, trained = render(renderer("role_colon"), CONVO, "last_assistant_message")
    assert text == "System: Be brief.\n\nUser: What is 2+2?\n\nAssistant: 4\n\nUser:"
    assert trained == [" 4\n\nUser:"]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("last_assistant_message", [" A2\n\nUser:"]),
        ("all_assistant_messages", [" <think>\nr1\n</think>\n\nA1\n\n", " A2\n\nUser:"]),
        (
            "all_messages",
            [" S\n\n", " Q1\n\n", " <think>\nr1\n</think>\n\nA1\n\n", " Q2\n\n", " A2\n\nUser:"],
        ),
        ("all_tokens", [ROLE_COLON_MULTI]),
        ("customized", [" Q1\n\n", " A2\n\nUser:"]),
    ],
)
def test_role_colon_train_on_what(mode: str, expected: list[str]):
    messages = customized(MULTI) if mode == "customized" else MULTI
    assert render(renderer("role_colon"), messages, mode) == (ROLE_COLON_MULTI, expected)


def test_role_colon_last_message_from_user_trains_nothing_and_adds_no_stop():
    messages = CONVO[:2]
    text, trained = render(renderer("role_colon"), messages, "last_assistant_message")
    assert text == "System: Be brief.\n\nUser: What is 2+2?\n\n"
    assert trained == []


def test_role_colon_generation_prompt_and_stop_sequence():
    r = renderer("role_colon")
    prompt = r.build_generation_prompt(CONVO[:2])
    assert decode(r, prompt.to_ints()) == "System: Be brief.\n\nUser: What is 2+2?\n\nAssistant:"
    assert r.get_stop_sequences() == ["\n\nUser:"]


def test_role_colon_prepends_bos_once_when_the_tokenizer_has_one():
    r = get_renderer("role_colon", llama3_tokenizer())
    tokens, weights = r.build_supervised_example(CONVO[1:])
    assert decode(r, tokens) == "<|begin_of_text|>User: What is 2+2?\n\nAssistant: 4\n\nUser:"
    assert tokens.count(llama3_tokenizer().bos_token_id) == 1
    assert weights[0] == 0.0


@pytest.mark.parametrize(
    ("text", "eos", "content", "reason"),
    [
        (" 4\n\nUser:", False, "4", "stop"),
        (" 4\n\nUser: and more\n\nUser:", False, "4", "stop"),
        (" 4", True, "4", "stop"),  # base models often end a single turn with EOS
        (" 4 and then", False, "4 and then", "length"),
    ],
)
def test_role_colon_parse_response(text: str, eos: bool, content: str, reason: str):
    r = renderer("role_colon")
    tokens = encode(r, text) + ([tok_of(r).eos_token_id] if eos else [])
    message, termination = r.parse_response(tokens)
    assert message == {"role": "assistant", "content": content}
    assert termination == reason


# --- llama3 ----------------------------------------------------------------------------------

LLAMA3_CONVO = (
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n4<|eot_id|>"
)
LLAMA3_MULTI = (
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nQ1<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n<think>\nr1\n</think>\n\nA1<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nQ2<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\nA2<|eot_id|>"
)


def test_llama3_renders_exact_format_with_one_bos():
    r = renderer("llama3")
    tokens, weights = r.build_supervised_example(CONVO)
    assert decode(r, tokens) == LLAMA3_CONVO
    assert trained_text(r, tokens, weights) == ["4<|eot_id|>"]
    # The fixture tokenizer adds BOS whenever add_special_tokens is left on.
    assert tokens.count(llama3_tokenizer().bos_token_id) == 1


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("last_assistant_message", ["A2<|eot_id|>"]),
        ("all_assistant_messages", ["<think>\nr1\n</think>\n\nA1<|eot_id|>", "A2<|eot_id|>"]),
        (
            "all_messages",
            [
                "S<|eot_id|>",
                "Q1<|eot_id|>",
                "<think>\nr1\n</think>\n\nA1<|eot_id|>",
                "Q2<|eot_id|>",
                "A2<|eot_id|>",
            ],
        ),
        ("all_tokens", [LLAMA3_MULTI]),
        ("customized", ["Q1<|eot_id|>", "A2<|eot_id|>"]),
    ],
)
def test_llama3_train_on_what(mode: str, expected: list[str]):
    messages = customized(MULTI) if mode == "customized" else MULTI
    assert render(renderer("llama3"), messages, mode) == (LLAMA3_MULTI, expected)


def test_llama3_generation_prompt_stop_token_and_tool_role():
    r = renderer("llama3")
    prompt = decode(r, r.build_generation_prompt(CONVO[:2]).to_ints())
    assert prompt == LLAMA3_CONVO.removesuffix("4<|eot_id|>")
    assert r.get_stop_sequences() == encode(r, "<|eot_id|>")
    tool: list[Message] = [{"role": "tool", "content": "42"}]
    text, _ = render(r, tool, "all_messages")
    expected_tool = '<|start_header_id|>ipython<|end_header_id|>\n\n{"output": "42"}<|eot_id|>'
    assert text == "<|begin_of_text|>" + expected_tool


@pytest.mark.parametrize(
    ("text", "content", "reason"),
    [("4<|eot_id|>", "4", "stop"), ("4 and", "4 and", "length")],
)
def test_llama3_parse_response(text: str, content: str, reason: str):
    r = renderer("llama3")
    assert r.parse_response(encode(r, text)) == ({"role": "assistant", "content": content}, reason)


# --- qwen3 -----------------------------------------------------------------------------------

QWEN3_CONVO = (
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>"
)
# The first answer's reasoning is stripped (it precedes the last user message); the last
# answer gets the empty thinking block, exactly as Qwen3's template renders them.
QWEN3_MULTI = (
    "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n"
    "<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\nA2<|im_end|>"
)


def test_qwen3_frames_the_reply_with_an_empty_thinking_block_and_trains_it():
    text, trained = render(renderer("qwen3"), CONVO, "last_assistant_message")
    assert text == QWEN3_CONVO
    assert trained == ["<think>\n\n</think>\n\n4<|im_end|>"]


def test_qwen3_keeps_the_reasoning_of_the_last_reply():
    messages = [*CONVO[:2], Message(role="assistant", content="<think>add</think>4")]
    text, trained = render(renderer("qwen3"), messages, "last_assistant_message")
    assert text == QWEN3_CONVO.replace("<think>\n\n</think>", "<think>\nadd\n</think>")
    assert trained == ["<think>\nadd\n</think>\n\n4<|im_end|>"]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("last_assistant_message", ["<think>\n\n</think>\n\nA2<|im_end|>"]),
        ("all_assistant_messages", ["A1<|im_end|>", "<think>\n\n</think>\n\nA2<|im_end|>"]),
        (
            "all_messages",
            [
                "S<|im_end|>",
                "Q1<|im_end|>",
                "A1<|im_end|>",
                "Q2<|im_end|>",
                "<think>\n\n</think>\n\nA2<|im_end|>",
            ],
        ),
        ("all_tokens", [QWEN3_MULTI]),
        ("customized", ["Q1<|im_end|>", "<think>\n\n</think>\n\nA2<|im_end|>"]),
    ],
)
def test_qwen3_train_on_what(mode: str, expected: list[str]):
    messages = customized(MULTI) if mode == "customized" else MULTI
    assert render(renderer("qwen3"), messages, mode) == (QWEN3_MULTI, expected)


def test_qwen3_generation_prompts_and_stop_token():
    r, off = renderer("qwen3"), renderer("qwen3_disable_thinking")
    prefix = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
    assert decode(r, r.build_generation_prompt(CONVO[:2]).to_ints()) == (
        prefix + "<|im_start|>assistant\n"
    )
    assert decode(off, off.build_generation_prompt(CONVO[:2]).to_ints()) == (
        prefix + "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    assert r.get_stop_sequences() == off.get_stop_sequences() == encode(r, "<|im_end|>")


def test_qwen3_disable_thinking_renders_the_same_tokens_but_trains_only_the_answer():
    text, trained = render(renderer("qwen3_disable_thinking"), CONVO, "last_assistant_message")
    assert text == QWEN3_CONVO
    assert trained == ["4<|im_end|>"]


def test_qwen3_instruct_renders_plain_chatml():
    text, trained = render(renderer("qwen3_instruct"), CONVO, "last_assistant_message")
    assert text == QWEN3_CONVO.replace("<think>\n\n</think>\n\n", "")
    assert trained == ["4<|im_end|>"]


def test_qwen3_tool_message_is_a_user_turn_with_a_tool_response():
    messages: list[Message] = [{"role": "tool", "content": "42"}]
    text, _ = render(renderer("qwen3"), messages, "all_messages")
    assert text == "<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>"


@pytest.mark.parametrize(
    "messages",
    [
        CONVO,
        MULTI,
        [*CONVO[:2], Message(role="assistant", content="<think>\nadd\n</think>\n\n4")],
        [*MULTI, Message(role="assistant", content="<think>r3</think>A3")],  # two replies
        [MULTI[0], Message(role="assistant", content="<think>x</think>A")],  # no user: unframed
    ],
)
@pytest.mark.parametrize("thinking", [True, False])
def test_qwen3_matches_qwen3s_chat_template(messages: list[Message], thinking: bool):
    r = renderer("qwen3" if thinking else "qwen3_disable_thinking")
    template = tok_of(r).apply_chat_template
    tokens, _ = r.build_supervised_example(messages)
    # The template also writes the "\n" after the final <|im_end|>; the renderer stops there.
    assert decode(r, tokens) + "\n" == template(messages, tokenize=False)
    prompt = r.build_generation_prompt(messages[:-1]).to_ints()
    expected = template(
        messages[:-1], tokenize=False, add_generation_prompt=True, enable_thinking=thinking
    )
    assert decode(r, prompt) == expected


@pytest.mark.parametrize(
    ("text", "content", "reason"),
    [
        ("<think>\nr\n</think>\n\n4<|im_end|>", "<think>\nr\n</think>\n\n4", "stop"),
        ("<think>\nstill thinking", "<think>\nstill thinking", "length"),
    ],
)
def test_qwen3_parse_response_keeps_the_thinking_block(text: str, content: str, reason: str):
    r = renderer("qwen3")
    assert r.parse_response(encode(r, text)) == ({"role": "assistant", "content": content}, reason)


# --- chat_template ---------------------------------------------------------------------------

CHATML_MULTI = (
    "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n"
    "<|im_start|>assistant\n<think>\nr1\n</think>\n\nA1<|im_end|>\n"
    "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\nA2<|im_end|>\n"
)


def test_chat_template_uses_the_template_and_trains_up_to_the_end_of_turn():
    text, trained = render(renderer("chat_template"), CONVO, "last_assistant_message")
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
        "<|im_start|>assistant\n4<|im_end|>\n"
    )
    # The "\n" the template writes after <|im_end|> is never sampled, so it does not train.
    assert trained == ["4<|im_end|>"]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("last_assistant_message", ["A2<|im_end|>"]),
        ("all_assistant_messages", ["<think>\nr1\n</think>\n\nA1<|im_end|>", "A2<|im_end|>"]),
        (
            "all_messages",
            [
                "S<|im_end|>",
                "Q1<|im_end|>",
                "<think>\nr1\n</think>\n\nA1<|im_end|>",
                "Q2<|im_end|>",
                "A2<|im_end|>",
            ],
        ),
        ("all_tokens", [CHATML_MULTI]),
        ("customized", ["Q1<|im_end|>", "A2<|im_end|>"]),
    ],
)
def test_chat_template_train_on_what(mode: str, expected: list[str]):
    messages = customized(MULTI) if mode == "customized" else MULTI
    assert render(renderer("chat_template"), messages, mode) == (CHATML_MULTI, expected)


def test_chat_template_generation_prompt_stop_tokens_and_parse():
    r = renderer("chat_template")
    prompt = decode(r, r.build_generation_prompt(CONVO[:2]).to_ints())
    assert prompt == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    # The template's end of turn first, then the tokenizer's EOS.
    assert r.get_stop_sequences() == encode(r, "<|im_end|>") + encode(r, "<|endoftext|>")
    assert r.parse_response(encode(r, "4<|im_end|>")) == (
        {"role": "assistant", "content": "4"},
        "stop",
    )
    assert r.parse_response(encode(r, "4<|endoftext|>"))[1] == "stop"
    assert r.parse_response(encode(r, "4 and")) == (
        {"role": "assistant", "content": "4 and"},
        "length",
    )


def test_chat_template_refuses_a_tokenizer_without_a_template():
    with pytest.raises(ConfigError, match="has no chat template|has none"):
        get_renderer("chat_template", plain_tokenizer())


def test_chat_template_refuses_a_template_that_rewrites_earlier_turns():
    # Qwen3's template drops old reasoning once a later user turn arrives.
    r = get_renderer("chat_template", qwen3_tokenizer())
    with pytest.raises(ConfigError, match="dedicated renderer"):
        r.build_supervised_example(MULTI)


def test_chat_template_headers_found_from_content_when_there_is_no_generation_prompt():
    # A template whose generation prompt is empty: headers are found where the content starts.
    template = (
        "{% for m in messages %}{{ '[' + m['role'] + ']: ' + m['content'] + '<|im_end|>' }}"
        "{% endfor %}"
    )
    tok = byte_level_tokenizer(QWEN3_SPECIALS, eos="<|endoftext|>", chat_template=template)
    r = get_renderer("chat_template", tok)
    text, trained = render(r, MULTI, "all_assistant_messages")
    assert text.startswith("[system]: S<|im_end|>[user]: Q1<|im_end|>[assistant]: <think>")
    assert trained == ["<think>\nr1\n</think>\n\nA1<|im_end|>", "A2<|im_end|>"]


# --- properties of every renderer ------------------------------------------------------------


@pytest.mark.parametrize("name", RENDERER_NAMES)
def test_supervised_example_is_the_generation_prompt_plus_the_trained_reply(name: str):
    """What trains is exactly what the model would sample after the generation prompt."""
    r = renderer(name)
    tokens, weights = r.build_supervised_example(CONVO)
    prompt = r.build_generation_prompt(CONVO[:2]).to_ints()
    assert tokens[: len(prompt)] == prompt
    trained = [w for w in weights if w]
    assert weights == [0.0] * len(prompt) + trained + [0.0] * (
        len(tokens) - len(prompt) - len(trained)
    )
    completion, reason = r.parse_response(tokens[len(prompt) :])
    assert completion["content"].removeprefix("<think>\n\n</think>\n\n") == "4"
    assert reason == "stop"


@pytest.mark.parametrize("name", RENDERER_NAMES)
def test_customized_without_flags_is_an_error(name: str):
    messages = [*customized(MULTI)[:-1], MULTI[-1]]
    with pytest.raises(DatasetError, match=r"'trainable' flag.*messages \[4\]"):
        renderer(name).build_supervised_example(messages, TrainOnWhat.CUSTOMIZED)


def test_unknown_train_on_what_and_empty_conversation_are_errors():
    r = renderer("role_colon")
    with pytest.raises(ConfigError, match="last_assistant_message"):
        r.build_supervised_example(CONVO, "everything")  # type: ignore[arg-type]
    with pytest.raises(DatasetError, match="at least one message"):
        r.build_supervised_example([])


# --- registry ------------------------------------------------------------------------------


def test_renderer_names_and_get_renderer():
    assert RENDERER_NAMES == (
        "role_colon",
        "llama3",
        "qwen3",
        "qwen3_disable_thinking",
        "qwen3_instruct",
        "chat_template",
    )
    for name in RENDERER_NAMES:
        assert renderer(name).name == name


def test_unknown_renderer_name_lists_the_valid_ones():
    with pytest.raises(ConfigError) as info:
        get_renderer("chatml", _byt5())
    assert "unknown renderer 'chatml'" in str(info.value)
    for name in RENDERER_NAMES:
        assert name in str(info.value)


@pytest.mark.parametrize(
    ("name", "missing"), [("llama3", "<|begin_of_text|>"), ("qwen3", "<|im_start|>")]
)
def test_a_format_refuses_a_tokenizer_without_its_special_tokens(name: str, missing: str):
    with pytest.raises(ConfigError, match=f"needs a tokenizer with '{missing}'"):
        get_renderer(name, _byt5() if name == "qwen3" else qwen3_tokenizer())


@pytest.mark.parametrize(
    ("base_model", "tokenizer", "expected"),
    [
        ("thinker/tiny", chatml_tokenizer, "role_colon"),
        ("Qwen/Qwen3-8B", plain_tokenizer, "role_colon"),  # no chat template: a base model
        ("Qwen/Qwen3-8B-Base", qwen3_tokenizer, "role_colon"),
        ("Qwen/Qwen3-8B", qwen3_tokenizer, "qwen3"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", qwen3_tokenizer, "qwen3_instruct"),
        ("Qwen/Qwen3.5-4B", qwen3_tokenizer, "chat_template"),
        ("meta-llama/Llama-3.2-1B-Instruct", chatml_tokenizer, "llama3"),
        ("unsloth/llama3-8b-instruct", chatml_tokenizer, "llama3"),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", chatml_tokenizer, "chat_template"),
    ],
)
def test_default_renderer_name(base_model: str, tokenizer, expected: str):
    assert default_renderer_name(base_model, tokenizer()) == expected


# --- datum -----------------------------------------------------------------------------------


def test_datum_shifts_inputs_against_targets():
    datum = datum_from_tokens_weights([10, 11, 12, 13, 14], [0.0, 0.0, 1.0, 1.0, 1.0])
    assert datum.model_input.to_ints() == [10, 11, 12, 13]
    assert datum.loss_fn_inputs["target_tokens"].tolist() == [11, 12, 13, 14]
    assert datum.loss_fn_inputs["weights"].tolist() == [0.0, 1.0, 1.0, 1.0]
    assert datum.loss_fn_inputs["target_tokens"].dtype == "int64"
    assert datum.loss_fn_inputs["weights"].dtype == "float32"


def test_datum_truncates_the_full_sequence_before_shifting():
    datum = datum_from_tokens_weights([10, 11, 12, 13, 14], [0.0, 0.0, 1.0, 1.0, 1.0], 3)
    assert datum.model_input.to_ints() == [10, 11]
    assert datum.loss_fn_inputs["target_tokens"].tolist() == [11, 12]
    assert datum.loss_fn_inputs["weights"].tolist() == [0.0, 1.0]


def test_datum_from_a_rendered_example_predicts_the_reply():
    r = renderer("llama3")
    tokens, weights = r.build_supervised_example(CONVO)
    datum = datum_from_tokens_weights(tokens, weights)
    targets = datum.loss_fn_inputs["target_tokens"].tolist()
    trained = [
        t for t, w in zip(targets, datum.loss_fn_inputs["weights"].tolist(), strict=True) if w
    ]
    assert decode(r, trained) == "4<|eot_id|>"
    assert isinstance(datum, types.Datum)


@pytest.mark.parametrize(
    ("tokens", "weights", "max_length", "match"),
    [
        ([7], [1.0], None, "at least 2 tokens"),
        ([7, 8, 9], [0.0, 1.0, 1.0], 1, "at least 2 tokens.*max_length=1"),
        ([7, 8], [1.0], None, "2 tokens but 1 weights"),
    ],
)
def test_datum_errors(tokens: list[int], weights: list[float], max_length: int | None, match: str):
    with pytest.raises(DatasetError, match=match):
        datum_from_tokens_weights(tokens, weights, max_length)
