"""Small offline tokenizers with the special tokens of real chat formats.

Byte-level BPE without merges: every byte of ordinary text is one token, and each special token
is one id, as in the real Llama 3 and Qwen3 vocabularies. Nothing is downloaded.
"""

from __future__ import annotations

from functools import cache

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

LLAMA3_SPECIALS = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
]
QWEN3_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# ChatML with every turn closed by "<|im_end|>\n", as Qwen2.5's template minus its default
# system prompt.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# The rules of Qwen3's chat template (Qwen/Qwen3-8B tokenizer_config.json) for plain
# system/user/assistant messages; tool handling left out.
QWEN3_TEMPLATE = """
{%- if messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- set ns = namespace(last_query_index=messages|length - 1) %}
{%- for message in messages %}
    {%- if message.role == 'user' %}{%- set ns.last_query_index = loop.index0 %}{%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- set content = message.content %}
    {%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}
    {%- elif message.role == 'assistant' %}
        {%- set reasoning_content = '' %}
        {%- if '</think>' in content %}
            {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n')
                .split('<think>')[-1].lstrip('\\n') %}
            {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n')
                    + '\\n</think>\\n\\n' + content.lstrip('\\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}
"""


def byte_level_tokenizer(
    specials: list[str],
    *,
    added: tuple[str, ...] = (),
    bos: str | None = None,
    eos: str | None = None,
    implicit_bos: bool = False,
    chat_template: str | None = None,
) -> PreTrainedTokenizerFast:
    """A byte-level tokenizer with `specials` as special tokens and `added` as plain ones.

    With `implicit_bos`, encoding with add_special_tokens=True prepends BOS, as Llama 3's
    tokenizer does: a renderer that forgets add_special_tokens=False then doubles its BOS.
    """
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    tok.add_tokens([AddedToken(s, special=False, normalized=False) for s in added])
    if implicit_bos:
        assert bos is not None
        bos_id = tok.token_to_id(bos)
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, bos_id)]
        )
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, eos_token=eos)
    if chat_template is not None:
        wrapped.chat_template = chat_template
    return wrapped


@cache
def llama3_tokenizer() -> PreTrainedTokenizerFast:
    """Llama 3 Instruct's special tokens; BOS added implicitly; EOS is <|eot_id|>."""
    return byte_level_tokenizer(
        LLAMA3_SPECIALS, bos="<|begin_of_text|>", eos="<|eot_id|>", implicit_bos=True
    )


@cache
def qwen3_tokenizer() -> PreTrainedTokenizerFast:
    """Qwen3's special tokens, <think>/</think> as plain added tokens, and its template."""
    return byte_level_tokenizer(
        QWEN3_SPECIALS,
        added=("<think>", "</think>"),
        eos="<|im_end|>",
        chat_template=QWEN3_TEMPLATE,
    )


@cache
def chatml_tokenizer() -> PreTrainedTokenizerFast:
    """A ChatML chat model whose EOS (<|endoftext|>) is not its end-of-turn token."""
    return byte_level_tokenizer(QWEN3_SPECIALS, eos="<|endoftext|>", chat_template=CHATML_TEMPLATE)


@cache
def plain_tokenizer() -> PreTrainedTokenizerFast:
    """ChatML special tokens but no chat template (a base model's tokenizer)."""
    return byte_level_tokenizer(QWEN3_SPECIALS, eos="<|endoftext|>")
