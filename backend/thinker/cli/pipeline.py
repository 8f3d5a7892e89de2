"""`thinker validate | train | eval | run --config pipeline.yaml`: a declarative YAML pipeline.

`training.algorithm` (sl, dpo, rl, rlhf) picks the training loop; a `stages:` list runs several
in a row, each from the previous one's final checkpoint (see thinker.pipeline.config). A run
lives in <runs_dir>/<run name>/ with metadata.json, metrics.jsonl, checkpoints.jsonl and
eval.jsonl; with stages (rlhf's sl, rm and rl too), each stage's metrics.jsonl and
checkpoints.jsonl are in <run>/<stage name>/, and `train --run-name NAME` again skips the
stages that finished and resumes the one that was interrupted. The stages themselves run in
`thinker.pipeline.runner`; this module reads the command line and turns failures into exit
codes. Errors go to stderr as `[thinker] error: ...`, without tracebacks unless
THINKER_DEBUG=1.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

from thinker.errors import ConfigError
from thinker.pipeline.metadata import scrub

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_CONFIG = 2
EXIT_VALIDATION = 3
EXIT_TRAINING = 4
EXIT_EVALUATION = 5
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """\
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
COMMANDS = {
    "validate": (
        "run the configured test suite and the dataset check",
        "thinker validate --config configs/sl.yaml",
    ),
    "train": (
        "validate, then train",
        "thinker train --config configs/sl.yaml --run-name first\n"
        "  thinker train --config configs/sl.yaml --run-name first   # resumes it",
    ),
    "eval": (
        "validate, then evaluate the last checkpoint of a run",
        "thinker eval --config configs/sl.yaml                    # the latest run\n"
        "  thinker eval --config configs/sl.yaml --run-name first",
    ),
    "run": (
        "validate, train, then evaluate",
        "thinker run --config configs/sl.yaml\n"
        "  thinker run --config configs/rlhf.yaml --backend tinker   # needs TINKER_API_KEY",
    ),
}


class _Failed(Exception):
    """Stops a command with an exit code and a message for stderr."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def add_commands(commands: Any) -> None:
    """Add validate, train, eval and run to the `thinker` parser's subcommands."""
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
    for name, (text, example) in COMMANDS.items():
        parser = commands.add_parser(
            name,
            parents=[common] if name == "validate" else [common, gated],
            help=text,
            description=text,
            epilog=f"example:\n  {example}\n\n{EXIT_CODES_HELP}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    """Run one pipeline command; its exit code."""
    signal.signal(signal.SIGTERM, _interrupt)  # a killed run is recorded as interrupted
    try:
        return _run(args)
    except _Failed as e:
        _error(e.message, e.__cause__)
        return e.code
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED
    except Exception as e:  # a bug: still no traceback unless asked for
        _error(f"internal error: {type(e).__name__}: {e}", e)
        return EXIT_INTERNAL


def _run(args: argparse.Namespace) -> int:
    # Deferred: the pipeline imports torch; `thinker --help` must not wait for it.
    from thinker.pipeline.config import check_backend_environment, load_pipeline_config
    from thinker.pipeline.runner import EXIT_CODES, StageFailed, run_pipeline

    try:
        config = load_pipeline_config(args.config, backend=args.backend)
        if args.command != "validate":
            check_backend_environment(config)
    except ConfigError as e:
        raise _Failed(EXIT_CONFIG, str(e)) from None
    try:
        run_pipeline(config, args.command, args.run_name, getattr(args, "skip_validation", False))
    except StageFailed as e:
        raise _Failed(EXIT_CODES[e.stage], e.message) from e.__cause__
    return EXIT_OK


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _error(message: str, cause: BaseException | None = None) -> None:
    if cause is not None and os.environ.get("THINKER_DEBUG", "") not in ("", "0"):
        text = "".join(traceback.format_exception(cause))
        print(scrub(text), file=sys.stderr, end="")
    print(f"[thinker] error: {scrub(message)}", file=sys.stderr, flush=True)
