"""The train stage: one algorithm's `main`, or each stage of the stages form in turn.

`training:` trains in the run directory itself. The stages form trains each stage in
`<run>/<stage name>/`: the first from its `init_from` (or a fresh adapter), each later one
from the previous stage's final training state (`init_from` = its `state_path`), and a DPO
stage with the previous stage's final sampler weights as its frozen reference (unless it
names its own `reference_path`): DPO's reference is the policy it starts from.

Every stage's engine keeps its checkpoints in the run directory (the local engine's storage
directory), so one stage's `thinker://` paths resolve in the next and in a resumed run, as
`tinker://` paths do on Tinker.

Starting a run again resumes it: the stages its metadata records as passed are skipped (their
final checkpoint feeds the next stage), and an interrupted stage resumes from the last line
of its own checkpoints.jsonl, as a one-algorithm run does. A passed stage whose settings
have changed since is refused rather than skipped: its checkpoint no longer matches the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, assert_never

from thinker.algorithms import dpo, reward_model, rl, rlhf, sl
from thinker.algorithms.common import RunResult, make_service
from thinker.errors import ConfigError
from thinker.pipeline.config import (
    DPOTraining,
    PipelineConfig,
    RLHFTraining,
    RLTraining,
    RMTraining,
    SLTraining,
    TrainingSection,
)
from thinker.pipeline.metadata import RunMetadata, section_fingerprint
from thinker.renderers import renderer_for
from thinker.runs import MetricsLogger


async def train_section(
    section: TrainingSection,
    run_dir: Path,
    storage_dir: Path,
    judge_path: str | None = None,
    logger: MetricsLogger | None = None,
    **overrides: Any,
) -> RunResult:
    """Run `section`'s algorithm writing into `run_dir`, its checkpoints kept in `storage_dir`.

    Args:
        section: The training section (or stage) to run.
        run_dir: Where metrics.jsonl, checkpoints.jsonl and config.yaml go.
        storage_dir: The local engine's storage directory (ignored on Tinker).
        judge_path: An rm stage's final sampler weights: the judge of an rl stage whose
            reward is `reward_model`.
        logger: Where metrics and events go (default: the run directory's metrics.jsonl,
            echoed to stdout); the job worker passes one that also feeds events.jsonl.
        **overrides: Settings the pipeline sets, e.g. `init_from`.
    """
    service = make_service(section, storage_dir)
    if isinstance(section, SLTraining):
        return await sl.main(section.to_run_config(run_dir, **overrides), service, logger)
    if isinstance(section, DPOTraining):
        return await dpo.main(section.to_run_config(run_dir, **overrides), service, logger)
    if isinstance(section, RLTraining):
        judge = await _judge(service, section, judge_path)
        config = section.to_run_config(run_dir, **overrides)
        return await rl.main(config, service, logger, reward_fn=judge)
    if isinstance(section, RMTraining):
        config = section.to_run_config(run_dir)
        return await reward_model.train_reward_model(config, service, logger)
    if isinstance(section, RLHFTraining):
        return await rlhf.main(section.to_run_config(run_dir, **overrides), service, logger)
    assert_never(section)


async def _judge(
    service: Any, section: RLTraining, judge_path: str | None
) -> reward_model.JudgeReward | None:
    """The judge of a `reward_model` reward: a sampler of the latest rm stage's weights."""
    if section.reward.type != "reward_model":
        return None
    if judge_path is None:
        raise ConfigError(
            f"stage {section.name}: reward type reward_model needs an earlier `algorithm: rm` "
            "stage (or use `algorithm: rlhf`)"
        )
    sampler = await service.create_sampling_client(model_path=judge_path)
    tokenizer = sampler.get_tokenizer()
    renderer = renderer_for(section.renderer, section.base_model, tokenizer)
    return reward_model.JudgeReward(sampler, renderer)


def stage_overrides(section: TrainingSection, previous: RunResult | None) -> dict[str, Any]:
    """How a stage continues the policy stage before it (nothing for the first stage, nor for
    an rm stage, whose judge starts from the base model)."""
    if previous is None or isinstance(section, RMTraining):
        return {}
    if previous.state_path is None:
        raise ConfigError("the previous stage ended without a checkpoint to continue from")
    overrides: dict[str, Any] = {"init_from": previous.state_path}
    if isinstance(section, DPOTraining) and section.reference_path is None:
        overrides["reference_path"] = previous.sampler_path
    return overrides


def finished_result(meta: RunMetadata, section: TrainingSection) -> RunResult | None:
    """The result a passed stage recorded (None if it has not passed)."""
    record = meta.training_stage(str(section.name))
    if record.get("status") != "passed":
        return None
    return RunResult(
        steps=record.get("steps", 0),
        final_metrics=record.get("final_metrics", {}),
        state_path=record.get("state_path"),
        sampler_path=record.get("sampler_path"),
    )


def check_finished_stages(config: PipelineConfig, meta: RunMetadata) -> None:
    """Refuse to resume a run whose finished stages no longer match the config.

    Raises:
        ConfigError: A passed stage's settings changed, or it comes after a stage that has
            not passed (its starting point would have moved).
    """
    unfinished: str | None = None
    for stage in config.stages or []:
        record = meta.training_stage(str(stage.name))
        if record.get("status") != "passed":
            unfinished = unfinished or str(stage.name)
            continue
        where = f"stage {stage.name!r} ({config.where(stage)}) of run {meta.run_dir.name}"
        if record.get("config_fingerprint") != section_fingerprint(stage):
            raise ConfigError(
                f"{where} finished with other settings than the config now gives it; start "
                "a new run (another --run-name) or restore them"
            )
        if unfinished is not None:
            raise ConfigError(
                f"{where} finished, but stage {unfinished!r} before it has not: the stages "
                "changed order; start a new run (another --run-name)"
            )
