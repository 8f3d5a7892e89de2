"""The bounds every number of a training config keeps, in one place.

Each number is finite (the configs set `allow_inf_nan=False`), of its own type (an integer
field takes an integer, never `true`; a float field takes a number, never `true`), and within
a range written on its field, so that the API's 422, the YAML loader's error and the JSON
Schema the dashboard's forms check against all say the same. The ranges are what the engine
and the store can hold, wide enough for any real run.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict

MAX_STEPS = 10_000_000  # optimizer steps, and every count of steps (warmup, eval, save)
MAX_EPOCHS = 10_000
MAX_SEED = 2**63 - 1  # a signed 64-bit integer, what torch's generators take
MAX_LORA_RANK = 1024  # and, checked when a job is created, at most the model's hidden size
MAX_BATCH = 1_000_000  # examples, pairs or prompts per step (the most rows a dataset holds)
MAX_TOKENS = (
    1_048_576  # tokens of one example or completion (the engine refuses what memory cannot hold)
)
MAX_GROUP = 1024  # completions per RL prompt
MAX_TEMPERATURE = 10.0
MAX_SANDBOX_S = 3600.0  # a reward's time limits per completion
MAX_SANDBOX_MB = 1_048_576  # a reward's address-space limit (1 TiB)

# The model_config of every config class: extra keys refused, infinities and NaN refused.
STRICT_NUMBERS = ConfigDict(extra="forbid", allow_inf_nan=False)


def _refuse_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("Input should be a number, not true or false")
    return value


# A float that refuses booleans; numeric strings stay accepted, as PyYAML reads `1e-4`.
Number = Annotated[float, BeforeValidator(_refuse_bool)]
