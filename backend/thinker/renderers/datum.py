"""One supervised sequence as a Tinker Datum: inputs shifted against targets."""

from __future__ import annotations

from tinker import types

from thinker.errors import DatasetError


def datum_from_tokens_weights(
    tokens: list[int], weights: list[float], max_length: int | None = None
) -> types.Datum:
    """Truncate the full sequence to `max_length`, then predict token i+1 from tokens[:i+1].

    model_input = tokens[:-1]; target_tokens = tokens[1:]; weights = weights[1:] (the first
    token is never predicted, so its weight is dropped).
    """
    if len(tokens) != len(weights):
        raise DatasetError(f"{len(tokens)} tokens but {len(weights)} weights; need one per token")
    if max_length is not None:
        tokens, weights = tokens[:max_length], weights[:max_length]
    if len(tokens) < 2:
        raise DatasetError(
            f"a datum needs at least 2 tokens (one input, one target), got {len(tokens)}"
            + (f" after truncation to max_length={max_length}" if max_length is not None else "")
        )
    n = len(tokens) - 1
    return types.Datum(
        model_input=types.ModelInput.from_ints(list(tokens[:-1])),
        loss_fn_inputs={
            "target_tokens": types.TensorData(data=list(tokens[1:]), dtype="int64", shape=[n]),
            "weights": types.TensorData(
                data=[float(w) for w in weights[1:]], dtype="float32", shape=[n]
            ),
        },
    )
