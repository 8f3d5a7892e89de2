"""A cookbook recipe in process: `tinker.ServiceClient` replaced by `thinker.ServiceClient`.

The one change Thinker documents for in-process use; the recipe's module runs unmodified, with
the given settings, as `python -m` runs it. Run with Thinker's environment (the engine the
server runs: its transformers, torch and peft) and `PYTHONPATH=backend`; the cookbook and the
few packages it needs that Thinker's environment lacks come from the cookbook's
site-packages, put after Thinker's on the path so that they fill gaps and shadow nothing.

    python in_process.py STORAGE_DIR COOKBOOK_SITE_PACKAGES tinker_cookbook.recipes.sl_loop k=v...
"""

from __future__ import annotations

import runpy
import sys

import tinker

import thinker


def main(storage_dir: str, cookbook_site: str, module: str, settings: list[str]) -> None:
    sys.path.append(cookbook_site)

    def service_client(*args: object, **kwargs: object) -> thinker.ServiceClient:
        # the server's engine runs on the CPU with THINKER_GPUS=0; so does this one
        return thinker.ServiceClient(
            *args, backend="local", storage_dir=storage_dir, device="cpu", **kwargs
        )  # type: ignore[arg-type]

    tinker.ServiceClient = service_client  # type: ignore[misc, assignment]
    sys.argv = [module, *settings]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
