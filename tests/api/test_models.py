"""/api/models on real checkpoints: a few SL steps of thinker/tiny, registered as a job's models.

The run is trained once per module and copied into each test's data directory, where the job
machinery would have left it (`runs/<job id>/`). Rows are inserted through the platform's own
sessions, as the job machinery inserts them.
"""

from __future__ import annotations

import asyncio
import io
import shutil
import zipfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient
from peft import PeftModel
from safetensors.torch import load, load_file
from sqlalchemy import select

from thinker.algorithms.sl import SLConfig, main
from thinker.engine.local import checkpoints
from thinker.engine.local.models import Placement, load_base_model, load_tokenizer
from thinker.files import read_jsonl
from thinker.runs import RunDir, RunLogger
from thinker.server.platform import Platform
from thinker.settings import Settings
from thinker.store import Dataset, Job, Model

pytestmark = pytest.mark.postgresql  # about what is stored: on PostgreSQL too

torch.set_num_threads(1)  # two cores shared by parallel test runs

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"
JOB_ID = "job_0123456789ab"
DATASET_ID = "ds_0123456789ab"
TINKER_JOB_ID = "job_ba9876543210"
CPU_FP32 = Placement(torch.device("cpu"), torch.float32)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An SL run of 3 steps with checkpoints at steps 2 and 3 (learning rate high enough that
    the adapter visibly moves the logits)."""
    run_dir = tmp_path_factory.mktemp("sl") / JOB_ID
    config = SLConfig(
        dataset=EXAMPLES / "arithmetic" / "train.jsonl",
        log_path=run_dir,
        max_steps=3,
        batch_size=4,
        save_every=2,
        eval_every=0,
        learning_rate=3e-3,
        lora_rank=8,
    )
    asyncio.run(main(config, logger=RunLogger(run_dir)))
    return run_dir


def _call(client: TestClient, fn: Callable[[Platform], Coroutine[Any, Any, Any]]) -> Any:
    """Run `fn(platform)` on the app's event loop (its engine is bound to that loop)."""
    platform = client.app.other_asgi_app.state.platform  # type: ignore[attr-defined]
    return client.portal.call(fn, platform)  # type: ignore[union-attr]


@pytest.fixture
def models(client: TestClient, settings: Settings, trained_run: Path) -> list[str]:
    """Ids of the local models (step 2, step 3) and one Tinker model, newest last."""
    shutil.copytree(trained_run, settings.runs_dir / JOB_ID)
    metrics = {r["step"]: r for r in read_jsonl(RunDir(trained_run).metrics)}
    records = read_jsonl(RunDir(trained_run).checkpoints)
    assert [r["step"] for r in records] == [2, 3]

    async def insert(platform: Platform) -> list[str]:
        rows: list[Any] = [
            Dataset(
                id=DATASET_ID,
                name="arithmetic",
                kind="chat",
                source_format="jsonl",
                filename="train.jsonl",
                num_rows=100,
                size_bytes=1000,
                sha256="0" * 64,
            ),
            _job(JOB_ID, "local", "thinker/tiny", DATASET_ID),
            _job(TINKER_JOB_ID, "tinker", "Qwen/Qwen3-8B", None),
        ]
        for i, record in enumerate(records):
            rows.append(
                Model(
                    id=f"mdl_00000000000{i}",
                    name=f"arith-{record['name']}",
                    job_id=JOB_ID,
                    dataset_id=DATASET_ID,
                    base_model="thinker/tiny",
                    backend="local",
                    step=record["step"],
                    sampler_path=record["sampler_path"],
                    state_path=record["state_path"],
                    metrics={"train_mean_nll": metrics[record["step"]]["train_mean_nll"]},
                    created_at=1000.0 + i,
                )
            )
        rows.append(
            Model(
                id="mdl_0000000000ff",
                name="remote",
                job_id=TINKER_JOB_ID,
                base_model="Qwen/Qwen3-8B",
                backend="tinker",
                step=10,
                sampler_path="tinker://abc-123/sampler_weights/000010",
                created_at=2000.0,
            )
        )
        async with platform.sessions() as session:
            session.add_all(rows[:3])
            await session.flush()  # the jobs before the models that point to them
            session.add_all(rows[3:])
            await session.commit()
        return [r.id for r in rows[3:]]

    return _call(client, insert)  # type: ignore[no-any-return]


def _job(job_id: str, backend: str, base_model: str, dataset_id: str | None) -> Job:
    return Job(
        id=job_id,
        name=f"{backend} job",
        algorithm="sl",
        backend=backend,
        base_model=base_model,
        dataset_id=dataset_id,
        config={},
        state="succeeded",
        resource="cpu" if backend == "local" else "remote",
    )


def _sampler_dir(settings: Settings, client: TestClient, model_id: str) -> Path:
    path = client.get(f"/api/models/{model_id}").json()["sampler_path"]
    return checkpoints.resolve(path, settings.runs_dir / JOB_ID)


def test_list_filters_and_pages(client: TestClient, models: list[str]) -> None:
    step2, step3, remote = models
    everything = client.get("/api/models").json()
    assert everything["count"] == 3
    assert [m["id"] for m in everything["data"]] == [remote, step3, step2]  # newest first

    def ids(**params: object) -> list[str]:
        response = client.get("/api/models", params=params)
        assert response.status_code == 200, response.text
        return [m["id"] for m in response.json()["data"]]

    assert ids(job_id=JOB_ID) == [step3, step2]
    assert ids(base_model="Qwen/Qwen3-8B") == [remote]
    assert ids(dataset_id=DATASET_ID, job_id=JOB_ID) == [step3, step2]
    assert ids(lifecycle="archived") == []
    page = client.get("/api/models", params={"offset": 1, "limit": 1}).json()
    assert page["count"] == 3 and [m["id"] for m in page["data"]] == [step3]
    assert client.get("/api/models", params={"lifecycle": "gone"}).status_code == 422
    assert client.get("/api/models", params={"limit": 0}).status_code == 422


def test_read_model_with_lineage(client: TestClient, models: list[str]) -> None:
    body = client.get(f"/api/models/{models[1]}").json()
    assert body["step"] == 3 and body["backend"] == "local" and body["lifecycle"] == "active"
    assert body["sampler_path"].startswith("tinker://")
    assert body["sampler_path"].endswith("/sampler_weights/000003")
    assert body["export"] is None
    lineage = body["lineage"]
    assert lineage["base_model"] == "thinker/tiny" and lineage["step"] == 3
    assert lineage["dataset"] == {"id": DATASET_ID, "name": "arithmetic"}
    assert lineage["job"] == {
        "id": JOB_ID,
        "name": "local job",
        "algorithm": "sl",
        "state": "succeeded",
    }
    assert lineage["metrics"]["train_mean_nll"] > 0
    remote = client.get(f"/api/models/{models[2]}").json()
    assert remote["lineage"]["dataset"] is None and remote["lineage"]["job"]["id"] == TINKER_JOB_ID
    missing = client.get("/api/models/mdl_ffffffffffff")
    assert missing.status_code == 404 and "mdl_ffffffffffff" in missing.json()["detail"]


def test_lineage_survives_a_deleted_dataset(client: TestClient, models: list[str]) -> None:
    async def drop_dataset(platform: Platform) -> None:
        async with platform.sessions() as session:
            for job in await session.scalars(select(Job).where(Job.dataset_id == DATASET_ID)):
                job.dataset_id = None
            await session.flush()
            await session.delete(await session.get(Dataset, DATASET_ID))
            await session.commit()

    _call(client, drop_dataset)
    lineage = client.get(f"/api/models/{models[0]}").json()["lineage"]
    assert lineage["dataset"] == {"id": DATASET_ID, "name": None}


def test_update_name_and_lifecycle(client: TestClient, models: list[str]) -> None:
    url = f"/api/models/{models[0]}"
    response = client.patch(url, json={"lifecycle": "deprecated", "name": "first try"})
    assert response.status_code == 200, response.text
    assert response.json()["lifecycle"] == "deprecated" and response.json()["name"] == "first try"
    assert client.get("/api/models", params={"lifecycle": "deprecated"}).json()["count"] == 1
    bad = client.patch(url, json={"lifecycle": "deleted"})
    assert bad.status_code == 422 and "lifecycle" in bad.json()["detail"]
    assert client.patch(url, json={"state": "archived"}).status_code == 422  # unknown field
    assert client.patch(url, json={"name": ""}).status_code == 422
    assert client.get(url).json()["lifecycle"] == "deprecated"  # refused changes changed nothing


def test_adapter_zip_holds_the_checkpoint(
    client: TestClient, settings: Settings, models: list[str]
) -> None:
    response = client.get(f"/api/models/{models[1]}/adapter")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/zip"
    assert f"{models[1]}-adapter.zip" in response.headers["content-disposition"]
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    assert sorted(archive.namelist()) == ["adapter_config.json", "adapter_model.safetensors"]
    assert archive.testzip() is None
    zipped = load(archive.read("adapter_model.safetensors"))
    stored = load_file(_sampler_dir(settings, client, models[1]) / "adapter_model.safetensors")
    assert zipped.keys() == stored.keys() and len(stored) > 0
    for name, tensor in stored.items():
        assert torch.equal(zipped[name], tensor), name


def test_tinker_models_have_no_files_here(client: TestClient, models: list[str]) -> None:
    for response in (
        client.get(f"/api/models/{models[2]}/adapter"),
        client.post(f"/api/models/{models[2]}/export"),
    ):
        assert response.status_code == 409
        assert "Tinker" in response.json()["detail"]


def test_export_merges_and_loads_through_the_engine(
    client: TestClient, settings: Settings, models: list[str]
) -> None:
    model_id = models[1]
    assert client.get(f"/api/models/{model_id}/export/download").status_code == 404
    response = client.post(f"/api/models/{model_id}/export")
    assert response.status_code == 200, response.text
    export = response.json()
    path = Path(export["path"])
    assert path == settings.data_dir / "exports" / model_id and path.is_dir()
    assert sorted(export["files"]) == sorted(p.name for p in path.iterdir())
    assert export["size_bytes"] == sum(p.stat().st_size for p in path.iterdir())
    assert "model.safetensors" in export["files"] and "config.json" in export["files"]
    assert not [f for f in export["files"] if f.endswith((".bin", ".pt", ".pth", ".pkl"))]
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp dir left
    assert client.get(f"/api/models/{model_id}").json()["export"] == export

    # The export is a base model for our engine: same tokens, same logits as base + adapter.
    tokenizer = load_tokenizer(str(path))
    ids = torch.tensor([tokenizer("User: 12+7\n\nAssistant:").input_ids])
    assert ids.tolist() == [load_tokenizer("thinker/tiny")("User: 12+7\n\nAssistant:").input_ids]
    merged = load_base_model(str(path), CPU_FP32)
    base = load_base_model("thinker/tiny", CPU_FP32)
    with torch.no_grad():
        base_logits = base(ids).logits
        adapted = PeftModel.from_pretrained(base, _sampler_dir(settings, client, model_id))
        adapter_logits = adapted(ids).logits
        merged_logits = merged(ids).logits
    assert (adapter_logits - base_logits).abs().max() > 1e-2  # the adapter matters
    torch.testing.assert_close(merged_logits, adapter_logits, atol=1e-4, rtol=1e-4)

    # A second export is the same one; the download is that directory, zipped.
    assert client.post(f"/api/models/{model_id}/export").json() == export
    download = client.get(f"/api/models/{model_id}/export/download")
    assert download.status_code == 200
    archive = zipfile.ZipFile(io.BytesIO(download.content))
    assert sorted(archive.namelist()) == sorted(export["files"])
    assert archive.read("model.safetensors") == (path / "model.safetensors").read_bytes()


def test_delete_removes_row_sampler_weights_and_export(
    client: TestClient, settings: Settings, models: list[str]
) -> None:
    model_id = models[0]
    sampler = _sampler_dir(settings, client, model_id)
    state = checkpoints.resolve(
        client.get(f"/api/models/{model_id}").json()["state_path"], settings.runs_dir / JOB_ID
    )
    export = settings.data_dir / "exports" / model_id
    assert client.post(f"/api/models/{model_id}/export").status_code == 200
    response = client.delete(f"/api/models/{model_id}")
    assert response.status_code == 204
    assert client.get(f"/api/models/{model_id}").status_code == 404
    assert not sampler.exists() and not export.exists()
    assert (state / "adapter_model.safetensors").is_file()  # a resume may still need it
    assert _sampler_dir(settings, client, models[1]).is_dir()  # the other checkpoint stays
    assert client.get("/api/models").json()["count"] == 2
    assert client.delete(f"/api/models/{model_id}").status_code == 404
    remote = client.delete(f"/api/models/{models[2]}")  # no local files: only the row goes
    assert remote.status_code == 204 and client.get("/api/models").json()["count"] == 1


def test_missing_files_are_404_not_500(
    client: TestClient, settings: Settings, models: list[str]
) -> None:
    shutil.rmtree(_sampler_dir(settings, client, models[0]))
    for response in (
        client.get(f"/api/models/{models[0]}/adapter"),
        client.post(f"/api/models/{models[0]}/export"),
    ):
        assert response.status_code == 404 and "gone" in response.json()["detail"]


def test_damaged_adapter_files_are_503_never_served(
    client: TestClient, settings: Settings, models: list[str]
) -> None:
    """Bytes overwritten on disk: the download and the export refuse it by name (the
    checkpoint's SHA256SUMS), where a corrupt file used to be served with 200."""
    step2, step3, _ = models
    flipped = _sampler_dir(settings, client, step2) / "adapter_model.safetensors"
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0xFF
    flipped.write_bytes(bytes(data))
    truncated = _sampler_dir(settings, client, step3) / "adapter_config.json"
    truncated.write_bytes(truncated.read_bytes()[:10])
    for model_id, name in ((step2, "adapter_model.safetensors"), (step3, "adapter_config.json")):
        for response in (
            client.get(f"/api/models/{model_id}/adapter"),
            client.post(f"/api/models/{model_id}/export"),
        ):
            assert response.status_code == 503, response.text
            assert f"{name} does not match its checksum" in response.json()["detail"]
    assert not (settings.data_dir / "exports").exists() or not list(
        (settings.data_dir / "exports").iterdir()
    )
