"""The offline Hugging Face cache the cookbook recipes read, as a user without the network
has it after downloading once (run with Thinker's environment; `HF_HOME` is the argument):

- `meta-llama/Llama-3.2-1B`: Thinker's built-in tiny model (random weights, fixed seed) and
  its byte-level tokenizer, in the hub cache's layout (`refs/main` -> a snapshot). The server
  loads it as a base model by that name; the cookbook picks the `role_colon` renderer for it,
  which fits any tokenizer.
- `thinkingmachineslabinc/meta-llama-3-instruct-tokenizer`: the same tokenizer, where the
  cookbook loads Llama 3 tokenizers from.

The datasets are written by offline_datasets.py, in the cookbook's own environment.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from thinker.engine.local.models import BUILTIN_CONFIGS, BUILTIN_SEED, load_tokenizer

REVISION = "0" * 40
MODEL = "meta-llama/Llama-3.2-1B"
TOKENIZER = "thinkingmachineslabinc/meta-llama-3-instruct-tokenizer"


def snapshot(home: Path, repo: str) -> Path:
    root = home / "hub" / ("models--" + repo.replace("/", "--"))
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / "main").write_text(REVISION)
    directory = root / "snapshots" / REVISION
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def main(home: Path) -> None:
    torch.manual_seed(BUILTIN_SEED)
    model_dir = snapshot(home, MODEL)
    AutoModelForCausalLM.from_config(BUILTIN_CONFIGS["thinker/tiny"]()).save_pretrained(model_dir)
    load_tokenizer("thinker/tiny").save_pretrained(model_dir)
    tokenizer_dir = snapshot(home, TOKENIZER)
    load_tokenizer("thinker/tiny").save_pretrained(tokenizer_dir)
    shutil.copy(model_dir / "config.json", tokenizer_dir / "config.json")  # AutoTokenizer reads it


if __name__ == "__main__":
    main(Path(sys.argv[1]))
