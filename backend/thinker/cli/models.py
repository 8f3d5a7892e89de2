"""`thinker models import | export`: Tinker checkpoint archives in and out of the model library.

`import` reads an archive as Tinker's checkpoint download gives it (a tar, a zip or a
directory holding adapter_config.json and adapter_model.safetensors) into the server's data
directory as a library model; `export` writes a library model's adapter as such an archive.
Both run `thinker.services.tinker_archives`, as `POST /api/models/import` and `GET
/api/models/{id}/tinker-archive` do.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
from pathlib import Path
from typing import Any

from thinker.errors import ThinkerError
from thinker.settings import Settings
from thinker.store import open_database

EXIT_OK = 0
EXIT_FAILED = 1
HELP = "import a Tinker checkpoint archive as a library model, or export one"


def add_commands(commands: Any) -> None:
    parser = commands.add_parser("models", help=HELP, description=HELP)
    actions = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    imp = actions.add_parser(
        "import",
        help="a Tinker archive (tar, zip or directory) as a library model",
        description="Import a Tinker LoRA checkpoint archive as a library model.",
    )
    imp.add_argument("archive", type=Path, help="the archive: a tar, a zip or a directory")
    imp.add_argument("--base-model", help="the base model (default: the archive's own)")
    imp.add_argument("--name", help="the model's name in the library")
    imp.add_argument("--data-dir", type=Path, help="the server's data directory")
    imp.set_defaults(handler=_run(_import))
    exp = actions.add_parser(
        "export",
        help="a library model's adapter as a Tinker archive (a tar)",
        description="Export a library model's LoRA adapter in Tinker's archive layout.",
    )
    exp.add_argument("model_id", help="the library model (mdl_...)")
    exp.add_argument("--output", type=Path, required=True, help="where to write the tar")
    exp.add_argument("--data-dir", type=Path, help="the server's data directory")
    exp.set_defaults(handler=_run(_export))


def _run(command: Any) -> Any:
    def handler(args: argparse.Namespace) -> int:
        try:
            print(asyncio.run(command(args)))
        except ThinkerError as e:
            print(f"[thinker] {e}", file=sys.stderr)
            return EXIT_FAILED
        return EXIT_OK

    return handler


async def _import(args: argparse.Namespace) -> str:
    from thinker.services.tinker_archives import import_archive  # deferred: imports torch

    settings = Settings(data_dir=args.data_dir) if args.data_dir else Settings()
    async with open_database(settings) as sessions, sessions() as session:
        model = await import_archive(session, settings, args.archive, args.base_model, args.name)
    return f"[thinker] imported {args.archive} as {model.id} on {model.base_model}"


async def _export(args: argparse.Namespace) -> str:
    # deferred: the archive code imports torch, which the CLI's other commands never need
    from thinker.services.models import get_model
    from thinker.services.tinker_archives import export_archive

    settings = Settings(data_dir=args.data_dir) if args.data_dir else Settings()
    async with open_database(settings) as sessions, sessions() as session:
        model = await get_model(session, args.model_id)
    target = await asyncio.to_thread(export_archive, settings, model)
    shutil.copyfile(target, args.output)
    return f"[thinker] exported {model.id} as a Tinker archive: {args.output}"
