"""The hyperparameter proposal's rules (pipeline/proposal.py), on hand-made model and data facts."""

from __future__ import annotations

import pytest

from thinker.engine.local.hub import ModelFacts
from thinker.pipeline.proposal import DataFacts, cookbook_lr, propose, train_rows

TINY = ModelFacts("thinker/tiny", "builtin", True, "llama", 64, 180_224)
QWEN = ModelFacts("Qwen/Qwen3-0.6B", "hub", False, "qwen3", 1024, 596_000_000)
LLAMA = ModelFacts("meta-llama/Llama-3.1-8B", "hub", False, "llama", 4096, 8_030_000_000)


def _data(rows: int, answer: int = 0) -> dict[str, DataFacts]:
    return {"main": DataFacts("ds_x", rows, answer)}


@pytest.mark.parametrize(("model", "lr"), [(QWEN, 5.3e-4), (LLAMA, 2.9e-4)])
def test_pretrained_learning_rate_is_the_cookbooks(model: ModelFacts, lr: float) -> None:
    """5e-5 * 10 * (2000 / 1024) ** 0.0775 = 5.27e-4; (2000 / 4096) ** 0.781 * 5e-4 = 2.86e-4:
    TRAINING_GUIDE's table."""
    assert cookbook_lr(model) == lr


def test_held_out_share_is_cut_as_the_loader_cuts_it() -> None:
    assert train_rows(100, 0.1, {}) == 90
    assert train_rows(5, 0.1, {}) == 4  # at least one held out
    assert train_rows(100, 0.0, {}) == 100
    assert train_rows(100, 0.1, {"eval_dataset_id": "ds_y"}) == 100  # a separate set


def test_a_from_scratch_model_gets_many_steps_at_a_high_rate_whatever_the_size() -> None:
    for rows in (100, 400, 5000):
        (stage,) = propose("sl", TINY, _data(rows), {}).stages
        assert stage.config["max_steps"] == stage.steps >= 600
        assert stage.config["learning_rate"] >= 3e-3
        assert stage.config["batch_size"] == 32
        assert stage.config["eval_every"] >= 1 and stage.config["save_every"] >= 1


def test_a_small_set_on_a_from_scratch_model_is_warned_about() -> None:
    assert any("memorise" in w for w in propose("sl", TINY, _data(200), {}).warnings)
    assert propose("sl", TINY, _data(400), {}).warnings == []
    assert propose("sl", QWEN, _data(50), {}).warnings == []


def test_a_pretrained_model_gets_a_few_epochs() -> None:
    (stage,) = propose("sl", QWEN, _data(400), {}).stages
    # 360 rows to train on, batch 32 (360 // 8 = 45 -> 32), 3 epochs of 11 steps
    assert stage.config["batch_size"] == 32
    assert stage.steps == 33
    assert stage.config["learning_rate"] == 5.3e-4
    (small,) = propose("sl", QWEN, _data(50), {}).stages
    assert small.config["batch_size"] == 4  # 45 // 8 = 5 -> 4
    assert small.steps == 33  # 3 epochs of 11
    (tiny_set,) = propose("sl", QWEN, _data(20), {}).stages
    assert tiny_set.steps == 20  # at least MIN_PRETRAINED_STEPS


def test_what_the_request_gives_is_kept_and_steps_follow_it() -> None:
    given = {"learning_rate": 1e-4, "batch_size": 8, "num_epochs": 2, "dataset_id": "ds_x"}
    (stage,) = propose("sl", QWEN, _data(400), given).stages
    assert stage.config["learning_rate"] == 1e-4
    assert stage.config["batch_size"] == 8
    assert stage.config["num_epochs"] == 2 and "max_steps" not in stage.config
    assert stage.steps == 2 * (360 // 8)
    assert stage.config["dataset_id"] == "ds_x"
    (pinned,) = propose("sl", TINY, _data(400), {"max_steps": 50}).stages
    assert pinned.steps == 50 and pinned.config["eval_every"] == 5


def test_rl_on_random_weights_without_a_start_model_says_it_needs_one() -> None:
    proposal = propose("rl", TINY, _data(80, answer=2), {})
    assert any("cannot answer yet" in w for w in proposal.warnings)
    continued = propose("rl", TINY, _data(80, answer=2), {}, continues=True)
    assert continued.warnings == []
    (stage,) = continued.stages
    assert stage.config["max_tokens"] == 16  # 2 * 2 + 8, at least 16
    assert stage.config["group_size"] == 8 and stage.config["groups_per_batch"] == 16


def test_rlhf_proposes_each_stage_and_keeps_their_datasets() -> None:
    data = {
        "main": DataFacts("ds_a", 300),
        "rm": DataFacts("ds_b", 300),
        "rl": DataFacts("ds_c", 300, 4),
    }
    given = {"rm": {"dataset_id": "ds_b"}, "rl": {"dataset_id": "ds_c"}}
    proposal = propose("rlhf", TINY, data, given)
    config = proposal.request_config()
    assert set(config) == {"sl", "rm", "rl"}
    assert config["rm"]["dataset_id"] == "ds_b" and config["rl"]["dataset_id"] == "ds_c"
    assert config["rl"]["group_size"] == 4  # a judge compares every pair of a group
    assert proposal.total_steps == sum(s.steps for s in proposal.stages)
