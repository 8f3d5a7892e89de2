"""RLHF: SL on demonstrations, a reward model on preference pairs, then RL against its scores.

What it computes. Three ordinary runs in sub-directories of one run directory, each resuming
on its own from its checkpoints.jsonl:

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
   after the stage from greedy answers: `eval_win_rate_vs_sl`, P(RL's answer beats SL's),
   and, when every prompt has a "reference" answer, `eval_judge_score_sl` and
   `eval_judge_score_rl`, P(the answer beats the reference) for each policy.

`<run>/stages.json` links the three: each stage's directory, config, steps, final checkpoint
and final metrics. When the pipeline is started again, a stage recorded there with the same
config and whose checkpoints.jsonl still ends at the recorded step is not run again; any
other stage runs, resuming from its own checkpoints. (A finished stage is not re-run because
an earlier one changed: start a new run directory for that.)
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, StrictInt, model_validator
from tinker import types

from thinker.algorithms import rl, sl
from thinker.algorithms.bounds import MAX_LORA_RANK, MAX_SEED, STRICT_NUMBERS
from thinker.algorithms.common import RunResult, make_service
from thinker.algorithms.reward_model import JudgeReward, train_reward_model
from thinker.algorithms.reward_model_config import RewardModelConfig
from thinker.algorithms.rl_config import RLConfig
from thinker.algorithms.sl_config import SLConfig
from thinker.data import split_train_eval
from thinker.data.problems import load_problems
from thinker.engine import ServiceClient
from thinker.renderers import Renderer, renderer_for
from thinker.rewards import Problem, build_reward
from thinker.runs import CHECKPOINTS_FILE, MetricsLogger, RunLogger, read_jsonl

__all__ = ["STAGES_FILE", "RLHFConfig", "compare_policies", "greedy_answers", "main"]

STAGES_FILE = "stages.json"
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
                reward = _as_dict(section.get("reward")) or {}
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


async def main(
    config: RLHFConfig, service: ServiceClient | None = None, logger: MetricsLogger | None = None
) -> RunResult:
    """Run (or finish) the three stages; returns the final policy's run result.

    Without a `logger`, each stage logs to its own directory's metrics.jsonl; with one, every
    stage logs to it, after a "stage" event naming the stage.
    """
    run_dir = Path(config.log_path)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config.model_dump(mode="json")))
    service = service or make_service(config, run_dir)  # type: ignore[arg-type]
    events = logger or RunLogger(run_dir, echo=True)
    stages = _read_stages(run_dir)

    # Stage 1: SL on the demonstrations.
    sl_result = _finished(stages, "sl", config.sl)
    if sl_result is None:
        events.log_event("stage", {"name": "sl", "run_dir": str(config.sl.log_path)})
        sl_result = await sl.main(config.sl, service, logger)
        _record(run_dir, stages, "sl", config.sl, sl_result)

    # Stage 2: the reward model, a pairwise judge trained from the base model.
    rm_result = _finished(stages, "rm", config.rm)
    if rm_result is None:
        events.log_event("stage", {"name": "rm", "run_dir": str(config.rm.log_path)})
        rm_result = await train_reward_model(config.rm, service, logger)
        _record(run_dir, stages, "rm", config.rm, rm_result)

    # Stage 3: RL from SL's final state, each group scored by the judge.
    rl_config = config.rl.model_copy(update={"init_from": sl_result.state_path})
    rl_result = _finished(stages, "rl", rl_config)
    if rl_result is None:
        events.log_event("stage", {"name": "rl", "run_dir": str(rl_config.log_path)})
        judge = await _judge(service, config, rm_result)
        reward_fn = build_reward(rl_config.reward, judge=judge)
        rl_result = await rl.main(rl_config, service, logger, reward_fn=reward_fn)
        # The judge's verdict on held-out prompts: RL's greedy answers against SL's.
        held_out = _held_out_problems(rl_config)
        policy = await service.create_sampling_client(model_path=rl_result.sampler_path)
        baseline = await service.create_sampling_client(model_path=sl_result.sampler_path)
        verdict = await compare_policies(judge, held_out, policy, baseline, rl_config.max_tokens)
        events.log_event("judge_eval", verdict)
        rl_result.final_metrics |= verdict
        _record(run_dir, stages, "rl", rl_config, rl_result)

    rm_evals = {k: v for k, v in rm_result.final_metrics.items() if k.startswith("rm_eval")}
    return RunResult(
        rl_result.steps,
        {**rl_result.final_metrics, **rm_evals},
        rl_result.state_path,
        rl_result.sampler_path,
    )


async def compare_policies(
    judge: JudgeReward, problems: list[Problem], policy: Any, baseline: Any, max_tokens: int
) -> dict[str, float]:
    """How the judge rates `policy` against `baseline` on `problems`, by greedy answers.

    Returns:
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
    verdict = {"eval_win_rate_vs_sl": _mean_probability(await judge.compare_async(head_to_head))}
    references = [p.row.get("reference", p.answer) for p in problems]
    if all(isinstance(r, str) and r for r in references):
        for name, texts in (("rl", answers), ("sl", baseline_answers)):
            pairs = [
                (p.messages, t, r) for p, t, r in zip(problems, texts, references, strict=True)
            ]
            verdict[f"eval_judge_score_{name}"] = _mean_probability(
                await judge.compare_async(pairs)  # type: ignore[arg-type]
            )
    return verdict


async def greedy_answers(
    sampler: Any, renderer: Renderer, problems: list[Problem], max_tokens: int
) -> list[str]:
    """Each problem's greedy (temperature 0) answer, as the renderer parses it."""
    params = types.SamplingParams(
        max_tokens=max_tokens, temperature=0.0, stop=renderer.get_stop_sequences()
    )
    futures = [
        sampler.sample(renderer.build_generation_prompt(p.messages), 1, params) for p in problems
    ]
    answers = []
    for future in futures:
        message, _ = renderer.parse_response(list((await future).sequences[0].tokens))
        answers.append(message["content"])
    return answers


def _mean_probability(results: list[tuple[float, float]]) -> float:
    return statistics.fmean(p for p, _ in results)


def _held_out_problems(config: RLConfig) -> list[Problem]:
    """The RL stage's held-out prompts, as rl.main picks them."""
    if config.eval_dataset is not None:
        return load_problems(config.eval_dataset)
    return split_train_eval(load_problems(config.dataset), config.eval_fraction, config.seed)[1]


async def _judge(service: ServiceClient, config: RLHFConfig, rm_result: RunResult) -> JudgeReward:
    """The RL reward: the judge's final sampler weights, read with the judge's renderer."""
    sampler = await service.create_sampling_client(model_path=rm_result.sampler_path)
    tokenizer = sampler.get_tokenizer()
    renderer = renderer_for(config.renderer, config.base_model, tokenizer)
    return JudgeReward(sampler, renderer, config.rm.max_length)


def _read_stages(run_dir: Path) -> dict[str, Any]:
    path = run_dir / STAGES_FILE
    if not path.exists():
        return {}
    stages: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["stages"]
    return stages


def _finished(stages: dict[str, Any], name: str, stage_config: BaseModel) -> RunResult | None:
    """The recorded result of a stage that already ran to its end with this config, else None."""
    entry = stages.get(name)
    if entry is None or entry["config"] != stage_config.model_dump(mode="json"):
        return None
    checkpoints = read_jsonl(Path(entry["run_dir"]) / CHECKPOINTS_FILE)
    if not checkpoints or checkpoints[-1]["step"] != entry["steps"]:
        return None
    return RunResult(
        entry["steps"], entry["final_metrics"], entry["state_path"], entry["sampler_path"]
    )


def _record(
    run_dir: Path, stages: dict[str, Any], name: str, stage_config: BaseModel, result: RunResult
) -> None:
    """Add a finished stage to stages.json (written whole, then renamed into place)."""
    stages[name] = {
        "run_dir": str(stage_config.log_path),  # type: ignore[attr-defined]
        "steps": result.steps,
        "state_path": result.state_path,
        "sampler_path": result.sampler_path,
        "final_metrics": result.final_metrics,
        "config": stage_config.model_dump(mode="json"),
    }
    tmp = run_dir / (STAGES_FILE + ".tmp")
    tmp.write_text(json.dumps({"algorithm": "rlhf", "stages": stages}, indent=2) + "\n")
    tmp.replace(run_dir / STAGES_FILE)
