"""Running a pipeline: validate, then train, then evaluate, recorded in the run directory.

`run_pipeline` runs the stages a command asks for (`validate`, `train`, `eval` or `run`) in
`<runs_dir>/<run name>/`, writing metadata.json as it goes. A stage that fails raises
`StageFailed` naming the stage, which `thinker` turns into its exit code. The training stage
itself (one algorithm, or a list of stages each from the previous one) is `pipeline.stages`.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from thinker.errors import ConfigError, ThinkerError
from thinker.pipeline.config import NAME_PATTERN, PipelineConfig, SLTraining, StageSection
from thinker.pipeline.evaluate import generates, held_out_metrics, run_evaluation
from thinker.pipeline.metadata import RunMetadata
from thinker.pipeline.stages import check_finished_stages, train_stages
from thinker.pipeline.validate import validate
from thinker.runs import CheckpointRecord, RunDir

Command = Literal["validate", "train", "eval", "run"]
Failure = Literal["config", "validate", "train", "eval"]

# The stages after validation that each command runs.
WORK: dict[Command, tuple[str, ...]] = {
    "validate": (),
    "train": ("train",),
    "eval": ("eval",),
    "run": ("train", "eval"),
}


class StageFailed(Exception):
    """A stage of the pipeline failed (`stage` says which; "config" before any ran)."""

    def __init__(self, stage: Failure, message: str) -> None:
        super().__init__(message)
        self.stage = stage
        self.message = message


def run_pipeline(
    config: PipelineConfig,
    command: Command,
    run_name: str | None = None,
    skip_validation: bool = False,
) -> None:
    """Run `command`'s stages of `config` in the run `run_name` (None: a new run; for `eval`,
    the latest run of the config; for `validate`, no run at all).

    Raises:
        StageFailed: A stage failed; metadata.json says so too.
        KeyboardInterrupt: Interrupted; the run is recorded as interrupted.
    """
    work = WORK[command]
    name = resolve_run_name(config, command, run_name)
    if name is None:  # `validate` without a run name keeps no record
        _validate_stage(config, None)
        return
    run = RunDir(config.runs_dir / name)
    if work == ("eval",):
        last_checkpoint(RunDir(config.final_dir(run.path)))  # fail before the test suite runs
    meta = RunMetadata.open(run.path, name, config, command)
    print(f"[thinker] run {name}: {run.path}", flush=True)
    if "train" in work and config.stages is not None:
        try:
            check_finished_stages(config, meta)
        except ConfigError as e:
            meta.finish(2)
            raise StageFailed("config", str(e)) from None
    try:
        if skip_validation:
            print("[thinker] validate: skipped (--skip-validation)", flush=True)
            meta.skip_stage("validate", "--skip-validation")
        else:
            _validate_stage(config, meta)
        if "train" in work:
            _train_stage(config, run, meta)
        if "eval" in work:
            _eval_stage(config, run, meta)
    except StageFailed as e:
        meta.finish(EXIT_CODES[e.stage])
        raise
    except KeyboardInterrupt:
        meta.finish(EXIT_INTERRUPTED, status="interrupted")
        raise
    meta.finish(0)


# The exit codes metadata.json records (and `thinker` exits with).
EXIT_CODES: dict[Failure, int] = {"config": 2, "validate": 3, "train": 4, "eval": 5}
EXIT_INTERRUPTED = 130


def resolve_run_name(config: PipelineConfig, command: Command, run_name: str | None) -> str | None:
    """The run to work in: `run_name`, the latest run of the config (eval), or a new name.

    Raises:
        StageFailed: `run_name` is not a directory name (config), or `eval` has no run (eval).
    """
    if run_name is not None:
        if not NAME_PATTERN.match(run_name):
            raise StageFailed(
                "config", f"--run-name {run_name!r}: use letters, digits, '.', '_' or '-'"
            )
        return run_name
    if command == "validate":
        return None
    if command == "eval":
        return _latest_run(config)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name, n = f"{config.name}-{stamp}", 2
    while (config.runs_dir / name).exists():
        name, n = f"{config.name}-{stamp}-{n}", n + 1
    return name


def _latest_run(config: PipelineConfig) -> str:
    """The most recently checkpointed run of this config in runs_dir."""
    runs_dir: Path = config.runs_dir
    candidates = runs_dir.glob(f"{config.name}-*") if runs_dir.is_dir() else []
    checkpoints = {d.name: RunDir(config.final_dir(d)).checkpoints for d in candidates}
    found = {name: path for name, path in checkpoints.items() if path.is_file()}
    if not found:
        raise StageFailed(
            "eval",
            f"no run of '{config.name}' with a checkpoint in {runs_dir}: "
            f"run `thinker train --config {config.source}` first",
        )
    return max(found, key=lambda name: found[name].stat().st_mtime)


def last_checkpoint(run: RunDir) -> CheckpointRecord:
    """The run's last checkpoint that has sampler weights.

    Raises:
        StageFailed: It has none (eval).
    """
    records = [r for r in run.checkpoint_records() if r.sampler_path]
    if not records:
        where = "does not exist" if not run.path.is_dir() else "has no checkpoint"
        raise StageFailed(
            "eval",
            f"run directory {run.path} {where}: run `thinker train` first "
            "(or pass the --run-name of a trained run)",
        )
    return records[-1]


def _validate_stage(config: PipelineConfig, meta: RunMetadata | None) -> None:
    if meta is not None:
        meta.start_stage("validate")
    try:
        report = validate(config)
    except Exception as e:
        if meta is not None:
            meta.finish_stage("validate", "failed", error=describe(e))
        raise StageFailed("validate", f"validation failed: {describe(e)}") from e
    if meta is not None:
        status = "passed" if report.ok else "failed"
        meta.finish_stage(
            "validate", status, metrics=report.metrics(), error=report.failure() or None
        )
    if not report.ok:
        raise StageFailed(
            "validate",
            f"validation failed: {report.failure()}; "
            "fix it, or pass --skip-validation (debug only)",
        )
    print("[thinker] validate: passed", flush=True)


def _train_stage(config: PipelineConfig, run: RunDir, meta: RunMetadata) -> None:
    meta.start_stage("train")
    algorithms = " -> ".join(str(s.name or s.algorithm) for s in config.sections)
    print(f"[thinker] train: {algorithms} on {config.backend}", flush=True)
    try:
        result = asyncio.run(train_stages(config, run, meta))
    except Exception as e:
        meta.finish_stage("train", "failed", error=describe(e))
        where = f"{config.backend} backend, config {config.source}"
        stage = _failed_stage(config, meta)
        if stage is not None:
            where = f"in stage {stage.name} ({config.where(stage)}: {stage.algorithm}, {where}"
        else:
            where = f"({where}"
        raise StageFailed("train", f"training failed {where}): {describe(e)}") from e
    meta.finish_stage(
        "train",
        "passed",
        metrics=result.final_metrics,
        steps=result.steps,
        state_path=result.state_path,
        sampler_path=result.sampler_path,
    )
    print(f"[thinker] train: {result.steps} steps; checkpoint {result.sampler_path}", flush=True)


def _failed_stage(config: PipelineConfig, meta: RunMetadata) -> StageSection | None:
    """The stage of several whose record says it failed, if any."""
    for stage in config.stage_sections() or []:
        if meta.training_stage(str(stage.name)).get("status") == "failed":
            return stage
    return None


def _eval_stage(config: PipelineConfig, run: RunDir, meta: RunMetadata) -> None:
    """Generation eval after SL (or on a named set); after DPO and RL, also the held-out
    figures their training logged."""
    final = config.final
    checkpoint = last_checkpoint(RunDir(config.final_dir(run.path)))
    meta.start_stage("eval")
    metrics: dict[str, float] = {}
    details: dict[str, Any] = {}
    if not isinstance(final, SLTraining):
        first, metrics = held_out_metrics(config, run.path)
        details.update(held_out_from_training=True, held_out_first_logged=first)
        shown = " ".join(f"{k}={first.get(k, v):.4g}->{v:.4g}" for k, v in metrics.items())
        print(
            f"[thinker] eval: {final.algorithm} held-out metrics logged by training, first -> "
            f"last: {shown or 'none (nothing held out)'}",
            flush=True,
        )
    if generates(config):
        generated, details["output"] = _generation_eval(config, run, meta, checkpoint)
        metrics.update(generated)
    else:
        print(
            "[thinker] eval: no answers generated (set evaluation.dataset to a set of chat "
            "rows to score exact match)",
            flush=True,
        )
    meta.finish_stage(
        "eval",
        "passed",
        metrics=metrics,
        checkpoint=checkpoint.sampler_path,
        checkpoint_step=checkpoint.step,
        **details,
    )


def _generation_eval(
    config: PipelineConfig, run: RunDir, meta: RunMetadata, checkpoint: CheckpointRecord
) -> tuple[dict[str, float], str]:
    """Generated answers scored on the evaluation set (and the base model's, if asked)."""
    output: Path = config.evaluation.output or run.eval_output
    try:
        metrics = run_evaluation(config, run.path, checkpoint.sampler_path, output)
        if config.evaluation.compare_base:
            base_output = output.with_name(f"{output.stem}_base{output.suffix}")
            base = run_evaluation(config, run.path, None, base_output)
            metrics.update({f"base_{k}": v for k, v in base.items() if k != "num_samples"})
    except Exception as e:
        meta.finish_stage("eval", "failed", error=describe(e))
        raise StageFailed("eval", f"evaluation failed: {describe(e)}") from e
    shown = " ".join(f"{k}={v:.4g}" for k, v in metrics.items())
    print(f"[thinker] eval: {shown} ({output})", flush=True)
    return metrics, str(output)


def describe(e: BaseException) -> str:
    """A failure for a person: a Thinker error's own message, else its type and message."""
    return str(e) if isinstance(e, ThinkerError) else f"{type(e).__name__}: {e}"
