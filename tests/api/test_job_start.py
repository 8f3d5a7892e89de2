"""Where a job starts, through the REST API with real workers on the CPU: the proposal of its
settings, a batch the data cannot fill, base models that cannot be had (refused at creation
with the reason), a model from a directory on the server (a real Qwen3-shaped model and
tokenizer, saved offline), and a library model continued (SL, then DPO from the SL model,
its reference being that model)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.support.api import EXAMPLES, add_dataset, platform_of, wait_state
from tests.unit.tokenizer_fixtures import qwen3_tokenizer
from transformers import AutoModelForCausalLM, Qwen3Config

from thinker.files import read_jsonl
from thinker.runs import RunDir


@pytest.mark.postgresql
def test_the_proposal_fills_what_a_request_leaves_out(client: TestClient) -> None:
    chat = add_dataset(client, EXAMPLES / "arithmetic" / "train.jsonl", "chat")
    proposal = client.post(
        "/api/jobs/proposal",
        json={"algorithm": "sl", "dataset_id": chat, "config": {"learning_rate": 1e-3}},
    )
    assert proposal.status_code == 200, proposal.text
    body = proposal.json()
    assert body["train_rows"] == 90  # 100 rows, 10% held out
    assert body["config"]["learning_rate"] == 1e-3  # given: kept
    assert body["config"]["max_steps"] == body["total_steps"] == body["stages"][0]["steps"]
    assert body["stages"][0]["why"]
    (warning,) = body["warnings"]  # 90 rows on a model with random weights
    assert "tends to memorise fewer than 300 rows" in warning

    schema = client.get("/api/jobs/config-schema").json()
    assert schema["sl"]["properties"]["learning_rate"]["exclusiveMinimum"] == 0
    assert schema["rl"]["properties"]["group_size"]["minimum"] == 2

    too_big = client.post(
        "/api/jobs", json={"algorithm": "sl", "dataset_id": chat, "config": {"batch_size": 100000}}
    )
    assert too_big.status_code == 422
    assert too_big.json()["problems"] == [
        "config.batch_size: 100000 is larger than the 90 training rows of the dataset; use at "
        "most 90"
    ]


@pytest.mark.postgresql
def test_a_model_that_cannot_be_had_is_refused_at_creation(client: TestClient) -> None:
    chat = add_dataset(client, EXAMPLES / "arithmetic" / "train.jsonl", "chat")

    def create(base_model: str) -> str:
        job = {"algorithm": "sl", "dataset_id": chat, "base_model": base_model}
        response = client.post("/api/jobs", json=job)
        assert response.status_code == 422, response.text
        return str(response.json()["detail"])

    # tests run with HF_HUB_OFFLINE=1: a hub id that is not cached cannot be fetched
    assert "runs offline (HF_HUB_OFFLINE=1)" in create("Qwen/Qwen3-0.6B")
    assert "no directory '/nonexistent/model'" in create("/nonexistent/model")
    assert "has no config.json" in create(str(EXAMPLES))
    assert "no model 'mdl_nothere' in the library" in create("mdl_nothere")
    assert client.get("/api/jobs").json()["count"] == 0  # nothing queued

    options = client.get("/api/base-models").json()["data"]
    assert {"id": "thinker/tiny", "kind": "builtin"}.items() <= options[0].items()


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A small Qwen3 model with a Qwen3 tokenizer and chat template, saved as a user's
    directory would be (config.json, safetensors, tokenizer files)."""
    tokenizer = qwen3_tokenizer()
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
    )
    directory = tmp_path / "my-qwen3"
    AutoModelForCausalLM.from_config(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def test_a_model_from_a_directory_on_the_server_trains(client: TestClient, model_dir: Path) -> None:
    chat = add_dataset(client, EXAMPLES / "arithmetic" / "train.jsonl", "chat")
    proposal = client.post(
        "/api/jobs/proposal",
        json={"algorithm": "sl", "dataset_id": chat, "base_model": str(model_dir)},
    ).json()
    # a pretrained model (not a built-in): a few epochs at the cookbook's rate for hidden 64
    assert proposal["config"]["learning_rate"] == pytest.approx(5e-4 * (2000 / 64) ** 0.0775, 0.02)
    job = client.post(
        "/api/jobs",
        json={
            "algorithm": "sl",
            "dataset_id": chat,
            "base_model": str(model_dir),
            "config": {"max_steps": 3, "batch_size": 4, "eval_every": 0, "save_every": 0},
        },
    )
    assert job.status_code == 201, job.text
    done = wait_state(client, job.json()["id"], ("succeeded", "failed"))
    assert done["state"] == "succeeded", done["log_tail"]
    (model,) = client.get(f"/api/models?job_id={done['id']}").json()["data"]
    assert model["base_model"] == str(model_dir)
    sample = {"model": model["id"], "prompt": "1+1", "max_tokens": 4}
    reply = client.post("/api/sample", json=sample)
    assert reply.status_code == 200, reply.text


def test_sl_then_dpo_from_the_sl_model(client: TestClient) -> None:
    chat = add_dataset(client, EXAMPLES / "arithmetic" / "train.jsonl", "chat")
    pairs = add_dataset(client, EXAMPLES / "preferences" / "train.jsonl", "preferences")
    sl = client.post(
        "/api/jobs",
        json={
            "algorithm": "sl",
            "dataset_id": chat,
            "config": {"max_steps": 20, "eval_every": 0, "save_every": 0},
        },
    )
    sl_done = wait_state(client, sl.json()["id"], ("succeeded", "failed"))
    assert sl_done["state"] == "succeeded", sl_done["log_tail"]
    (sl_model,) = client.get(f"/api/models?job_id={sl_done['id']}").json()["data"]

    dpo = client.post(
        "/api/jobs",
        json={
            "algorithm": "dpo",
            "dataset_id": pairs,
            "base_model": sl_model["id"],
            "config": {"max_steps": 2, "eval_every": 0, "save_every": 0, "batch_size": 4},
        },
    )
    assert dpo.status_code == 201, dpo.text
    created = dpo.json()
    assert created["base_model"] == "thinker/tiny"  # the SL model's own base
    assert created["parent_model_id"] == sl_model["id"]
    run_dir = platform_of(client).settings.runs_dir / created["id"]
    section = json.loads((RunDir(run_dir).job).read_text())["section"]
    sl_run = platform_of(client).settings.runs_dir / sl_done["id"]
    assert Path(section["init_from"]).is_relative_to(sl_run)  # its training state
    assert Path(section["reference_path"]).is_relative_to(sl_run)  # its sampler weights

    done = wait_state(client, created["id"], ("succeeded", "failed"))
    assert done["state"] == "succeeded", done["log_tail"]
    # The reference is the starting policy: at step 0 every margin is 0 and the loss ln 2.
    first = read_jsonl(RunDir(run_dir).metrics)[0]
    assert first["step"] == 0
    assert first["eval_dpo_loss"] == pytest.approx(math.log(2), abs=1e-4)
    (dpo_model,) = client.get(f"/api/models?job_id={done['id']}").json()["data"]
    lineage = client.get(f"/api/models/{dpo_model['id']}").json()["lineage"]
    assert lineage["parent_model"] == {"id": sl_model["id"], "name": sl_model["name"]}
    library = {o["id"] for o in client.get("/api/base-models").json()["data"]}
    assert sl_model["id"] in library


@pytest.mark.postgresql
def test_jobs_get_distinct_names(held: TestClient) -> None:
    """Names are given at creation: the jobs stay queued, nothing needs to train."""
    chat = add_dataset(held, EXAMPLES / "arithmetic" / "train.jsonl", "chat")
    job = {"algorithm": "sl", "dataset_id": chat, "name": "sums", "config": {"max_steps": 1}}
    names = [held.post("/api/jobs", json=job).json()["name"] for _ in range(3)]
    assert names == ["sums", "sums (2)", "sums (3)"]
