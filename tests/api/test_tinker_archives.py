"""Tinker checkpoint archives through /api/models: import, chat, train further, export.

The archive is built the way Tinker's download gives it (a tar of adapter_config.json and
adapter_model.safetensors in Tinker's key names, plus its checkpoint_complete marker) from
a real adapter: 3 SL steps of thinker/tiny.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient
from safetensors.torch import load, save
from tests.support.api import platform_of
from tests.support.sampling import TrainedRun, add_model
from tinker import types

from thinker.engine.local import checkpoints
from thinker.engine.local.service import LocalServiceClient
from thinker.services.tinker_archives import read_archive

pytestmark = pytest.mark.postgresql  # about what is stored: on PostgreSQL too

torch.set_num_threads(1)
UNEMBED = "base_model.model.model.unembed_tokens."


def _tar(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _members(raw: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]


def _tinker_archive(run: TrainedRun, **config_changes: object) -> tuple[bytes, dict]:
    """The adapter of `run` as Tinker ships it; and its tensors in Tinker's names."""
    directory = checkpoints.resolve(run.sampler_path, run.directory)
    tensors = load((directory / "adapter_model.safetensors").read_bytes())
    tinker = {k.replace("base_model.model.lm_head.", UNEMBED): v for k, v in tensors.items()}
    config = {"r": 8, "lora_alpha": 32, "base_model_name_or_path": "thinker/tiny"}
    config.update(config_changes)
    members = {
        "adapter_config.json": json.dumps(config).encode(),
        "adapter_model.safetensors": save(tinker),
        "checkpoint_complete": b"",
    }
    return _tar(members), tinker


def _import(client: TestClient, raw: bytes, **form: str) -> dict:
    files = {"file": ("ckpt.tar", raw, "application/x-tar")}
    response = client.post("/api/models/import", files=files, data=form)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def test_an_archive_imports_chats_trains_and_exports_bit_for_bit(
    client: TestClient, trained: TrainedRun
) -> None:
    raw, tensors = _tinker_archive(trained)
    assert any(k.startswith(UNEMBED) for k in tensors)  # the renamed unembedding is exercised
    model = _import(client, raw, name="from tinker")
    assert (model["name"], model["base_model"], model["backend"]) == (
        "from tinker",
        "thinker/tiny",
        "local",
    )
    assert model["state_path"] is not None
    assert client.get(f"/api/jobs/{model['job_id']}").json()["algorithm"] == "import"

    # It chats: the playground's sampling request returns tokens.
    body = {"model": model["id"], "prompt": "12+7=", "max_tokens": 4, "seed": 1}
    sample = client.post("/api/sample", json=body)
    assert sample.status_code == 200, sample.text
    assert sample.json()["usage"]["completion_tokens"] > 0

    # Exported, it is Tinker's layout with the same tensors, bit for bit; and imports again.
    exported = client.get(f"/api/models/{model['id']}/tinker-archive")
    assert exported.status_code == 200
    members = _members(exported.content)
    assert set(members) == {"adapter_config.json", "adapter_model.safetensors"}
    config = json.loads(members["adapter_config.json"])
    assert (config["r"], config["base_model_name_or_path"]) == (8, "thinker/tiny")
    out = load(members["adapter_model.safetensors"])
    assert set(out) == set(tensors)
    assert all(torch.equal(out[k], tensors[k]) for k in tensors)
    again = _import(client, exported.content)
    again_out = load(
        _members(client.get(f"/api/models/{again['id']}/tinker-archive").content)[
            "adapter_model.safetensors"
        ]
    )
    assert all(torch.equal(again_out[k], tensors[k]) for k in tensors)

    # It trains further from its training state, as a job's init_from does: one SL step
    # changes every LoRA weight.
    runs_dir = platform_of(client).settings.runs_dir / model["job_id"]
    state_dir = checkpoints.resolve(model["state_path"], runs_dir)
    engine = LocalServiceClient(storage_dir=runs_dir, device="cpu")
    trainer = engine.create_training_client_from_state(str(state_dir)).result()
    before = {k: v.clone() for k, v in trainer._adapter_snapshot().items()}
    tokens = list(b"12+7=19")
    datum = types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
    )
    trainer.forward_backward([datum], "cross_entropy").result()
    trainer.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    after = trainer._adapter_snapshot()
    local = {k.replace(UNEMBED, "base_model.model.lm_head."): v for k, v in tensors.items()}
    assert all(torch.equal(before[k], local[k]) for k in local)  # it started from the archive
    assert all(not torch.equal(after[k], before[k]) for k in before)


def test_a_library_model_exports_an_archive_that_imports(
    client: TestClient, trained: TrainedRun, tmp_path: Path
) -> None:
    """A locally trained adapter, exported, is read back by the importer (a server path)."""
    model_id = add_model(client, trained)
    raw = client.get(f"/api/models/{model_id}/tinker-archive").content
    archive = tmp_path / "local.tar"
    archive.write_bytes(raw)
    imported = client.post("/api/models/import", data={"path": str(archive)})
    assert imported.status_code == 201, imported.text
    directory = checkpoints.resolve(trained.sampler_path, trained.directory)
    original = load((directory / "adapter_model.safetensors").read_bytes())
    assert all(torch.equal(read_archive(archive).tensors[k], v) for k, v in original.items())


def test_another_lora_alpha_is_folded_into_b(trained: TrainedRun, tmp_path: Path) -> None:
    """alpha 64 at rank 8 is twice the local scale 32 / 8: B doubles, A stays."""
    raw, tensors = _tinker_archive(trained, lora_alpha=64)
    (tmp_path / "a.tar").write_bytes(raw)
    adapter = read_archive(tmp_path / "a.tar")
    for key, value in tensors.items():
        local = adapter.tensors[key.replace(UNEMBED, "base_model.model.lm_head.")]
        assert torch.equal(local, value * 2 if ".lora_B." in key else value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"adapter_model.safetensors": None}, "no adapter_model.safetensors"),
        ({"adapter_config.json": b"{not json"}, "adapter_config.json: not JSON"),
        ({"adapter_config.json": b'{"r": 0}'}, "adapter_config.json: field 'r'"),
        (
            {"adapter_config.json": b'{"r": 8, "lora_alpha": "x"}'},
            "adapter_config.json: field 'lora_alpha'",
        ),
        ({"adapter_config.json": b'{"r": 4}'}, "does not fit rank r=4"),
        ({"adapter_config.json": b'{"r": 8}'}, "no 'base_model_name_or_path'"),
        ({"adapter_model.safetensors": b"garbage"}, "adapter_model.safetensors: not a safetens"),
        ({"../evil": b""}, "unsafe path '../evil'"),
    ],
)
def test_bad_archives_are_refused_with_the_file_and_field(
    client: TestClient, trained: TrainedRun, change: dict[str, bytes | None], message: str
) -> None:
    raw, _ = _tinker_archive(trained)
    members = {**_members(raw), **change}
    broken = _tar({k: v for k, v in members.items() if v is not None})
    response = client.post(
        "/api/models/import", files={"file": ("bad.tar", broken, "application/x-tar")}
    )
    assert response.status_code == 422, response.text
    assert message in response.json()["detail"]
    assert client.get("/api/models").json()["count"] == 0  # nothing half-imported


def test_an_adapter_for_another_model_shape_is_refused(
    client: TestClient, trained: TrainedRun
) -> None:
    raw, tensors = _tinker_archive(trained)
    key = next(k for k in tensors if ".lora_A." in k and UNEMBED not in k)
    bigger = {**tensors, key: torch.zeros(8, tensors[key].shape[1] + 1)}
    members = {**_members(raw), "adapter_model.safetensors": save(bigger)}
    response = client.post(
        "/api/models/import", files={"file": ("x.tar", _tar(members), "application/x-tar")}
    )
    assert response.status_code == 422
    assert f"tensor {key!r} has shape" in response.json()["detail"]
    detail = client.post(
        "/api/models/import", files={"file": ("x.tar", b"plain text", "text/plain")}
    ).json()["detail"]
    assert "the uploaded x.tar: not a tar" in detail
    assert "uploads" not in detail  # the server's temporary copy is not named


def test_the_cli_imports_and_exports_an_archive(
    trained: TrainedRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from thinker.cli import main

    raw, tensors = _tinker_archive(trained)
    (tmp_path / "in.tar").write_bytes(raw)
    data = str(tmp_path / "data")
    assert main(["models", "import", str(tmp_path / "in.tar"), "--data-dir", data]) == 0
    model_id = capsys.readouterr().out.split(" as ")[1].split()[0]
    out = tmp_path / "out.tar"
    assert main(["models", "export", model_id, "--output", str(out), "--data-dir", data]) == 0
    exported = load(_members(out.read_bytes())["adapter_model.safetensors"])
    assert all(torch.equal(exported[k], v) for k, v in tensors.items())
    assert main(["models", "import", str(tmp_path / "missing.tar"), "--data-dir", data]) == 1
    assert "no such file" in capsys.readouterr().err
