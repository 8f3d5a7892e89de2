"""`thinker compare`: several models answer one eval set, each answer is scored, and every pair
of models is compared with its significance (algorithms/evaluation.py, an eval job's work)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from thinker.errors import ThinkerError

HELP = "compare models on an eval set: scores, A/B verdicts with p-values, a leaderboard"
EPILOG = """\
examples:
  thinker compare data/examples/arithmetic/test.jsonl --model thinker/tiny \\
      --model runs/sl/thinker-tiny-1a2b/sampler_weights/final --out runs/compare
  thinker compare problems.jsonl --model Qwen/Qwen3-0.6B --model tuned=runs/rl/ckpt \\
      --scorer code --samples 4 --temperature 0.7 --out runs/code-ab
  THINKER_JUDGE_API_KEY=sk-... thinker compare chats.jsonl --model a --model b \\
      --scorer llm_judge --judge-url https://api.openai.com/v1 --judge-model gpt-4o --out runs/j

Each --model is a base model or sampler weights (a checkpoint directory, or tinker:// with
--backend tinker), optionally named NAME=MODEL; the first is A of its comparisons. Writes
<out>/evaluation.json (each model's score with its 95% interval, each pair's wins, ties,
losses, win rate, sign-test p-value and verdict, the Bradley-Terry leaderboard),
<out>/samples.jsonl (per prompt, every model's answers and scores) and <out>/metrics.jsonl.
Run again with the same --out to finish an interrupted run: answered models are reused.

exit codes: 0 done; 2 a bad option or dataset
"""
OPTIONS = (  # (flag, config field, type)
    ("--backend", "backend", str),
    ("--renderer", "renderer", str),
    ("--samples", "samples", int),
    ("--temperature", "temperature", float),
    ("--max-tokens", "max_tokens", int),
    ("--max-examples", "max_examples", int),
    ("--alpha", "alpha", float),
    ("--resamples", "resamples", int),
    ("--seed", "seed", int),
)


SCORER_OPTIONS = (  # (flag, help): the scorer's own fields
    ("--pattern", "regex: the pattern"),
    ("--reward-model", "reward_model: the reward model's sampler weights"),
    ("--reward-model-base", "reward_model: its base model, when not recorded beside it"),
    ("--head", "reward_model: judge (default) or bradley_terry"),
    ("--judge-model", "llm_judge: the judge (a model Thinker runs, or the endpoint's model)"),
    ("--judge-url", "llm_judge: an OpenAI-compatible endpoint (key: THINKER_JUDGE_API_KEY)"),
    ("--judge-base", "llm_judge: the base model of judge weights"),
    ("--rubric", "llm_judge: what the judge grades for"),
)


def add_commands(commands: Any) -> None:
    parser = commands.add_parser(
        "compare",
        help=HELP,
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("dataset", type=Path, help="JSONL: chat, prompt-completion or problems")
    parser.add_argument(
        "--model", dest="models", action="append", required=True, help="[NAME=]MODEL, repeated"
    )
    parser.add_argument("--out", type=Path, required=True, help="the run directory")
    parser.add_argument(
        "--scorer",
        default=None,
        help="exact_match (default), regex, code, python, nll, reward_model or llm_judge",
    )
    for flag, text in SCORER_OPTIONS:
        parser.add_argument(flag, default=None, help=text)
    for flag, field, kind in OPTIONS:
        parser.add_argument(flag, dest=field, type=kind, default=None)
    parser.set_defaults(handler=compare)


def _model(text: str) -> dict[str, str]:
    name, sep, model = text.partition("=")
    return {"model": model, "name": name} if sep and name and model else {"model": text}


def compare(args: argparse.Namespace) -> int:
    # deferred: the algorithms import torch; `thinker --help` must answer at once
    from thinker.algorithms import evaluation
    from thinker.algorithms.evaluation_config import EvalConfig

    given = {field: getattr(args, field) for _, field, _ in OPTIONS}
    values: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    scorer = {"type": args.scorer} if args.scorer else {}
    for flag, _ in SCORER_OPTIONS:
        field = flag.removeprefix("--").replace("-", "_")
        if getattr(args, field) is not None:
            scorer[field] = getattr(args, field)
    if scorer:
        values["scorer"] = scorer
    try:
        config = EvalConfig(
            dataset=args.dataset,
            models=[_model(m) for m in args.models],
            log_path=args.out,
            **values,
        )
        asyncio.run(evaluation.main(config))
    except ValidationError as e:
        for error in e.errors():
            where = ".".join(str(p) for p in error["loc"]) or "model"
            print(f"thinker compare: --{where.replace('_', '-')}: {error['msg']}", file=sys.stderr)
        return 2
    except ThinkerError as e:
        print(f"thinker compare: {e}", file=sys.stderr)
        return 2
    summary = json.loads((args.out / evaluation.SUMMARY).read_text())
    for model in summary["models"]:
        if model["score_mean"] is None:
            print(f"{model['name']}: no score")
            continue
        low, high = model["score_interval"]
        print(f"{model['name']}: score {model['score_mean']:.3f} [{low:.3f}, {high:.3f}]")
    for comparison in summary["comparisons"]:
        print(comparison["verdict"])
    return 0
