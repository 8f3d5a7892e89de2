"""The kinds of dataset, and which algorithms train on each: one vocabulary for the data
checks, the job specs, the API (an enum in the OpenAPI document) and the dashboard."""

from __future__ import annotations

from enum import StrEnum


class DatasetKind(StrEnum):
    """What each row of a dataset is."""

    CHAT = "chat"  # {"messages": [...]}: supervised conversations
    PROMPT_COMPLETION = "prompt_completion"  # {"prompt", "completion"}: supervised pairs
    PREFERENCES = "preferences"  # {"prompt" | "messages", "chosen", "rejected"}
    PROBLEMS = "problems"  # {"prompt" | "messages", "answer" | "tests"}: RL prompts


SL_KINDS = (DatasetKind.CHAT, DatasetKind.PROMPT_COMPLETION)

# The dataset kinds each algorithm (or rlhf stage) trains on.
TRAINS_ON: dict[str, tuple[DatasetKind, ...]] = {
    "sl": SL_KINDS,
    "dpo": (DatasetKind.PREFERENCES,),
    "rm": (DatasetKind.PREFERENCES,),
    "rl": (DatasetKind.PROBLEMS,),
    # batch work trains nothing: it answers the prompts of these rows
    "batch": (DatasetKind.CHAT, DatasetKind.PROMPT_COMPLETION, DatasetKind.PROBLEMS),
    # an evaluation answers them too, and scores the answers against their references
    "eval": (DatasetKind.CHAT, DatasetKind.PROMPT_COMPLETION, DatasetKind.PROBLEMS),
    # a review scores preference pairs with a reward model's checkpoints
    "review": (DatasetKind.PREFERENCES,),
}

# The fields a row of each kind needs, as error messages name them.
KIND_FIELDS: dict[DatasetKind, str] = {
    DatasetKind.CHAT: '"messages"',
    DatasetKind.PROMPT_COMPLETION: '"prompt" and "completion"',
    DatasetKind.PREFERENCES: '"chosen" and "rejected", with "prompt" or "messages"',
    DatasetKind.PROBLEMS: '"prompt" or "messages", with "answer" or "tests"',
}
