"""The tinker-cookbook's own recipes, unmodified, against `thinker serve` (run by test.sh).

`recipes/sl_loop.py` and `recipes/rl_loop.py` of tinker-cookbook 0.5.8 run as their README
says (`python -m tinker_cookbook.recipes.sl_loop base_url=...`), in a virtual environment of
their own (`.venv-cookbook`: the cookbook pins transformers <= 5.5.4, Thinker runs a newer
one), with the released `tinker` SDK, against a real `thinker serve` on this machine. No
network: the model, tokenizer and datasets they ask the hub for come from an offline
Hugging Face cache built here (offline_hub.py, offline_datasets.py), the base model being
Thinker's tiny built-in model under the name `meta-llama/Llama-3.2-1B`. Each recipe gets
only command-line settings small enough for a CPU.

What is checked, from the recipes' own outputs and the server's API: each finished (exit 0);
SL logged every step, its loss fell, and its checkpoints (step 2 and the final state and
sampler weights) are the server's, listed by its RestClient routes; RL sampled, graded and
logged each step and saved its final checkpoints. Then sdk_conformance.py calls the SDK's
client methods in the same environment and prints its table. The last line is
`N passed, N failed`.

    .venv/bin/python tests/cookbook/run_recipes.py          # builds .venv-cookbook if missing
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv-cookbook"
PYTHON = VENV / "bin" / "python"
COOKBOOK = "tinker-cookbook[math-rl]==0.5.8"
SDK = f"tinker=={version('tinker')}"  # the release Thinker's own environment runs
TORCH = "torch==2.13.0"  # the CPU build scripts/install.sh installs, installed first
MODEL = "meta-llama/Llama-3.2-1B"
KEY = "tml-cookbook"


def run(command: list[str], env: dict[str, str] | None = None) -> None:
    """Run `command`; on failure, raise with the end of its output."""
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        output = (done.stdout + done.stderr)[-4000:]
        raise RuntimeError(f"{' '.join(command[:4])} ... exited {done.returncode}:\n{output}")


def ensure_venv() -> None:
    if not PYTHON.exists():
        run([sys.executable, "-m", "venv", str(VENV)])
    for check, requirements in (("torch", [TORCH]), ("tinker_cookbook", [COOKBOOK, SDK])):
        found = subprocess.run([str(PYTHON), "-c", f"import {check}"], capture_output=True)
        if found.returncode != 0:
            run([str(PYTHON), "-m", "pip", "install", "-q", *requirements])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def offline_env(hf_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HOME=str(hf_home), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    env.update(TOKENIZERS_PARALLELISM="false", TINKER_TELEMETRY="0")
    return env


@contextlib.contextmanager
def serving(work: Path, hf_home: Path):  # noqa: ANN201
    port = free_port()
    env = offline_env(hf_home)
    env.update(
        PYTHONPATH=str(REPO / "backend"),
        THINKER_DATA_DIR=str(work / "data"),
        THINKER_PORT=str(port),
        THINKER_GPUS="0",
        THINKER_REGISTER_EXAMPLES="false",
    )
    log = (work / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "thinker", "serve"], env=env, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            if server.poll() is not None:
                raise RuntimeError(f"the server exited:\n{(work / 'server.log').read_text()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/api/health").status_code == 200:
                    break
            time.sleep(0.3)
        else:
            raise TimeoutError("the server did not come up in 120 s")
        yield url
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()


def recipe(name: str, url: str, hf_home: Path, log_path: Path, *settings: str) -> str:
    """Run `tinker_cookbook.recipes.<name>` as its README says; its output."""
    env = offline_env(hf_home)
    env["TINKER_API_KEY"] = KEY
    command = [
        str(PYTHON),
        "-m",
        f"tinker_cookbook.recipes.{name}",
        f"base_url={url}",
        f"model_name={MODEL}",
        f"log_path={log_path}",
        *settings,
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise AssertionError(f"{name} exited {done.returncode}:\n{output[-4000:]}")
    return output


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check_sl(url: str, hf_home: Path, work: Path) -> None:
    log_path = work / "sl"
    recipe(
        "sl_loop", url, hf_home, log_path,
        "batch_size=8", "max_steps=4", "learning_rate=0.01", "lora_rank=8", "save_every=2",
    )  # fmt: skip
    metrics = jsonl(log_path / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [0, 1, 2, 3], metrics
    assert metrics[-1]["train_mean_nll"] < metrics[0]["train_mean_nll"], metrics
    saved = jsonl(log_path / "checkpoints.jsonl")
    final = next(c for c in saved if c["name"] == "final")
    assert any(c["name"] == "000002" for c in saved), saved
    run_id = final["state_path"].removeprefix("tinker://").split("/")[0]
    listed = httpx.get(
        f"{url}/api/v1/training_runs/{run_id}/checkpoints", headers={"X-API-Key": KEY}
    ).json()
    paths = {c["tinker_path"] for c in listed["checkpoints"]}
    assert {final["state_path"], final["sampler_path"]} <= paths, (final, paths)


def check_rl(url: str, hf_home: Path, work: Path) -> None:
    log_path = work / "rl"
    output = recipe(
        "rl_loop", url, hf_home, log_path,
        "batch_size=4", "group_size=4", "max_tokens=16", "max_steps=2", "lora_rank=8",
        "save_every=0",
    )  # fmt: skip
    metrics = jsonl(log_path / "metrics.jsonl")
    assert [m["progress/batch"] for m in metrics] == [0, 1], metrics
    assert all("reward/total" in m for m in metrics), metrics
    assert "Training completed" in output
    final = next(c for c in jsonl(log_path / "checkpoints.jsonl") if c["name"] == "final")
    assert final["sampler_path"].startswith("tinker://"), final


def check_conformance(url: str, hf_home: Path, work: Path) -> None:
    """sdk_conformance.py: the SDK's client methods, one call each, in the same environment."""
    env = offline_env(hf_home)
    script = str(REPO / "tests" / "cookbook" / "sdk_conformance.py")
    table = work / "conformance.md"
    done = subprocess.run(
        [str(PYTHON), script, url, "--markdown", str(table)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    print(done.stdout.rsplit("\n", 2)[0])  # the table
    if done.returncode != 0:
        raise AssertionError(f"sdk_conformance exited {done.returncode}:\n{done.stderr[-3000:]}")


def main() -> None:
    ensure_venv()
    work = Path(tempfile.mkdtemp(prefix="thinker-cookbook-"))
    hf_home = work / "hf"
    results: dict[str, str | None] = {}
    try:
        here = REPO / "tests" / "cookbook"
        run([sys.executable, str(here / "offline_hub.py"), str(hf_home)],
            env={**os.environ, "PYTHONPATH": str(REPO / "backend")})  # fmt: skip
        run(
            [str(PYTHON), str(here / "offline_datasets.py"), str(hf_home)], env=offline_env(hf_home)
        )
        with serving(work, hf_home) as url:
            checks: dict[str, Callable[[str, Path, Path], None]] = {
                "sl_loop": check_sl,
                "rl_loop": check_rl,
                "sdk_conformance": check_conformance,
            }
            for name, check in checks.items():
                try:
                    check(url, hf_home, work)
                    results[name] = None
                except Exception as e:  # noqa: BLE001 - reported, then counted as failed
                    results[name] = f"{type(e).__name__}: {e}"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for name, problem in results.items():
        print(f"cookbook recipes/{name}.py: {'ok' if problem is None else 'FAILED ' + problem}")
    failed = sum(p is not None for p in results.values())
    print(f"{len(results) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
