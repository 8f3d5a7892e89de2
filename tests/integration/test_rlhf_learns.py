"""RLHF on thinker/tiny: the reward model learns the preference of held-out pairs, RL against
it raises its score of held-out answers, and the pipeline links and resumes its three stages.

The full pipeline at learning strength (configs/rlhf.yaml) takes about 3 minutes on a CPU,
so stage 2 and stage 3 are proven separately (they share one reward model, trained once for
this module) and the whole pipeline runs once with a few steps per stage, to prove the
wiring and the resume. Thresholds were set from observed CPU runs with margin (recorded next
to each).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import thinker
from thinker.algorithms import rl, rlhf, sl
from thinker.algorithms.common import RunResult
from thinker.algorithms.reward_model import JudgeReward, RewardModelConfig, train_reward_model
from thinker.algorithms.rl_config import RLConfig
from thinker.algorithms.sl_config import SLConfig
from thinker.data.problems import load_problems
from thinker.engine.local import checkpoints
from thinker.errors import ConfigError
from thinker.files import read_jsonl
from thinker.pipeline.config import RLHFTraining
from thinker.pipeline.metadata import RunMetadata
from thinker.pipeline.stages import check_stage_settings, run_stages
from thinker.renderers import get_renderer
from thinker.runs import RunDir, RunLogger

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"
PREFERENCES = EXAMPLES / "preferences"
RLHF = EXAMPLES / "rlhf"


@pytest.fixture(autouse=True, scope="module")
def one_cpu_thread() -> Iterator[None]:
    # Thousands of small judge forwards: on two cores shared with other work, a second
    # OpenMP thread mostly waits for a descheduled peer (see test_dpo_learns.py).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rlhf")


@pytest.fixture(scope="module")
def service(storage: Path) -> thinker.ServiceClient:
    return thinker.ServiceClient(storage_dir=storage)


@pytest.fixture(scope="module")
def reward_model(storage: Path, service: thinker.ServiceClient) -> RunResult:
    """Stage 2: the pairwise judge, 80 steps on the preference pairs (observed ~30 s)."""
    # 50 of the 100 held-out pairs: each evaluation asks the judge 4 questions per pair.
    held_out = storage / "preferences_test_50.jsonl"
    lines = (PREFERENCES / "test.jsonl").read_text().splitlines(keepends=True)
    held_out.write_text("".join(lines[:50]))
    config = RewardModelConfig(
        dataset=PREFERENCES / "train.jsonl",
        eval_dataset=held_out,
        max_steps=80,
        learning_rate=3e-3,
        batch_size=16,
        eval_every=0,
        save_every=0,
        log_path=storage / "rm",
    )
    return asyncio.run(train_reward_model(config, service, RunLogger(config.log_path)))


def _adapter(storage: Path, path: str | None) -> dict[str, torch.Tensor]:
    assert path is not None
    return load_file(checkpoints.resolve(path, storage) / "adapter_model.safetensors")


def test_reward_model_accuracy_beats_chance(
    reward_model: RunResult, storage: Path, service: thinker.ServiceClient
) -> None:
    start, end = (m for m in read_jsonl(RunDir(storage / "rm").metrics) if "rm_eval_margin" in m)
    # The fresh adapter is the base model: no preference (observed P(chosen) 0.4998, margin
    # -0.0009; its accuracy, 0.18, only counts the signs of those tiny margins).
    assert start["step"] == 0
    assert start["rm_eval_prob_chosen"] == pytest.approx(0.5, abs=0.01)
    assert abs(start["rm_eval_margin"]) < 0.05
    # Observed after 80 steps: accuracy 1.0, P(chosen) 0.96, margin 3.25 on 50 unseen pairs.
    assert end["step"] == 80
    assert end["rm_eval_accuracy"] >= 0.9
    assert end["rm_eval_prob_chosen"] >= 0.8
    assert end["rm_eval_margin"] >= 1.5
    assert reward_model.final_metrics["rm_eval_accuracy"] == end["rm_eval_accuracy"]

    initial = service.create_lora_training_client("thinker/tiny", rank=32, seed=0).result()
    before = _adapter(storage, initial.save_weights_for_sampler("rm-initial").result().path)
    after = _adapter(storage, reward_model.sampler_path)
    assert before.keys() == after.keys()
    assert [k for k in before if torch.equal(before[k], after[k])] == []


def test_rl_against_the_judge_raises_its_score(
    reward_model: RunResult, storage: Path, service: thinker.ServiceClient
) -> None:
    # Stage 1: SL on demonstrations of mixed quality; the policy imitates both the direct
    # answers and the hedges (observed: 76% of greedy held-out answers hedge; ~16 s).
    sl_config = SLConfig(
        dataset=RLHF / "demos.jsonl",
        max_steps=150,
        learning_rate=3e-3,
        batch_size=32,
        eval_every=0,
        save_every=0,
        log_path=storage / "sl",
    )
    sl_result = asyncio.run(sl.main(sl_config, service, RunLogger(sl_config.log_path)))

    # Stage 3: RL from the SL weights, each group scored by the judge (observed ~23 s).
    judge_sampler = service.create_sampling_client(model_path=reward_model.sampler_path).result()
    judge = JudgeReward(judge_sampler, get_renderer("role_colon", judge_sampler.get_tokenizer()))
    rl_config = RLConfig(
        dataset=RLHF / "prompts.jsonl",
        eval_fraction=0.02,  # rl.main's own eval is a round robin: its mean is always 1/2
        reward={"type": "reward_model"},
        init_from=sl_result.state_path,
        group_size=4,
        groups_per_batch=16,  # 8 reached 0.84 in some runs and 0.51 in others (see below)
        max_tokens=32,
        learning_rate=1e-3,
        # Every step clipped: per token, the RL gradient's norm is 0.3-1, so the default
        # cap (1.0) never clips it, and unclipped the win rate below was 0.56 and 0.63 (two
        # runs); clipped, as every step was before the cap was per token, 0.84.
        grad_clip_norm=0.01,
        max_steps=12,
        eval_every=0,
        save_every=0,
        log_path=storage / "rl",
    )
    rl_result = asyncio.run(
        rl.main(rl_config, service, RunLogger(rl_config.log_path), reward_fn=judge)
    )
    rl_steps = [m for m in read_jsonl(storage / "rl" / "metrics.jsonl") if "grad_norm" in m]
    assert rl_steps and all(m["grad_clipped"] == 1.0 for m in rl_steps)

    # The judge's verdict on 50 held-out prompts, by greedy answers (observed ~7 s).
    held_out = load_problems(RLHF / "prompts_test.jsonl")[:50]
    policy = service.create_sampling_client(model_path=rl_result.sampler_path).result()
    baseline = service.create_sampling_client(model_path=sl_result.sampler_path).result()
    verdict = asyncio.run(rlhf.compare_policies(judge, held_out, policy, baseline, max_tokens=32))
    print("verdict", verdict)  # the figures, for the log
    # Observed: P(RL's answer beats SL's) 0.84; P(answer beats the reference answer) 0.16
    # for SL -> 0.50 for RL (RL stopped hedging: 0.50 is a tie with the direct reference).
    # Before empty answers lost unjudged, RL reached the same figures by answering nothing;
    # with the rule, 8 prompts a step ended at 0.51 or 0.83 depending on the run's order of
    # tests (the tiny policy's RL is that sensitive); 16 prompts gave 0.836 in three runs.
    assert verdict["eval_win_rate_vs_sl"] >= 0.7, verdict
    assert verdict["eval_judge_score_sl"] <= 0.3, verdict
    assert verdict["eval_judge_score_rl"] >= verdict["eval_judge_score_sl"] + 0.2, verdict

    before = _adapter(storage, sl_result.sampler_path)
    after = _adapter(storage, rl_result.sampler_path)
    assert [k for k in before if torch.equal(before[k], after[k])] == []


def _rlhf(rl_steps: int) -> RLHFTraining:
    """A few steps per stage: enough to prove the wiring, not the learning."""
    return RLHFTraining.model_validate(
        {
            "lora_rank": 8,
            "sl": {"dataset": RLHF / "demos.jsonl", "max_steps": 3, "batch_size": 8},
            "rm": {
                "dataset": PREFERENCES / "train.jsonl",
                "eval_fraction": 0.05,  # 15 pairs
                "max_steps": 3,
                "batch_size": 4,
            },
            "rl": {
                "dataset": RLHF / "prompts.jsonl",
                "eval_fraction": 0.02,  # 6 prompts
                "group_size": 2,
                "groups_per_batch": 2,
                "max_tokens": 8,
                "max_steps": rl_steps,
                "save_every": 0,
            },
        }
    )


def _train(run_dir: Path, section: RLHFTraining) -> RunResult:
    """RLHF's stages as the CLI and a job's worker train them (pipeline.stages)."""
    meta = RunMetadata.load(run_dir)
    stages = section.stages()
    meta.plan_training_stages(stages)
    check_stage_settings(stages, meta)
    return asyncio.run(run_stages(stages, RunDir(run_dir), meta))


def _logs(run_dir: Path) -> dict[str, str]:
    return {
        f"{stage}/{file}": getattr(RunDir(run_dir / stage), file).read_text()
        for stage in rlhf.STAGE_NAMES
        for file in ("metrics", "checkpoints")
    }


def test_rlhf_trains_as_three_linked_stages_and_does_not_rerun_finished_ones(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    result = _train(run_dir, _rlhf(rl_steps=2))

    stages = {r["name"]: r for r in RunMetadata.load(run_dir).data["training_stages"]}
    assert list(stages) == ["sl", "rm", "rl"]
    for name, steps in (("sl", 3), ("rm", 3), ("rl", 2)):
        assert stages[name]["status"] == "passed"
        assert stages[name]["run_dir"] == str(run_dir / name)
        assert stages[name]["steps"] == steps
        assert RunDir(run_dir / name).checkpoint_records()[-1].step == steps
    assert stages["rl"]["init_from"] == stages["sl"]["state_path"]  # RL continues SL
    assert stages["rm"]["init_from"] is None  # the judge starts from the base model
    assert "rm_eval_accuracy" in stages["rm"]["final_metrics"]
    assert "eval_win_rate_vs_sl" in stages["rl"]["final_metrics"]
    assert result.sampler_path == stages["rl"]["sampler_path"]
    assert (
        result.final_metrics["rm_eval_accuracy"]
        == stages["rm"]["final_metrics"]["rm_eval_accuracy"]
    )

    # Started again with the same settings: nothing trains again.
    logs = _logs(run_dir)
    again = _train(run_dir, _rlhf(rl_steps=2))
    assert _logs(run_dir) == logs
    assert again.sampler_path == result.sampler_path

    # A finished stage whose settings changed is refused, not silently rerun or skipped.
    with pytest.raises(ConfigError, match="stage 'rl' .* finished with other settings"):
        _train(run_dir, _rlhf(rl_steps=3))
    assert _logs(run_dir) == logs
