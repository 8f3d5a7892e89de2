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
client methods in the same environment and prints its table. Last, each recipe runs again
in process (in_process.py: `tinker.ServiceClient` replaced by `thinker.ServiceClient`, in
Thinker's environment, the server's engine), with the same settings, and its metrics.jsonl
must equal the wire run's step by step, key by key, bit for bit, but the wall-clock keys
(WALL_CLOCK). The last line is `N passed, N failed`.

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
from functools import partial
from importlib.metadata import version
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
HERE = REPO / "tests" / "cookbook"
VENV = REPO / ".venv-cookbook"
PYTHON = VENV / "bin" / "python"
COOKBOOK = "tinker-cookbook[math-rl]==0.5.8"
SDK = f"tinker=={version('tinker')}"  # the release Thinker's own environment runs
TORCH = "torch==2.13.0"  # the CPU build scripts/install.sh installs, installed first
MODEL = "meta-llama/Llama-3.2-1B"
KEY = "tml-cookbook"
# The engine's settings, the same over the wire and in process: one CPU thread (the count a
# tiny model gets anyway, pinned so that the comparison does not rest on that rule).
ENGINE = {"THINKER_THREADS": "1"}
# Each recipe's settings, small enough for a CPU; the wire run and the in-process run take
# the same ones.
RECIPES: dict[str, list[str]] = {
    "sl_loop": ["batch_size=8", "max_steps=4", "learning_rate=0.01", "lora_rank=8", "save_every=2"],
    "rl_loop": [
        "batch_size=4", "group_size=4", "max_tokens=16", "max_steps=2", "lora_rank=8",
        "save_every=0",
    ],
}  # fmt: skip
# The keys the recipes log that hold wall-clock seconds (sl_loop's `time_total`, rl_loop's
# `time/total`), left out of the comparison: a step's duration is the machine's, not the run's.
WALL_CLOCK = ("time_total", "time/")


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
    # MKL's reductions (a dot product of 30 floats) add in an order that depends on where
    # the arrays start in memory; the recipes reduce the logprobs they get back (sl_loop's
    # train_mean_nll), which over the wire are fresh arrays and in process the engine's own,
    # so the same bits summed to values 2 ulp apart. STRICT makes the order alignment-free.
    env.update(MKL_CBWR="AUTO,STRICT")
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
        **ENGINE,
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


def recipe(name: str, url: str, hf_home: Path, log_path: Path) -> str:
    """Run `tinker_cookbook.recipes.<name>` as its README says, against `url`; its output."""
    env = offline_env(hf_home)
    env["TINKER_API_KEY"] = KEY
    launch = [str(PYTHON), "-m"]
    return run_recipe(launch, env, name, log_path, f"base_url={url}")


def run_recipe(
    launch: list[str], env: dict[str, str], name: str, log_path: Path, *extra: str
) -> str:
    """Run recipe `name` with its settings (RECIPES) through `launch`; its output."""
    module = f"tinker_cookbook.recipes.{name}"
    settings = [f"model_name={MODEL}", f"log_path={log_path}", *extra, *RECIPES[name]]
    done = subprocess.run(
        [*launch, module, *settings], env=env, capture_output=True, text=True, timeout=600
    )
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise AssertionError(f"{name} exited {done.returncode}:\n{output[-4000:]}")
    return output


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check_sl(url: str, hf_home: Path, work: Path) -> None:
    log_path = work / "wire" / "sl_loop"
    recipe("sl_loop", url, hf_home, log_path)
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
    log_path = work / "wire" / "rl_loop"
    output = recipe("rl_loop", url, hf_home, log_path)
    metrics = jsonl(log_path / "metrics.jsonl")
    assert [m["progress/batch"] for m in metrics] == [0, 1], metrics
    assert all("reward/total" in m for m in metrics), metrics
    assert "Training completed" in output
    final = next(c for c in jsonl(log_path / "checkpoints.jsonl") if c["name"] == "final")
    assert final["sampler_path"].startswith("tinker://"), final


def check_conformance(url: str, hf_home: Path, work: Path) -> None:
    """sdk_conformance.py: the SDK's client methods, one call each, in the same environment."""
    env = offline_env(hf_home)
    script = str(HERE / "sdk_conformance.py")
    table = work / "conformance.md"
    done = subprocess.run(
        [str(PYTHON), script, url, "--markdown", str(table)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    print(done.stdout.rsplit("\n", 2)[0])  # the table
    if done.returncode != 0:
        raise AssertionError(f"sdk_conformance exited {done.returncode}:\n{done.stderr[-3000:]}")


def check_in_process(name: str, hf_home: Path, work: Path) -> str:
    """Recipe `name` in process (in_process.py), in Thinker's environment with the wire run's
    settings and engine settings; its metrics must be the wire run's, bit for bit."""
    env = offline_env(hf_home)
    env.update(PYTHONPATH=str(REPO / "backend"), **ENGINE)
    site = next((VENV / "lib").glob("python*/site-packages"))  # the cookbook, for the gaps
    storage = work / "in_process" / "storage"
    launch = [sys.executable, str(HERE / "in_process.py"), str(storage), str(site)]
    log_path = work / "in_process" / name
    run_recipe(launch, env, name, log_path)
    wire = jsonl(work / "wire" / name / "metrics.jsonl")
    keys = ", ".join(same_metrics(wire, jsonl(log_path / "metrics.jsonl")))
    return f"{len(wire)} steps, the wire run's to the bit in {keys}"


def same_metrics(wire: list[dict], local: list[dict]) -> list[str]:
    """The same steps with the same keys, and the same values, but the wall-clock ones, to the
    bit (a float's repr round-trips, so equal reprs are equal bits); the keys compared."""
    assert [m["step"] for m in wire] == [m["step"] for m in local], (wire, local)
    differences, compared = [], set()
    for over_wire, in_process in zip(wire, local, strict=True):
        assert over_wire.keys() == in_process.keys(), over_wire.keys() ^ in_process.keys()
        for key, value in over_wire.items():
            if key == "step" or key.startswith(WALL_CLOCK):
                continue
            compared.add(key)
            if repr(value) != repr(in_process[key]):
                differences.append(
                    f"step {over_wire['step']} {key}: {value!r} over the wire, "
                    f"{in_process[key]!r} in process"
                )
    assert not differences, "; ".join(differences[:10])
    return sorted(compared)


def attempt(check: Callable[[], str | None]) -> tuple[bool, str]:
    """Whether `check` passed, and what it says."""
    try:
        detail = check()
    except Exception as e:  # noqa: BLE001 - reported, then counted as failed
        return False, f"FAILED {type(e).__name__}: {e}"
    return True, "ok" if detail is None else f"ok: {detail}"


def main() -> None:
    ensure_venv()
    work = Path(tempfile.mkdtemp(prefix="thinker-cookbook-"))
    hf_home = work / "hf"
    results: dict[str, tuple[bool, str]] = {}
    try:
        run([sys.executable, str(HERE / "offline_hub.py"), str(hf_home)],
            env={**os.environ, "PYTHONPATH": str(REPO / "backend")})  # fmt: skip
        run(
            [str(PYTHON), str(HERE / "offline_datasets.py"), str(hf_home)], env=offline_env(hf_home)
        )
        with serving(work, hf_home) as url:
            checks: dict[str, Callable[[str, Path, Path], None]] = {
                "recipes/sl_loop.py": check_sl,
                "recipes/rl_loop.py": check_rl,
                "sdk_conformance.py": check_conformance,
            }
            for label, check in checks.items():
                results[label] = attempt(partial(check, url, hf_home, work))
        for name in RECIPES:  # the server gone, the cores free: these need its runs' logs only
            label = f"recipes/{name}.py in process"
            results[label] = attempt(partial(check_in_process, name, hf_home, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for label, (_, said) in results.items():
        print(f"cookbook {label}: {said}")
    failed = sum(not passed for passed, _ in results.values())
    print(f"{len(results) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
