"""The `thinker` command: every command in one argparse tree.

    thinker validate --config pipeline.yaml            # test suite + dataset check
    thinker train    --config pipeline.yaml            # validate, then train
    thinker eval     --config pipeline.yaml [--run-name NAME]  # validate, then evaluate
    thinker run      --config pipeline.yaml            # validate -> train -> eval
    thinker serve    [--host H] [--port P] [--data-dir DIR]  # the platform server
    thinker token    create --name NAME | list | revoke ID   # API tokens for the server
    thinker datasets inspect FILE [--kind K] [--base-model M]  # detect, validate, stats, preview
    thinker datasets import SOURCE [--split S] [--limit N]     # a Hugging Face dataset
    thinker models import ARCHIVE [--base-model M] | export MODEL_ID --output FILE.tar
    thinker batch    DATASET --out DIR [--task answer|review|fix] [--workers N]  # a pool of actors
    thinker compare  DATASET --model A --model B --out DIR [--scorer S]  # A/B with p-values

Each command module adds its parser to the tree (`add_commands`) and sets `handler`, which
runs the command and returns its exit code; the modules import what is heavy (torch, the
database) only when their command runs, so `thinker --help` answers at once.
"""

from __future__ import annotations

import argparse
import sys

from thinker.cli import batch, compare, datasets, models, pipeline, serve, tokens

DESCRIPTION = "Thinker: post-train language models with LoRA (SL, RL, RLHF, DPO)."
EXAMPLES = """\
examples:
  thinker run --config configs/sl.yaml           validate, train, evaluate a pipeline
  thinker serve                                  the dashboard on http://127.0.0.1:8000
  thinker datasets inspect data.jsonl            is this file ready to train on?
  thinker token create --name laptop             a token for a server beyond loopback

`thinker COMMAND --help` shows each command's options, examples and exit codes.

""" + pipeline.EXIT_CODES_HELP.replace("exit codes:", "exit codes (validate, train, eval, run):")


def main(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (default: sys.argv[1:]) and return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as e:  # --help (0) or a usage error (2), already printed by argparse
        return e.code if isinstance(e.code, int) else 2
    return int(args.handler(args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="thinker",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    pipeline.add_commands(commands)
    serve.add_commands(commands)
    tokens.add_commands(commands)
    datasets.add_commands(commands)
    models.add_commands(commands)
    batch.add_commands(commands)
    compare.add_commands(commands)
    return parser
