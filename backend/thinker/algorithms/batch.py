"""Batch work: a model (a base model or an adapter) answers many inputs, shared out over a
pool of actors (algorithms/pool.py), each input answered several times so that every output
carries a confidence.

What it computes, per input:
- `samples` answers at `temperature`; they are compared after normalising case and spaces;
  the answer given most often is the output (ties: the one with the higher mean token
  logprob), and `confidence` is the share of samples that gave it (1.0: all agreed).
  `mean_logprob` is the chosen sample's mean token logprob; `distinct_answers` counts the
  different answers;
- `flagged`: confidence below `confidence_threshold`. A flagged output is kept and shown, but
  never applied;
- for `task: fix`, the output's last ```python block is the fix; a row with `tests` has them
  run after it in the sandbox (rewards/sandbox.py, its limits), and the output is
  `verified` (true: the tests passed; false: they failed, with the reason; null: no tests);
- `apply`: not flagged and, for a fix, verified.

Results stream into `results.jsonl` in the run directory, one row per input (its `index` in
the dataset) as shards finish; a resumed run skips the inputs already there, so each input is
answered once. A shard that fails on every try gives its inputs a row with `error`. The
metrics after each shard (inputs done, flagged, applied, mean confidence, retries, actors
lost) go to metrics.jsonl as the step's; pool.json says what each actor is doing.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import orjson
from tinker import types

from thinker.algorithms import uncertainty
from thinker.algorithms.batch_config import SYSTEM_PROMPTS, BatchConfig
from thinker.algorithms.common import RunResult
from thinker.algorithms.pool import LocalPool, PoolStats, RayPool, Shard, Work
from thinker.errors import ConfigError, DatasetError
from thinker.files import append_jsonl, read_jsonl, records_here
from thinker.rewards.code import extract_code
from thinker.rewards.sandbox import run_sandboxed
from thinker.runs import MetricsLogger, RunLogger

ARCHIVES = (".zip", ".tar", ".tar.gz", ".tgz")
MAX_FILE_BYTES = 256 * 1024  # a source file of an archive larger than this is skipped
SKIPPED_PARTS = {"__pycache__", ".git", "node_modules", ".venv"}
RESULTS = "results.jsonl"
POOL_RECORD = "pool.json"


# ---- inputs ---------------------------------------------------------------------------------
def load_inputs(config: BatchConfig) -> list[dict[str, Any]]:
    """Every input: {index, messages, and the row's path, tests and reference if any}.

    Raises:
        DatasetError: an unreadable file or a row that is neither a chat nor a prompt (its
            line), or an archive with no text file.
    """
    path = Path(config.dataset)
    rows = archive_rows(path) if path.name.endswith(ARCHIVES) else _jsonl_rows(path)
    system = SYSTEM_PROMPTS[config.task] if config.system_prompt is None else config.system_prompt
    inputs = []
    for index, (where, row) in enumerate(rows):
        if "messages" in row:
            messages = row["messages"]
            if not isinstance(messages, list) or not all(
                isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages
            ):
                raise DatasetError(f"{where}: 'messages' must be a list of {{role, content}}")
            reference = None
            if messages and messages[-1].get("role") == "assistant":
                reference, messages = messages[-1]["content"], messages[:-1]
            if not messages:
                raise DatasetError(f"{where}: no message before the assistant's to answer")
        elif isinstance(row.get("prompt"), str):
            messages, reference = [{"role": "user", "content": row["prompt"]}], None
        else:
            raise DatasetError(f"{where}: a row needs 'messages' (a chat) or 'prompt' (text)")
        if system and messages[0].get("role") != "system":
            messages = [{"role": "system", "content": system}, *messages]
        tests = row.get("tests")
        if tests is not None and not isinstance(tests, str):
            raise DatasetError(f"{where}: 'tests' must be Python source text")
        item: dict[str, Any] = {"index": index, "messages": messages}
        for key, value in (("path", row.get("path")), ("tests", tests), ("reference", reference)):
            if value is not None:
                item[key] = value
        inputs.append(item)
    return inputs


def _jsonl_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    try:
        lines = path.read_bytes().splitlines()
    except OSError as e:
        raise DatasetError(f"{path}: cannot read it ({e.strerror})") from None
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path.name}, line {number}"
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise DatasetError(f"{where}: not JSON ({e})") from None
        if not isinstance(row, dict):
            raise DatasetError(f"{where}: a row must be a JSON object")
        rows.append((where, row))
    return rows


def archive_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """One prompt row per text file of a zip or tar archive: {'path', 'prompt': its text},
    in path order. Binary files, files over 256 KiB and cache or VCS folders are skipped."""
    files: dict[str, bytes] = {}
    try:
        if path.name.endswith(".zip"):
            with zipfile.ZipFile(path) as archive:
                for info in archive.infolist():
                    if not info.is_dir() and info.file_size <= MAX_FILE_BYTES:
                        files[info.filename] = archive.read(info)
        else:
            with tarfile.open(path) as archive:
                for member in archive.getmembers():
                    if member.isfile() and member.size <= MAX_FILE_BYTES:
                        data = archive.extractfile(member)
                        if data is not None:
                            files[member.name] = data.read()
    except (OSError, zipfile.BadZipFile, tarfile.TarError) as e:
        raise DatasetError(f"{path.name}: not a readable archive ({e})") from None
    rows = []
    for name in sorted(files):
        if SKIPPED_PARTS & set(Path(name).parts) or b"\0" in files[name][:4096]:
            continue
        try:
            text = files[name].decode("utf-8")
        except UnicodeDecodeError:
            continue
        rows.append((f"{path.name}: {name}", {"path": name, "prompt": text}))
    if not rows:
        raise DatasetError(f"{path.name}: no text file of at most {MAX_FILE_BYTES} bytes in it")
    return rows


# ---- one actor's work -----------------------------------------------------------------------
def answerer(spec: dict[str, Any]) -> Work:
    """Runs in an actor: load the model once; return the function that answers a shard."""
    # deferred: the engine (torch, the model) loads in each actor, never in the coordinator
    from thinker.engine import ServiceClient
    from thinker.renderers import renderer_for

    service = ServiceClient(
        backend="local", storage_dir=spec["storage_dir"], quantization=spec["quantization"]
    )
    if spec["init_from"]:
        client = service.create_training_client_from_state(spec["init_from"]).result()
        sampler = client.save_weights_and_get_sampling_client().result()
    else:
        sampler = service.create_sampling_client(base_model=spec["base_model"]).result()
    renderer = renderer_for(spec["renderer"], spec["base_model"], sampler.get_tokenizer())

    def work(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [answer(item, sampler, renderer, spec) for item in items]

    return work


def answer(
    item: dict[str, Any], sampler: Any, renderer: Any, spec: dict[str, Any]
) -> dict[str, Any]:
    """One input's output, confidence and (for a fix) verification."""
    params = types.SamplingParams(
        max_tokens=spec["max_tokens"],
        temperature=spec["temperature"],
        stop=renderer.get_stop_sequences(),
        seed=spec["seed"] * 1_000_003 + item["index"],
    )
    prompt = renderer.build_generation_prompt(item["messages"])
    response = sampler.sample(prompt, spec["samples"], params).result()
    texts, ended = [], []
    for sequence in response.sequences:
        message, reason = renderer.parse_response(list(sequence.tokens))
        texts.append(message["content"])
        ended.append(reason == "stop")
    sure = uncertainty.measure(
        texts,
        [list(s.logprobs or []) for s in response.sequences],
        agreement_below=spec["confidence_threshold"],
    )
    best = sure.answer
    row: dict[str, Any] = {
        "index": item["index"],
        **({"path": item["path"]} if "path" in item else {}),
        "output": texts[best],
        "confidence": sure.agreement,
        "mean_logprob": sure.mean_logprob,
        "distinct_answers": sure.distinct_answers,
        "samples": len(texts),
        "terminated": ended[best],
        "flagged": sure.not_sure,
    }
    if "reference" in item:
        row["reference"] = item["reference"]
    if spec["task"] == "fix":
        row["fix"] = extract_code(texts[best])
        row["verified"], row["verification"] = verify_fix(
            row["fix"], item.get("tests"), spec["sandbox_timeout_s"]
        )
    row["apply"] = not row["flagged"] and row.get("verified", True) is True
    return row


def verify_fix(code: str, tests: str | None, timeout_s: float) -> tuple[bool | None, str]:
    """Run `tests` after `code` in the sandbox: (passed, why); (None, ...) without tests."""
    if not tests:
        return None, "no tests given"
    result = run_sandboxed(
        code + "\n\n" + tests, timeout_s=timeout_s, cpu_s=timeout_s, memory_mb=1024
    )
    if result.returncode == 0 and not result.timed_out:
        return True, "the tests passed"
    why = result.killed_reason or (result.stderr.strip().splitlines() or ["exit code"])[-1]
    return False, f"the tests failed: {why}"[:500]


# ---- the run --------------------------------------------------------------------------------
class Tally:
    """Counts over results.jsonl's rows (those of earlier attempts included): the run's
    metrics, and the counts the server's results endpoint shows."""

    def __init__(self, total: int) -> None:
        self.total, self.answered, self.failed = total, 0, 0
        self.flagged = self.applied = self.verified = self.unverified = 0
        self.confidences: list[float] = []

    def add(self, row: dict[str, Any]) -> None:
        if "error" in row:
            self.failed += 1
            return
        self.answered += 1
        self.flagged += bool(row["flagged"])
        self.applied += bool(row["apply"])
        self.verified += row.get("verified") is True
        self.unverified += row.get("verified") is False
        self.confidences.append(float(row["confidence"]))

    def counts(self) -> dict[str, int]:
        return {
            "answered": self.answered,
            "failed": self.failed,
            "flagged": self.flagged,
            "applied": self.applied,
            "verified": self.verified,
            "verification_failed": self.unverified,
        }

    def metrics(self, stats: PoolStats) -> dict[str, float]:
        return {
            "inputs_done": float(self.answered + self.failed),
            "inputs_total": float(self.total),
            **{key: float(value) for key, value in self.counts().items()},
            "mean_confidence": statistics.fmean(self.confidences) if self.confidences else 0.0,
            "shard_retries": float(stats.retries),
            "actors_lost": float(stats.actors_lost),
        }


async def main(config: BatchConfig, logger: MetricsLogger | None = None) -> RunResult:
    """Answer every input of `config.dataset` not yet in results.jsonl; the run's figures."""
    run_dir = Path(config.log_path)
    run_dir.mkdir(parents=True, exist_ok=True)
    logger = logger or RunLogger(run_dir)
    inputs = load_inputs(config)
    results = run_dir / RESULTS
    earlier = read_jsonl(results) if results.exists() else []
    tally = Tally(len(inputs))
    for row in earlier:
        tally.add(row)
    done = {row["index"] for row in earlier}
    todo = [item for item in inputs if item["index"] not in done]
    shards = [
        Shard(number, todo[start : start + config.shard_size])
        for number, start in enumerate(range(0, len(todo), config.shard_size))
    ]
    pool = _make_pool(config, run_dir, len(shards))
    print(
        f"[thinker] batch: {len(inputs)} inputs ({len(done)} answered before), {len(shards)} "
        f"shards of {config.shard_size} over {pool.size} {type(pool).__name__} actor(s)",
        flush=True,
    )
    logger.log_event("plan", {"total_steps": len(shards), "start_step": 0})
    steps = [0]

    def record(rows: list[dict[str, Any]]) -> None:
        for row in rows:
            if records_here():
                append_jsonl(results, row)
            tally.add(row)
        steps[0] += 1
        logger.log_metrics(tally.metrics(pool.stats), step=steps[0])

    def failed(shard: Shard, reasons: str) -> None:
        record([{"index": item["index"], "error": reasons} for item in shard.items])

    stats = await asyncio.to_thread(pool.run, shards, lambda _s, rows: record(rows), failed)
    final = tally.metrics(stats)
    print(
        f"[thinker] batch: {tally.answered} answered, {tally.failed} failed, {tally.flagged} "
        f"flagged, {tally.applied} to apply; {stats.retries} shard retries, "
        f"{stats.actors_lost} actors lost",
        flush=True,
    )
    return RunResult(steps=steps[0], final_metrics=final)


def _make_pool(config: BatchConfig, run_dir: Path, shards: int) -> LocalPool | RayPool:
    spec = {
        **config.model_dump(
            include={
                "base_model",
                "init_from",
                "quantization",
                "renderer",
                "task",
                "samples",
                "temperature",
                "max_tokens",
                "confidence_threshold",
                "sandbox_timeout_s",
                "seed",
            }
        ),
        "storage_dir": str(run_dir / "actors"),
    }
    size = max(1, min(config.workers, shards))
    options: dict[str, Any] = {
        "max_retries": config.max_retries,
        "shard_timeout_s": config.shard_timeout_s,
        "record": run_dir / POOL_RECORD,
    }
    address = os.environ.get("THINKER_RAY_ADDRESS")
    if config.pool == "ray" or (config.pool == "auto" and address):
        try:
            import ray
        except ImportError:
            raise ConfigError("pool: ray needs Ray: pip install -e '.[ray]'") from None
        if not ray.is_initialized():
            ray.init(address=address or "auto", log_to_driver=False)
        gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
        return RayPool(size, answerer, (spec,), gpus=gpus, cpus=1, **options)
    return LocalPool(size, answerer, (spec,), env_for=_local_env(size), **options)


def _local_env(size: int) -> Any:
    """Each local actor's environment: a GPU of its own where there are GPUs (round robin),
    else an even share of the CPU cores."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = [g for g in (visible or "").split(",") if g]
    if visible is None:
        try:
            import torch

            gpus = [str(i) for i in range(torch.cuda.device_count())]
        except ImportError:  # pragma: no cover - torch is a dependency
            gpus = []
    threads = str(max(1, (os.cpu_count() or 1) // size))

    def env(slot: int) -> dict[str, str]:
        if gpus:
            return {"CUDA_VISIBLE_DEVICES": gpus[slot % len(gpus)]}
        return {"THINKER_THREADS": threads}

    return env
