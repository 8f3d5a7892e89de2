"""`thinker batch`: a model answers every input of a dataset or an archive of source files,
shared out over a pool of actors, with a confidence per output (algorithms/batch.py)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from thinker.errors import ThinkerError

HELP = "answer many inputs with a model over a pool of actors, with confidences"
EPILOG = """\
examples:
  thinker batch data/examples/code_review/test.jsonl --out runs/review
  thinker batch src.zip --task review --base-model Qwen/Qwen3-0.6B --workers 4 --out runs/src
  thinker batch bugs.jsonl --task fix --samples 8 --confidence-threshold 0.75 --out runs/fix

Writes <out>/results.jsonl (one row per input: output, confidence, flagged, apply, and for
--task fix the fix and whether its tests passed), <out>/metrics.jsonl and <out>/pool.json.
Run again with the same --out to finish an interrupted run: answered inputs are skipped.

exit codes: 0 done (flagged or failed inputs included); 2 a bad option or dataset
"""
OPTIONS = (  # (flag, config field, type)
    ("--base-model", "base_model", str),
    ("--init-from", "init_from", str),
    ("--renderer", "renderer", str),
    ("--task", "task", str),
    ("--system-prompt", "system_prompt", str),
    ("--samples", "samples", int),
    ("--temperature", "temperature", float),
    ("--max-tokens", "max_tokens", int),
    ("--confidence-threshold", "confidence_threshold", float),
    ("--workers", "workers", int),
    ("--shard-size", "shard_size", int),
    ("--max-retries", "max_retries", int),
    ("--pool", "pool", str),
    ("--seed", "seed", int),
)


def add_commands(commands: Any) -> None:
    parser = commands.add_parser(
        "batch",
        help=HELP,
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("dataset", type=Path, help="JSONL rows, or a .zip / .tar(.gz) archive")
    parser.add_argument("--out", type=Path, required=True, help="the run directory")
    for flag, field, kind in OPTIONS:
        parser.add_argument(flag, dest=field, type=kind, default=None)
    parser.set_defaults(handler=batch)


def batch(args: argparse.Namespace) -> int:
    # deferred: the algorithms import torch; `thinker --help` must answer at once
    from thinker.algorithms import batch as batch_work
    from thinker.algorithms.batch_config import BatchConfig

    given = {field: getattr(args, field) for _, field, _ in OPTIONS}
    values = {k: v for k, v in given.items() if v is not None}
    try:
        config = BatchConfig(dataset=args.dataset, log_path=args.out, **values)
        result = asyncio.run(batch_work.main(config))
    except ValidationError as e:
        for error in e.errors():
            where = ".".join(str(p) for p in error["loc"])
            print(f"thinker batch: --{where.replace('_', '-')}: {error['msg']}", file=sys.stderr)
        return 2
    except ThinkerError as e:
        print(f"thinker batch: {e}", file=sys.stderr)
        return 2
    print(json.dumps(result.final_metrics, indent=1))
    return 0
