"""The `thinker` command: validate, train and evaluate a declarative YAML pipeline.

    thinker validate --config pipeline.yaml            # test suite + dataset check
    thinker train    --config pipeline.yaml            # validate, then train
    thinker eval     --config pipeline.yaml [--run-name NAME]  # validate, then evaluate
    thinker run      --config pipeline.yaml            # validate -> train -> eval
    thinker serve    [--host H] [--port P] [--data-dir DIR]  # the platform server
    thinker token    create --name NAME | list | revoke ID   # API tokens for the server
    thinker datasets inspect FILE [--kind K] [--base-model M]  # detect, validate, stats, preview
    thinker datasets import SOURCE [--split S] [--limit N]     # a Hugging Face dataset

`training.algorithm` (sl, dpo, rl, rlhf) picks the training loop; a `stages:` list runs several
in a row, each from the previous one's final checkpoint (see thinker.pipeline.config).

Common options: --backend local|tinker (overrides the config's backend), --skip-validation
(debug only: train/eval/run refuse to continue after a failed validation otherwise),
--run-name NAME (default <config name>-<UTC timestamp>; `eval` defaults to the latest run
of the config). A run lives in <runs_dir>/<run name>/ with metadata.json, metrics.jsonl,
checkpoints.jsonl and eval.jsonl; with stages, each stage's metrics.jsonl and
checkpoints.jsonl are in <run>/<stage name>/, and `train --run-name NAME` again skips the
stages that finished and resumes the one that was interrupted.

Exit codes:
    0  success
    1  internal error (a bug; THINKER_DEBUG=1 shows the traceback)
    2  config error: bad YAML, schema, missing files, secrets in the file, missing
       TINKER_API_KEY, finished stages of a resumed run that no longer match the config,
       or a bad command line
    3  validation failed: the test suite or the dataset check
    4  training failed
    5  evaluation failed, or there is no checkpoint to evaluate
    130  interrupted (Ctrl-C or SIGTERM); the run is marked "interrupted" and `train` with
       the same --run-name resumes it from its last checkpoint

Errors go to stderr as `[thinker] error: ...`, without tracebacks unless THINKER_DEBUG=1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the pipeline imports torch-adjacent packages; `--help` should not wait
    from thinker.algorithms.common import RunResult
    from thinker.pipeline.config import PipelineConfig, TrainingSection
    from thinker.pipeline.metadata import RunMetadata

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_CONFIG = 2
EXIT_VALIDATION = 3
EXIT_TRAINING = 4
EXIT_EVALUATION = 5
EXIT_INTERRUPTED = 130

_EXIT_CODES_HELP = """\
exit codes:
  0  success
  1  internal error (a bug; THINKER_DEBUG=1 shows the traceback)
  2  config error (bad YAML, schema, missing files, secrets in the file,
     missing TINKER_API_KEY, finished stages that no longer match the config)
     or a bad command line
  3  validation failed (test suite or dataset check)
  4  training failed
  5  evaluation failed, or no checkpoint to evaluate
  130  interrupted (Ctrl-C or SIGTERM); `train --run-name NAME` resumes it
"""


# Commands with parsers of their own, which `main` hands the command line to before parsing it
# (their modules load only when used). The top-level parser lists them for --help alone.
_OWN_PARSERS = {
    "serve": "start the platform server: REST API, Socket.IO and the dashboard",
    "token": "create, list or revoke the server's API tokens",
    "datasets": "inspect a dataset file, or import a Hugging Face dataset",
}
_DATASETS_COMMANDS = {
    "inspect": "detect, validate and preview a dataset file as training will see it",
    "import": "import a Hugging Face dataset (hub id or local directory)",
}

# The stages after validation that each command runs.
_WORK: dict[str, list[str]] = {
    "validate": [],
    "train": ["train"],
    "eval": ["eval"],
    "run": ["train", "eval"],
}


class _Exit(Exception):
    """Stops a command with an exit code and a message for stderr."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def main(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (default: sys.argv[1:]) and return the exit code."""
    args_list = sys.argv[1:] if argv is None else argv
    if args_list[:1] == ["serve"]:
        return serve_main(args_list[1:])
    if args_list[:1] == ["token"]:
        from thinker.server.tokens import token_main

        return token_main(args_list[1:])
    if args_list[:2] == ["datasets", "inspect"]:
        from thinker.data.inspect_cli import inspect_main

        return inspect_main(args_list[2:])
    if args_list[:2] == ["datasets", "import"]:
        from thinker.data.hf_import import import_main

        return import_main(args_list[2:])
    parser = build_parser()
    signal.signal(signal.SIGTERM, _interrupt)  # a killed run is recorded as interrupted
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a usage error (2), already printed by argparse
        return e.code if isinstance(e.code, int) else EXIT_CONFIG
    try:
        return _run(args)
    except _Exit as e:
        _error(e.message, e.__cause__)
        return e.code
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED
    except Exception as e:  # a bug: still no traceback unless asked for
        _error(f"internal error: {type(e).__name__}: {e}", e)
        return EXIT_INTERNAL


def serve_main(argv: list[str]) -> int:
    """`thinker serve`: the platform server (settings from THINKER_* variables and flags)."""
    parser = argparse.ArgumentParser(
        prog="thinker serve",
        description="Start the Thinker platform server: REST API, Socket.IO, dashboard.",
        epilog="Every setting is also an environment variable THINKER_<NAME> "
        "(THINKER_DATABASE_URL, THINKER_REQUIRE_AUTH, THINKER_CORS_ORIGINS, ...).",
    )
    parser.add_argument(
        "--host", help="bind address (default 127.0.0.1; beyond loopback, every call needs a token)"
    )
    parser.add_argument("--port", type=int, help="default 8000")
    parser.add_argument(
        "--data-dir", type=Path, help="database, datasets and runs (default ~/.thinker)"
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a usage error (2), as `main` returns them
        return e.code if isinstance(e.code, int) else EXIT_CONFIG
    import uvicorn

    from thinker.server.app import create_app, settle_gc
    from thinker.server.settings import Settings

    overrides = {k: v for k, v in vars(args).items() if v is not None}
    settings = Settings(**overrides)
    dashboard = Path(__file__).resolve().parents[2] / "frontend" / "dist"
    if settings.static_dir is None and dashboard.is_dir():
        settings.static_dir = dashboard
    url = f"http://{settings.host}:{settings.port}"
    print(f"[thinker] serving on {url} (data in {settings.data_dir}); Ctrl-C stops it", flush=True)
    app = create_app(settings)
    settle_gc()
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning")
    return EXIT_OK


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", required=True, type=Path, help="the pipeline YAML file")
    common.add_argument("--backend", choices=["local", "tinker"], help="override training.backend")
    common.add_argument(
        "--run-name", help="the run directory's name under runs_dir (default: generated)"
    )
    gated = argparse.ArgumentParser(add_help=False)
    gated.add_argument(
        "--skip-validation",
        action="store_true",
        help="debug only: skip the validate stage (tests and dataset check)",
    )
    parser = argparse.ArgumentParser(
        prog="thinker",
        description="Validate, train and evaluate a post-training pipeline described in YAML.",
        epilog=_EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    helps = {
        "validate": "run the configured test suite and the dataset check",
        "train": "validate, then train",
        "eval": "validate, then evaluate the last checkpoint of a run",
        "run": "validate, train, then evaluate",
    }
    for name, text in helps.items():
        parents = [common] if name == "validate" else [common, gated]
        sub.add_parser(
            name,
            parents=parents,
            help=text,
            description=text,
            epilog=_EXIT_CODES_HELP,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    for name, text in _OWN_PARSERS.items():
        own = sub.add_parser(name, help=text, description=text)
        if name == "datasets":  # `thinker datasets` alone, or --help: which subcommands
            commands = own.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
            for subname, subtext in _DATASETS_COMMANDS.items():
                commands.add_parser(subname, help=subtext, description=subtext)
    return parser


def _run(args: argparse.Namespace) -> int:
    from thinker.errors import ConfigError
    from thinker.pipeline.config import check_backend_environment, load_pipeline_config
    from thinker.pipeline.metadata import RunMetadata

    work = _WORK[args.command]
    try:
        config = load_pipeline_config(args.config, backend=args.backend)
        if work:
            check_backend_environment(config)
        run_name = _run_name(args, config, existing=args.command == "eval")
    except ConfigError as e:
        raise _Exit(EXIT_CONFIG, str(e)) from None
    if run_name is None:  # `validate` without --run-name keeps no record
        _validate_stage(config, None)
        return EXIT_OK
    run_dir = config.runs_dir / run_name
    if work == ["eval"]:
        _last_checkpoint(config.final_dir(run_dir))  # fail before the test suite runs
    meta = RunMetadata.open(run_dir, run_name, config, args.command)
    print(f"[thinker] run {run_name}: {run_dir}", flush=True)
    if "train" in work and config.stages is not None:
        from thinker.pipeline.train import check_finished_stages

        try:
            check_finished_stages(config, meta)
        except ConfigError as e:
            meta.finish(EXIT_CONFIG)
            raise _Exit(EXIT_CONFIG, str(e)) from None
    try:
        if getattr(args, "skip_validation", False):
            print("[thinker] validate: skipped (--skip-validation)", flush=True)
            meta.skip_stage("validate", "--skip-validation")
        else:
            _validate_stage(config, meta)
        if "train" in work:
            _train_stage(config, run_dir, meta)
        if "eval" in work:
            _eval_stage(config, run_dir, meta)
    except _Exit as e:
        meta.finish(e.code)
        raise
    except KeyboardInterrupt:
        meta.finish(EXIT_INTERRUPTED, status="interrupted")
        raise
    meta.finish(EXIT_OK)
    return EXIT_OK


def _run_name(args: argparse.Namespace, config: PipelineConfig, existing: bool) -> str | None:
    """The run to work in: --run-name, the latest run of the config (eval), or a new name."""
    from thinker.errors import ConfigError
    from thinker.pipeline.config import NAME_PATTERN

    if args.run_name is not None:
        if not NAME_PATTERN.match(args.run_name):
            raise ConfigError(f"--run-name {args.run_name!r}: use letters, digits, '.', '_' or '-'")
        return args.run_name
    if args.command == "validate":
        return None
    if existing:
        return _latest_run(config)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name, n = f"{config.name}-{stamp}", 2
    while (config.runs_dir / name).exists():
        name, n = f"{config.name}-{stamp}-{n}", n + 1
    return name


def _latest_run(config: PipelineConfig) -> str:
    """The most recently checkpointed run of this config in runs_dir."""
    from thinker.runs import CHECKPOINTS_FILE

    runs_dir: Path = config.runs_dir
    candidates = [
        d
        for d in (runs_dir.glob(f"{config.name}-*") if runs_dir.is_dir() else [])
        if (config.final_dir(d) / CHECKPOINTS_FILE).is_file()
    ]
    if not candidates:
        raise _Exit(
            EXIT_EVALUATION,
            f"no run of '{config.name}' with a checkpoint in {runs_dir}: "
            f"run `thinker train --config {config.source}` first",
        )
    return max(
        candidates, key=lambda d: (config.final_dir(d) / CHECKPOINTS_FILE).stat().st_mtime
    ).name


def _last_checkpoint(run_dir: Path) -> dict[str, Any]:
    """The last line of the run's checkpoints.jsonl that has sampler weights."""
    from thinker.runs import CHECKPOINTS_FILE, read_jsonl

    records = [r for r in read_jsonl(run_dir / CHECKPOINTS_FILE) if r.get("sampler_path")]
    if not records:
        where = "does not exist" if not run_dir.is_dir() else "has no checkpoint"
        raise _Exit(
            EXIT_EVALUATION,
            f"run directory {run_dir} {where}: run `thinker train` first "
            "(or pass the --run-name of a trained run)",
        )
    return records[-1]


def _validate_stage(config: PipelineConfig, meta: RunMetadata | None) -> None:
    from thinker.pipeline.validate import validate

    if meta is not None:
        meta.start_stage("validate")
    try:
        report = validate(config)
    except Exception as e:
        if meta is not None:
            meta.finish_stage("validate", "failed", error=_describe(e))
        raise _Exit(EXIT_VALIDATION, f"validation failed: {_describe(e)}") from e
    if meta is not None:
        status = "passed" if report.ok else "failed"
        meta.finish_stage(
            "validate", status, metrics=report.metrics(), error=report.failure() or None
        )
    if not report.ok:
        raise _Exit(
            EXIT_VALIDATION,
            f"validation failed: {report.failure()}; "
            "fix it, or pass --skip-validation (debug only)",
        )
    print("[thinker] validate: passed", flush=True)


def _train_stage(config: PipelineConfig, run_dir: Path, meta: RunMetadata) -> None:
    from thinker.pipeline.train import train_section

    meta.start_stage("train")
    algorithms = " -> ".join(str(s.name or s.algorithm) for s in config.sections)
    print(f"[thinker] train: {algorithms} on {config.backend}", flush=True)
    try:
        if config.stages is None:
            result = asyncio.run(train_section(config.final, run_dir, run_dir))
        else:
            result = _train_stages(config, run_dir, meta)
    except _Exit as e:
        meta.finish_stage("train", "failed", error=e.message)
        raise
    except Exception as e:
        meta.finish_stage("train", "failed", error=_describe(e))
        raise _Exit(
            EXIT_TRAINING,
            f"training failed ({config.backend} backend, config {config.source}): {_describe(e)}",
        ) from e
    meta.finish_stage(
        "train",
        "passed",
        metrics=result.final_metrics,
        steps=result.steps,
        state_path=result.state_path,
        sampler_path=result.sampler_path,
    )
    print(f"[thinker] train: {result.steps} steps; checkpoint {result.sampler_path}", flush=True)


def _train_stages(config: PipelineConfig, run_dir: Path, meta: RunMetadata) -> RunResult:
    """Each stage in turn: skipped if it finished before, else trained from the previous one."""
    from thinker.pipeline.train import finished_result

    policy: RunResult | None = None  # the latest policy stage's result (sl, dpo, rl)
    judge: RunResult | None = None  # the latest rm stage's result
    for stage in config.stages or []:
        done = finished_result(meta, stage)
        if done is not None:
            print(f"[thinker] train: stage {stage.name} finished before; skipped", flush=True)
        judge_path = judge.sampler_path if judge is not None else None
        result = done or _train_one_stage(config, run_dir, meta, stage, policy, judge_path)
        if stage.algorithm == "rm":
            judge = result
        else:
            policy = result
    assert policy is not None or judge is not None  # a stages list is never empty
    return policy or judge  # type: ignore[return-value]


def _train_one_stage(
    config: PipelineConfig,
    run_dir: Path,
    meta: RunMetadata,
    stage: TrainingSection,
    previous: RunResult | None,
    judge_path: str | None = None,
) -> RunResult:
    from thinker.pipeline.metadata import section_fingerprint
    from thinker.pipeline.train import stage_overrides, train_section
    from thinker.runs import CHECKPOINTS_FILE

    stage_dir = config.section_dir(run_dir, stage)
    overrides = stage_overrides(stage, previous)
    init_from = overrides.get("init_from", stage.init_from)
    resuming = (stage_dir / CHECKPOINTS_FILE).is_file()
    start = "its checkpoints.jsonl" if resuming else init_from
    print(
        f"[thinker] train: stage {stage.name} ({config.where(stage)}, {stage.algorithm}) in "
        f"{stage_dir}" + (f", from {start}" if start else ""),
        flush=True,
    )
    meta.start_training_stage(
        str(stage.name),
        run_dir=str(stage_dir),
        init_from=init_from,
        resumed=resuming,
        config_fingerprint=section_fingerprint(stage),
    )
    try:
        result = asyncio.run(train_section(stage, stage_dir, run_dir, judge_path, **overrides))
    except Exception as e:
        meta.finish_training_stage("failed", error=_describe(e))
        raise _Exit(
            EXIT_TRAINING,
            f"training failed in stage {stage.name} ({config.where(stage)}: {stage.algorithm}, "
            f"{config.backend} backend, config {config.source}): {_describe(e)}",
        ) from e
    meta.finish_training_stage(
        "passed",
        steps=result.steps,
        state_path=result.state_path,
        sampler_path=result.sampler_path,
        final_metrics=result.final_metrics,
    )
    return result


def _eval_stage(config: PipelineConfig, run_dir: Path, meta: RunMetadata) -> None:
    """Generation eval after SL (or on a named set); after DPO and RL, also the held-out
    figures their training logged."""
    from thinker.pipeline.config import SLTraining
    from thinker.pipeline.evaluate import generates, held_out_metrics

    final = config.final
    checkpoint = _last_checkpoint(config.final_dir(run_dir))
    meta.start_stage("eval")
    metrics: dict[str, float] = {}
    details: dict[str, Any] = {}
    if not isinstance(final, SLTraining):
        first, metrics = held_out_metrics(config, run_dir)
        details.update(held_out_from_training=True, held_out_first_logged=first)
        shown = " ".join(f"{k}={first.get(k, v):.4g}->{v:.4g}" for k, v in metrics.items())
        print(
            f"[thinker] eval: {final.algorithm} held-out metrics logged by training, first -> "
            f"last: {shown or 'none (nothing held out)'}",
            flush=True,
        )
    if generates(config):
        generated, details["output"] = _generation_eval(config, run_dir, meta, checkpoint)
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
        checkpoint=checkpoint["sampler_path"],
        checkpoint_step=checkpoint.get("step"),
        **details,
    )


def _generation_eval(
    config: PipelineConfig, run_dir: Path, meta: RunMetadata, checkpoint: dict[str, Any]
) -> tuple[dict[str, float], str]:
    """Generated answers scored on the evaluation set (and the base model's, if asked)."""
    from thinker.pipeline.evaluate import run_evaluation

    output: Path = config.evaluation.output or run_dir / "eval.jsonl"
    try:
        metrics = run_evaluation(config, run_dir, checkpoint["sampler_path"], output)
        if config.evaluation.compare_base:
            base_output = output.with_name(f"{output.stem}_base{output.suffix}")
            base = run_evaluation(config, run_dir, None, base_output)
            metrics.update({f"base_{k}": v for k, v in base.items() if k != "num_samples"})
    except Exception as e:
        meta.finish_stage("eval", "failed", error=_describe(e))
        raise _Exit(EXIT_EVALUATION, f"evaluation failed: {_describe(e)}") from e
    shown = " ".join(f"{k}={v:.4g}" for k, v in metrics.items())
    print(f"[thinker] eval: {shown} ({output})", flush=True)
    return metrics, str(output)


def _describe(e: BaseException) -> str:
    from thinker.errors import ThinkerError

    return str(e) if isinstance(e, ThinkerError) else f"{type(e).__name__}: {e}"


def _error(message: str, cause: BaseException | None = None) -> None:
    from thinker.pipeline.metadata import scrub

    if cause is not None and os.environ.get("THINKER_DEBUG", "") not in ("", "0"):
        text = "".join(traceback.format_exception(cause))
        print(scrub(text), file=sys.stderr, end="")
    print(f"[thinker] error: {scrub(message)}", file=sys.stderr, flush=True)
