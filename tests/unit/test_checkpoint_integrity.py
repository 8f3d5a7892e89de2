"""Checkpoints carry a SHA256SUMS of their files, checked before they load: bytes changed on
disk are refused by name (DamagedError), never loaded as weights. A checkpoint from before
checksums loads as it always did. A disk that fills up while one is saved leaves nothing
behind and says so. All on real checkpoints of a tiny SL run."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from tests.disk import tmpfs

from thinker.algorithms.sl import SLConfig, main
from thinker.engine import ServiceClient
from thinker.engine.local import checkpoints
from thinker.errors import DamagedError, StorageError
from thinker.files import read_jsonl
from thinker.runs import RunDir, RunLogger

torch.set_num_threads(1)
EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two SL steps of thinker/tiny with a checkpoint (state and sampler) after each."""
    run_dir = tmp_path_factory.mktemp("run")
    config = SLConfig(
        dataset=EXAMPLES / "arithmetic" / "train.jsonl",
        log_path=run_dir,
        max_steps=2,
        batch_size=4,
        save_every=1,
        eval_every=0,
        lora_rank=8,
    )
    asyncio.run(main(config, logger=RunLogger(run_dir)))
    return run_dir


@pytest.fixture
def run(trained: Path, tmp_path: Path) -> Path:
    """A copy of the trained run that a test may damage."""
    return Path(shutil.copytree(trained, tmp_path / "run"))


def _last(run: Path) -> dict[str, str]:
    return read_jsonl(RunDir(run).checkpoints)[-1]


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 8] = bytes(b ^ 0xFF for b in data[middle : middle + 8])
    path.write_bytes(bytes(data))


def _resume(run: Path, state_path: str) -> None:
    ServiceClient(
        backend="local", storage_dir=run
    ).create_training_client_from_state_with_optimizer(state_path).result()


def test_every_file_is_in_the_manifest_and_sha256sum_agrees(run: Path) -> None:
    for path in (_last(run)["state_path"], _last(run)["sampler_path"]):
        directory = checkpoints.resolve(path, run)
        listed = (directory / checkpoints.MANIFEST_FILE).read_text().splitlines()
        names = {line.split("  ", 1)[1] for line in listed}
        on_disk = {p.name for p in directory.iterdir()} - {checkpoints.MANIFEST_FILE}
        assert names == on_disk and "adapter_model.safetensors" in names
        for line in listed:
            digest, name = line.split("  ", 1)
            assert hashlib.sha256((directory / name).read_bytes()).hexdigest() == digest
        if shutil.which("sha256sum"):  # the file is in the format the coreutils tool checks
            subprocess.run(
                ["sha256sum", "--check", "--quiet", "SHA256SUMS"], cwd=directory, check=True
            )
        checkpoints.verify(directory)


def test_flipped_bytes_in_a_training_state_are_refused_by_name(run: Path) -> None:
    state = checkpoints.resolve(_last(run)["state_path"], run)
    _flip(state / "adapter_model.safetensors")
    with pytest.raises(
        DamagedError, match=r"adapter_model\.safetensors does not match its checksum"
    ):
        _resume(run, _last(run)["state_path"])


def test_a_truncated_optimizer_state_is_refused_by_name(run: Path) -> None:
    state = checkpoints.resolve(_last(run)["state_path"], run)
    with open(state / "optimizer.pt", "r+b") as f:
        f.truncate(100)
    with pytest.raises(DamagedError, match=r"optimizer\.pt does not match its checksum"):
        _resume(run, _last(run)["state_path"])


def test_a_damaged_sampler_checkpoint_gives_no_sampler(run: Path) -> None:
    """A damaged adapter used to load silently and sample garbage with NaN logprobs."""
    sampler_path = _last(run)["sampler_path"]
    service = ServiceClient(backend="local", storage_dir=run)
    assert service.create_sampling_client(model_path=sampler_path).result() is not None
    _flip(checkpoints.resolve(sampler_path, run) / "adapter_model.safetensors")
    with pytest.raises(DamagedError, match="adapter_model.safetensors"):
        ServiceClient(backend="local", storage_dir=run).create_sampling_client(
            model_path=sampler_path
        ).result()
    (checkpoints.resolve(sampler_path, run) / "adapter_config.json").unlink()
    with pytest.raises(DamagedError, match="adapter_config.json is missing"):
        checkpoints.verify(checkpoints.resolve(sampler_path, run))


def test_a_checkpoint_from_before_checksums_loads_unverified(
    run: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = checkpoints.resolve(_last(run)["state_path"], run)
    (state / checkpoints.MANIFEST_FILE).unlink()
    meta = json.loads((state / checkpoints.STATE_FILE).read_text())
    del meta["checksums"]
    (state / checkpoints.STATE_FILE).write_text(json.dumps(meta))
    with caplog.at_level(logging.INFO, logger="thinker.engine"):
        _resume(run, _last(run)["state_path"])
    assert "has no SHA256SUMS (saved before checksums): not verified" in caplog.text


def test_a_checkpoint_that_lost_its_manifest_is_damaged(run: Path) -> None:
    state = checkpoints.resolve(_last(run)["state_path"], run)
    (state / checkpoints.MANIFEST_FILE).unlink()
    with pytest.raises(DamagedError, match="its SHA256SUMS is missing"):
        _resume(run, _last(run)["state_path"])
    (state / checkpoints.STATE_FILE).write_text("{not json")
    with pytest.raises(DamagedError, match="thinker_checkpoint.json is damaged"):
        _resume(run, _last(run)["state_path"])


def test_a_full_disk_while_saving_says_so_and_leaves_nothing(run: Path, tmp_path: Path) -> None:
    """The state checkpoint (adapter + Adam's two moments) does not fit in 256 KiB: torch
    used to say `unexpected pos ... vs ...`."""
    with tmpfs(tmp_path / "small", "256k") as storage:
        service = ServiceClient(backend="local", storage_dir=storage)
        client = service.create_lora_training_client("thinker/tiny", rank=32, seed=0).result()
        with pytest.raises(StorageError) as caught:
            client.save_state("000007").result()
        message = str(caught.value)
        assert message.startswith("no space left on device while saving the checkpoint at step 0")
        assert f"free on {storage}" in message and "unexpected pos" not in message
        leftovers = [p for p in storage.rglob("*") if p.is_file()]
        assert leftovers == []  # no half-written checkpoint, no temporary directory
