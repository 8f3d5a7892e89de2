"""The train stage: one algorithm in the run directory, or stages, each from the one before.

`training:` with one algorithm trains in the run directory itself. The stages form (a
`stages:` list, or `algorithm: rlhf`, which is the stages sl -> rm -> rl) trains each stage
in `<run>/<stage name>/`: the first from its `init_from` (or a fresh adapter), each later
policy stage from the previous policy stage's final training state (`init_from` = its
`state_path`), and a DPO stage with that stage's final sampler weights as its frozen
reference (unless it names its own `reference_path`): DPO's reference is the policy it starts
from. An rm stage trains a judge from the base model, owing nothing to the policy it will
score; a later rl stage whose reward is `reward_model` is scored by it, and after that stage
the judge compares the new policy's greedy answers on held-out prompts with the previous
policy's (`judge_eval`: `eval_win_rate_vs_<previous stage>` and the judge's score of each
against the reference answers).

Every stage's engine keeps its checkpoints in the run directory (the local engine's storage
directory), so one stage's `tinker://` paths resolve in the next and in a resumed run, as
`tinker://` paths do on Tinker.

Starting a run again resumes it: the stages its metadata records as passed are skipped (their
final checkpoint feeds the next stage), and an interrupted stage resumes from the last line
of its own checkpoints.jsonl, as a one-algorithm run does. A passed stage whose settings
have changed since is refused rather than skipped: its checkpoint no longer matches the file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thinker.algorithms import batch, evaluation, review
from thinker.algorithms.common import RunResult, make_service
from thinker.algorithms.rlhf import compare_policies, held_out_problems
from thinker.engine import ServiceClient
from thinker.errors import ConfigError, ThinkerError
from thinker.pipeline.config import (
    BatchRun,
    DPOTraining,
    EvalRun,
    JobSection,
    PipelineConfig,
    ReviewRun,
    RLHFTraining,
    RLTraining,
    RMTraining,
    StageSection,
    TrainingSection,
)
from thinker.pipeline.metadata import RunMetadata, section_fingerprint
from thinker.pipeline.train import Judge, train_section
from thinker.runs import MetricsLogger, RunDir


async def train_stages(config: PipelineConfig, run: RunDir, meta: RunMetadata) -> RunResult:
    """The train stage of `thinker train` and `thinker run`."""
    stages = config.stage_sections()
    if stages is None:
        section = config.final
        assert not isinstance(section, RLHFTraining)  # rlhf has stages
        return await train_section(section, run.path, make_service(section, run.path))
    return await run_stages(stages, run, meta, where=config.where)


async def train_job(section: JobSection, run: RunDir, logger: MetricsLogger) -> RunResult:
    """A job's training: its one algorithm, or the stages of an rlhf job (their records in
    the metadata.json its worker wrote, so that a resumed job skips the finished ones); or a
    batch job's work, which trains nothing."""
    if isinstance(section, BatchRun):
        return await batch.main(section.to_run_config(run.path), logger)
    if isinstance(section, EvalRun):
        return await evaluation.main(section.to_run_config(run.path), logger)
    if isinstance(section, ReviewRun):
        return await review.main(section.to_run_config(run.path), logger)
    if not isinstance(section, RLHFTraining):
        service = make_service(section, run.path)
        return await train_section(section, run.path, service, logger=logger)
    meta = RunMetadata.load(run.path)
    stages = section.stages()
    meta.plan_training_stages(stages)
    check_stage_settings(stages, meta)
    return await run_stages(stages, run, meta, logger)


async def run_stages(
    stages: list[StageSection],
    run: RunDir,
    meta: RunMetadata,
    logger: MetricsLogger | None = None,
    where: Callable[[Any], str] = lambda stage: f"stage {stage.name}",
) -> RunResult:
    """Each stage in turn: skipped if it finished before, else trained from the one before.

    Returns the result of the last policy stage (sl, dpo, rl), with the held-out figures of
    the judge that scored it; a run of rm stages only returns the last judge's.

    A stage that fails raises its own error, and its record in the metadata says "failed".
    """
    service = make_service(stages[0], run.path)  # the stages share backend and base model
    policy: tuple[StageSection, RunResult] | None = None  # the latest policy stage's
    judge: tuple[RMTraining, RunResult] | None = None  # the latest rm stage's
    for stage in stages:
        done = finished_result(meta, stage)
        if done is not None:
            print(f"[thinker] train: stage {stage.name} finished before; skipped", flush=True)
        judged_by = Judge.of(*judge) if judge is not None and _judged(stage) else None
        result = done or await _train_stage(
            stage, run, service, meta, policy, judged_by, logger, where
        )
        if isinstance(stage, RMTraining):
            judge = (stage, result)
        else:
            policy = (stage, result)
    if policy is None:
        assert judge is not None  # a list of stages is never empty
        return judge[1]
    final = policy[1]
    if judge is not None and _judged(policy[0]):
        rm_evals = {k: v for k, v in judge[1].final_metrics.items() if k.startswith("rm_eval")}
        final = RunResult(
            final.steps, {**final.final_metrics, **rm_evals}, final.state_path, final.sampler_path
        )
    return final


async def _train_stage(
    stage: StageSection,
    run: RunDir,
    service: ServiceClient,
    meta: RunMetadata,
    previous: tuple[StageSection, RunResult] | None,
    judge: Judge | None,
    logger: MetricsLogger | None,
    where: Callable[[Any], str],
) -> RunResult:
    """Train one stage in its directory from the policy stage before it (`previous`),
    recorded in the metadata as it starts and ends."""
    stage_run = run.stage(str(stage.name))
    overrides = stage_overrides(stage, previous[1] if previous else None)
    init_from = overrides.get("init_from", stage.init_from)
    resuming = stage_run.checkpoints.is_file()
    start = "its checkpoints.jsonl" if resuming else init_from
    print(
        f"[thinker] train: stage {stage.name} ({where(stage)}, {stage.algorithm}) in "
        f"{stage_run.path}" + (f", from {start}" if start else ""),
        flush=True,
    )
    meta.start_training_stage(
        str(stage.name),
        run_dir=str(stage_run.path),
        init_from=init_from,
        resumed=resuming,
        config_fingerprint=section_fingerprint(stage),
    )
    if logger is not None:  # a job's logger: every stage's metrics in one stream, tagged
        logger.log_event("stage", {"name": stage.name, "run_dir": str(stage_run.path)})
    try:
        result = await train_section(stage, stage_run.path, service, judge, logger, **overrides)
        if judge is not None and previous is not None:
            verdict = await _judge_eval(stage, service, judge, result, previous)
            if logger is not None:
                logger.log_event("judge_eval", verdict)
            result.final_metrics |= verdict
    except KeyboardInterrupt:
        meta.finish_training_stage("interrupted")
        raise
    except Exception as e:
        meta.finish_training_stage("failed", error=_describe(e))
        raise
    meta.finish_training_stage(
        "passed",
        steps=result.steps,
        state_path=result.state_path,
        sampler_path=result.sampler_path,
        final_metrics=result.final_metrics,
    )
    return result


async def _judge_eval(
    stage: StageSection,
    service: ServiceClient,
    judge: Judge,
    result: RunResult,
    previous: tuple[StageSection, RunResult],
) -> dict[str, float]:
    """The judge's verdict on held-out prompts: the new policy's greedy answers against the
    previous policy's, and each against the reference answers (`compare_policies`)."""
    assert isinstance(stage, RLTraining)  # only an rl stage is scored by a judge
    reward = await judge.reward(service)
    policy = await service.create_sampling_client(model_path=result.sampler_path)
    baseline = await service.create_sampling_client(model_path=previous[1].sampler_path)
    problems = held_out_problems(stage)
    names = (stage.algorithm, previous[0].algorithm)
    verdict = await compare_policies(reward, problems, policy, baseline, stage.max_tokens, names)
    shown = " ".join(f"{k}={v:.3f}" for k, v in verdict.items())
    print(f"[thinker] judge_eval: {shown or 'no held-out prompts'}", flush=True)
    return verdict


def _judged(stage: StageSection) -> bool:
    """Whether `stage` is an rl stage scored by a reward model."""
    return isinstance(stage, RLTraining) and stage.reward.type == "reward_model"


def _describe(e: BaseException) -> str:
    return str(e) if isinstance(e, ThinkerError) else f"{type(e).__name__}: {e}"


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
    check_stage_settings(config.stage_sections() or [], meta, config.where)


def check_stage_settings(
    stages: list[StageSection],
    meta: RunMetadata,
    where: Callable[[Any], str] = lambda stage: f"stage {stage.name}",
) -> None:
    """`check_finished_stages` for a list of stages (see there)."""
    unfinished: str | None = None
    for stage in stages:
        record = meta.training_stage(str(stage.name))
        if record.get("status") != "passed":
            unfinished = unfinished or str(stage.name)
            continue
        named = f"stage {stage.name!r} ({where(stage)}) of run {meta.run_dir.name}"
        if record.get("config_fingerprint") != section_fingerprint(stage):
            raise ConfigError(
                f"{named} finished with other settings than the config now gives it; start "
                "a new run (another --run-name) or restore them"
            )
        if unfinished is not None:
            raise ConfigError(
                f"{named} finished, but stage {unfinished!r} before it has not: the stages "
                "changed order; start a new run (another --run-name)"
            )
