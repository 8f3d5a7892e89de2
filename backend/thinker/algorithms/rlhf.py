"""RLHF: SL on demonstrations, a reward model on preference pairs, then RL against its scores.

What it computes. Three ordinary runs, the stages `sl`, `rm` and `rl` of the pipeline's stages
mechanism (`thinker.pipeline.stages`), each in its own directory and resuming on its own:

1. `<run>/sl`: `sl.main` on the demonstrations, from a fresh adapter on the base model.
2. `<run>/rm`: `train_reward_model` on the preference pairs: a pairwise judge that answers
   "A" or "B" (see reward_model.py). It starts from the base model, not from the SL weights:
   the judge then owes nothing to the policy it will score, and stages 1 and 2 are
   independent (the cookbook's RLHF recipe also trains its preference model separately).
3. `<run>/rl`: `rl.main` from SL's final state, each group of completions scored by
   `JudgeReward` on a sampling client of the judge's final weights: a completion's reward is
   its mean probability of beating the other completions of its group. Such a round robin
   averages exactly 1/2 per group, so RL's own `reward_mean` and `eval_reward_mean` stay at
   0.5 by construction; what moves is the judge's verdict on held-out prompts, computed
   after the stage from greedy answers (`compare_policies`): `eval_win_rate_vs_sl`, P(RL's
   answer beats SL's), and, when every prompt has a "reference" answer,
   `eval_judge_score_sl` and `eval_judge_score_rl`, P(the answer beats the reference) for
   each policy. With `rm: {head: bradley_terry}` the reward model is a scalar score per
   response instead (bradley_terry.py): a completion's reward is its score, and the verdict
   reads P(x beats y) = sigmoid(r_x - r_y).

This module holds RLHF's config (`RLHFConfig`: the shared settings once, and each stage's
section) and the judge's verdict; the pipeline turns the config into its three stages.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, StrictInt, model_validator
from tinker import types

from thinker.algorithms.bradley_terry import BradleyTerryReward
from thinker.algorithms.reward_model import JudgeReward
from thinker.algorithms.reward_model_config import RewardModelConfig
from thinker.algorithms.rl_config import RLConfig
from thinker.algorithms.sl_config import SLConfig
from thinker.bounds import MAX_LORA_RANK, MAX_SEED, STRICT_NUMBERS
from thinker.data import split_train_eval
from thinker.data.problems import load_problems
from thinker.engine.protocols import SamplingClient, together
from thinker.renderers import Renderer
from thinker.rewards import Problem

__all__ = ["RLHFConfig", "compare_policies", "greedy_answers", "held_out_problems"]

STAGE_NAMES = ("sl", "rm", "rl")
# Set once at the top level and copied into every stage; a stage may repeat, not change, them.
SHARED_FIELDS = ("base_model", "backend", "quantization", "renderer", "lora_rank", "seed")


class RLHFConfig(BaseModel):
    """The three stages' settings. The shared fields are set here, once; each stage's section
    holds the rest of its algorithm's config (SLConfig, RewardModelConfig, RLConfig fields).

    Each stage's `log_path` is always `<log_path>/<stage>`; the RL stage's `init_from` is the
    SL stage's final state and its reward the judge, both set by the pipeline.
    """

    model_config = STRICT_NUMBERS

    base_model: str = "thinker/tiny"  # hub id, local directory, or a built-in thinker/... model
    backend: Literal["local", "tinker"] = "local"
    quantization: Literal["4bit"] | None = None  # local + CUDA only: QLoRA through bitsandbytes
    renderer: str | None = None  # None = the base model's default renderer (policy and judge)
    lora_rank: StrictInt = Field(32, gt=0, le=MAX_LORA_RANK)  # of every stage's adapter
    seed: StrictInt = Field(0, ge=0, le=MAX_SEED)
    log_path: Path = Path("runs/rlhf")  # the run directory; stages write to <log_path>/<stage>
    sl: SLConfig  # stage 1: demonstrations (chat JSONL) and SL settings
    rm: RewardModelConfig  # stage 2: preference pairs and the judge's SL settings
    rl: RLConfig  # stage 3: prompts (each with a "reference" answer) and RL settings

    @model_validator(mode="before")
    @classmethod
    def _share_fields(cls, data: Any) -> Any:
        """Copy the shared fields and the stage directories into each stage's section."""
        if not isinstance(data, dict):
            return data
        shared = {k: data.get(k, cls.model_fields[k].default) for k in SHARED_FIELDS}
        log_path = Path(data.get("log_path", cls.model_fields["log_path"].default))
        problems, data = [], dict(data)
        for stage in STAGE_NAMES:
            section = _as_dict(data.get(stage))
            if not isinstance(section, dict):
                continue  # pydantic reports the missing or mistyped section
            for key, value in shared.items():
                if key in section and section[key] != value:
                    problems.append(f"{stage}.{key}: set once at the top level; remove it here")
            # A stage's directory is always derived (a section's own log_path, e.g. from a
            # dump of this config under another log_path, is replaced).
            section = {**section, **shared, "log_path": log_path / stage}
            if stage == "rl":
                reward = _as_dict(section.get("reward"))
                reward = {} if reward is None else reward  # null as left out; false is no mapping
                if isinstance(reward, dict):
                    section["reward"] = {"type": "reward_model", **reward}
                    problems += _rl_problems(section)
            data[stage] = section
        if problems:
            raise ValueError("; ".join(problems))
        return data


def _as_dict(section: Any) -> Any:
    """A section given as a model (e.g. `sl=SLConfig(...)`) as the fields set in it."""
    return section.model_dump(exclude_unset=True) if isinstance(section, BaseModel) else section


def _rl_problems(section: dict[str, Any]) -> list[str]:
    problems = []
    if section.get("init_from") is not None:
        problems.append("rl.init_from: set by the pipeline (the SL stage's final state)")
    reward_type = section["reward"]["type"]
    if reward_type != "reward_model":
        problems.append(
            f"rl.reward.type: {reward_type!r}; RLHF's RL stage is scored by the reward model "
            "it trains (use algorithm 'rl' for another reward)"
        )
    return problems


async def compare_policies(
    judge: JudgeReward | BradleyTerryReward,
    problems: list[Problem],
    policy: SamplingClient,
    baseline: SamplingClient,
    max_tokens: int,
    names: tuple[str, str] = ("rl", "sl"),
) -> dict[str, float]:
    """How the judge rates `policy` against `baseline` on `problems`, by greedy answers.

    Returns (with `names` = ("rl", "sl"), the names of the policy and the baseline):
        `eval_win_rate_vs_sl`: the mean P(policy's answer beats baseline's answer), 1/2 when
        the two policies answer alike; and when every problem has a reference answer,
        `eval_judge_score_rl` and `eval_judge_score_sl`: each policy's mean P(its answer
        beats the reference), the judge's score on an absolute scale.
    """
    if not problems:
        return {}
    answers = await greedy_answers(policy, judge.renderer, problems, max_tokens)
    baseline_answers = await greedy_answers(baseline, judge.renderer, problems, max_tokens)
    head_to_head = [
        (p.messages, a, b) for p, a, b in zip(problems, answers, baseline_answers, strict=True)
    ]
    won = _mean_probability(await judge.compare_async(head_to_head))
    verdict = {f"eval_win_rate_vs_{names[1]}": won}
    references = [p.row.get("reference", p.answer) for p in problems]
    reference_texts = [r for r in references if isinstance(r, str) and r]
    if len(reference_texts) == len(references):
        for name, texts in zip(names, (answers, baseline_answers), strict=True):
            pairs = [
                (p.messages, t, r) for p, t, r in zip(problems, texts, reference_texts, strict=True)
            ]
            verdict[f"eval_judge_score_{name}"] = _mean_probability(
                await judge.compare_async(pairs)
            )
    return verdict


async def greedy_answers(
    sampler: SamplingClient, renderer: Renderer, problems: list[Problem], max_tokens: int
) -> list[str]:
    """Each problem's greedy (temperature 0) answer, as the renderer parses it."""
    params = types.SamplingParams(
        max_tokens=max_tokens, temperature=0.0, stop=renderer.get_stop_sequences()
    )
    with together(sampler):  # one batch whatever the timing
        futures = [
            sampler.sample(renderer.build_generation_prompt(p.messages), 1, params)
            for p in problems
        ]
    answers = []
    for future in futures:
        message, _ = renderer.parse_response(list((await future).sequences[0].tokens))
        answers.append(message["content"])
    return answers


def _mean_probability(results: list[tuple[float, float]]) -> float:
    return statistics.fmean(p for p, _ in results)


def held_out_problems(config: RLConfig) -> list[Problem]:
    """An RL run's held-out prompts, as rl.main picks them."""
    if config.eval_dataset is not None:
        return load_problems(config.eval_dataset)
    return split_train_eval(load_problems(config.dataset), config.eval_fraction, config.seed)[1]
