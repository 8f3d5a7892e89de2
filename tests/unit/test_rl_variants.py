"""The RL variants' arithmetic with hand-computed values (TRAINING_GUIDE.md, "RL variants"), the
configs' presets and refusals, and the weighted losses through the local engine."""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import ValidationError

import thinker
from thinker.algorithms.rl import RLConfig, Rollout, _apply_kl_penalty, _datum, group_advantages
from thinker.algorithms.rl_variants import (
    advantages_G,
    k1,
    k3,
    loss_units,
    overlong_penalty,
    refill,
    shape_rewards,
    shaping_term,
    variant_metrics,
    weigh_tokens,
)
from thinker.rewards import Completion, Problem


def _config(**values: object) -> RLConfig:
    return RLConfig(dataset=Path("problems.jsonl"), **values)  # type: ignore[arg-type]


def _rollout(n: int, advantage: float = 0.0, text: str = "7", done: bool = True) -> Rollout:
    r = Rollout([1, 2, 3], list(range(10, 10 + n)), [-0.5] * n, None, Completion(text, done))
    r.advantage = advantage
    return r


# ---- advantages -------------------------------------------------------------------------


def test_advantages_minus_the_mean_and_over_the_std() -> None:
    """[1, 0, 0, 1]: mean 0.5; none: +-0.5; std: stdev (n - 1) = sqrt(1/3) = 0.577350, so
    0.5 / (0.577350 + 1e-6) = 0.866024. [3, 0]: stdev sqrt(4.5) = 2.121320, 1.5 / 2.121321 =
    0.707106. A constant group: 0 (the mean's rounding / 1e-6: below 1e-10)."""
    assert advantages_G([1.0, 0.0, 0.0, 1.0], "none") == [0.5, -0.5, -0.5, 0.5]
    got = advantages_G([1.0, 0.0, 0.0, 1.0], "std")
    assert got == pytest.approx([0.8660239, -0.8660239, -0.8660239, 0.8660239], abs=1e-7)
    assert advantages_G([3.0, 0.0], "std") == pytest.approx([0.7071064, -0.7071064], abs=1e-7)
    assert advantages_G([0.4, 0.4, 0.4], "std") == pytest.approx([0.0] * 3, abs=1e-9)
    group = [_rollout(1) for _ in range(4)]
    for r, reward in zip(group, [1.0, 0.0, 0.0, 1.0], strict=True):
        r.reward = reward
    group_advantages([group], "std")
    assert [r.advantage for r in group] == got


# ---- loss aggregation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("aggregation", "first", "second", "units"),
    [
        ("token", None, None, 6),  # untouched: every token weighs 1; 2 + 4 tokens
        ("sequence", [0.5, 0.5], [-0.25] * 4, 2),  # 1 / |o|: 1/2 and 1/4; 2 completions
        ("constant", [0.125, 0.125], [-0.125] * 4, 2),  # 1 / max_tokens = 1/8
    ],
)
def test_each_aggregation_weighs_the_tokens(
    aggregation: str, first: list[float] | None, second: list[float] | None, units: int
) -> None:
    """Completions of 2 and 4 tokens, advantages +1 and -1, max_tokens 8."""
    config = _config(max_tokens=8, loss_aggregation=aggregation)
    rollouts = [_rollout(2, 1.0), _rollout(4, -1.0)]
    weigh_tokens(rollouts, config)
    assert [r.token_advantages for r in rollouts] == [first, second]
    assert loss_units(rollouts, config) == units


def test_the_weight_multiplies_the_kl_penalised_advantages() -> None:
    """Per-token advantages [1.0, 0.8] (a KL penalty folded in) of a 2-token completion,
    sequence aggregation: [0.5, 0.4]."""
    r = _rollout(2, 1.0)
    r.token_advantages = [1.0, 0.8]
    weigh_tokens([r], _config(loss_aggregation="sequence"))
    assert r.token_advantages == [0.5, 0.4]


def test_overlong_filter_masks_cut_completions_out_of_the_loss() -> None:
    """A completion cut at max_tokens (terminated False): advantage 0 on every token, and
    counted in neither the tokens (token: 2, not 6) nor the completions (sequence: 1)."""
    for aggregation, units in (("token", 2), ("sequence", 1)):
        config = _config(overlong="filter", loss_aggregation=aggregation)
        rollouts = [_rollout(2, 1.0), _rollout(4, -1.0, done=False)]
        rollouts[1].token_advantages = [-1.0, -1.1, -1.2, -1.3]
        weigh_tokens(rollouts, config)
        assert rollouts[1].advantage == 0.0 and rollouts[1].token_advantages == [0.0] * 4
        assert loss_units(rollouts, config) == units


# ---- KL estimators ------------------------------------------------------------------------


def test_k1_and_k3() -> None:
    """log q = -1, log p_base = -1.5: k1 = 0.5; k3 = exp(-0.5) + 0.5 - 1 = 0.106531.
    log q = -2, log p_base = -1: k1 = -1 (k1 may be negative); k3 = e - 1 - 1 = 0.718282.
    Folded with kl_coef 0.1 into advantage 0.5: 0.5 - 0.1 * 0.106531 = 0.489347 (k3)."""
    assert k1(-1.0, -1.5) == 0.5 and k1(-2.0, -1.0) == -1.0
    assert k3(-1.0, -1.5) == pytest.approx(0.1065307, abs=1e-7)
    assert k3(-2.0, -1.0) == pytest.approx(0.7182818, abs=1e-7)
    assert k3(-0.3, -0.3) == 0.0
    r = Rollout([1], [2, 3], [-1.0, -2.0], None, Completion("x", True), advantage=0.5)
    r.base_logprobs = [-1.5, -1.0]
    _apply_kl_penalty([r], 0.1, "k3")
    assert r.token_advantages == pytest.approx([0.4893469, 0.4281718], abs=1e-7)
    _apply_kl_penalty([r], 0.1)  # k1: 0.5 - 0.1 * 0.5, 0.5 - 0.1 * -1
    assert r.token_advantages == pytest.approx([0.45, 0.6])


# ---- reward shaping ------------------------------------------------------------------------


def test_overlong_soft_penalty_in_its_three_regimes() -> None:
    """L_max 16, L_cache 4: 0 up to 12 tokens; (12 - 14) / 4 = -0.5 at 14; -1 at 16 (and
    beyond)."""
    assert [overlong_penalty(n, 16, 4) for n in (5, 12, 13, 14, 16, 20)] == [
        0.0, 0.0, -0.25, -0.5, -1.0, -1.0,
    ]  # fmt: skip
    config = _config(max_tokens=16, overlong="soft")  # overlong_cache: 16 // 4
    assert shaping_term(_rollout(14, text="x"), config) == -0.5
    config = _config(max_tokens=16, overlong="soft", overlong_cache=8)  # ramp from 8
    assert shaping_term(_rollout(14, text="x"), config) == -0.75


def test_format_reward_and_length_penalty() -> None:
    """Format: +0.2 if the completion matches ^\\d+$. Length: -0.01 per token beyond 3.
    "7" in 5 tokens: 1.0 + 0.2 - 0.02 = 1.18; "Not sure" in 2 tokens: 0 + 0 - 0 = 0."""
    config = _config(
        format_reward={"pattern": r"^\d+$", "weight": 0.2},
        length_penalty={"target": 3, "coef": 0.01},
    )
    good, hedge = _rollout(5, text="7"), _rollout(2, text="Not sure")
    good.reward = 1.0
    shape_rewards([[good, hedge]], config)
    assert good.reward == pytest.approx(1.18) and hedge.reward == 0.0
    assert variant_metrics([[good, hedge]], config, 0) == {
        "reward_shaping_mean": pytest.approx(0.09)
    }


def test_the_default_config_changes_nothing() -> None:
    """custom (the default): rewards, advantages and token counts as before the variants."""
    config = _config()
    assert (config.variant, config.advantage_norm, config.loss_aggregation) == (
        None, "none", "token",
    )  # fmt: skip
    assert (config.overlong, config.kl_estimator, config.dynamic_sampling) == ("none", "k1", False)
    r = _rollout(3, 0.5, done=False)
    r.reward = 1.0
    shape_rewards([[r]], config)
    weigh_tokens([r], config)
    assert (r.reward, r.advantage, r.token_advantages) == (1.0, 0.5, None)
    assert loss_units([r, _rollout(2)], config) == 5
    assert variant_metrics([[r]], config, 0) == {}
    assert _datum(r, "importance_sampling").loss_fn_inputs["advantages"].tolist() == [
        0.0, 0.0, 0.5, 0.5, 0.5,
    ]  # fmt: skip


# ---- the config ---------------------------------------------------------------------------


def test_each_variant_sets_its_keys_and_explicit_keys_win() -> None:
    grpo = _config(variant="grpo")
    assert (grpo.advantage_norm, grpo.loss_aggregation, grpo.kl_estimator) == (
        "std", "sequence", "k3",
    )  # fmt: skip
    dr = _config(variant="dr_grpo")
    assert (dr.advantage_norm, dr.loss_aggregation) == ("none", "constant")
    dapo = _config(variant="dapo")
    assert (dapo.advantage_norm, dapo.loss_aggregation, dapo.loss_fn) == ("std", "token", "ppo")
    assert dapo.loss_fn_config == {"clip_low_threshold": 0.8, "clip_high_threshold": 1.28}
    assert dapo.dynamic_sampling and dapo.overlong == "soft"
    gspo = _config(variant="gspo")
    assert (gspo.loss_fn, gspo.advantage_norm, gspo.loss_aggregation) == (
        "gspo", "std", "sequence",
    )  # fmt: skip
    assert _config(variant="custom") == _config(variant="custom", advantage_norm="none")
    mine = _config(variant="dapo", overlong="filter", loss_fn_config={"clip_high_threshold": 1.3})
    assert mine.overlong == "filter" and mine.loss_fn_config == {"clip_high_threshold": 1.3}
    other_loss = _config(variant="dapo", loss_fn="cispo")  # DAPO's thresholds are ppo's
    assert other_loss.loss_fn_config == {}
    assert RLConfig.model_validate(dapo.model_dump()) == dapo  # a saved config reads back


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"dynamic_sampling": True, "drop_constant_groups": False}, "drop_constant_groups false"),
        ({"variant": "dapo", "drop_constant_groups": False}, "dynamic_sampling replaces"),
        ({"loss_aggregation": "sequence", "loss_fn": "dro", "loss_fn_config": {"beta": 0.1}},
         "a term without the advantage"),
        ({"loss_aggregation": "mean"}, "'token', 'sequence' or 'constant'"),
        ({"overlong_cache": 4}, "only with overlong soft"),
        ({"overlong": "soft", "overlong_cache": 40, "max_tokens": 32}, "longer than"),
        ({"format_reward": {"pattern": "(", "weight": 0.1}}, "not a regular expression"),
        ({"variant": "ppo"}, "'grpo', 'dr_grpo', 'dapo', 'gspo' or 'custom'"),
    ],
)  # fmt: skip
def test_contradictions_are_refused_at_load(values: dict[str, object], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        _config(**values)


# ---- dynamic sampling ------------------------------------------------------------------------


def test_dynamic_sampling_refills_from_problems_not_yet_in_the_step() -> None:
    """groups_per_batch 4; of the batch p0-p3 only p1 and p3 vary (2 kept). The problems
    not in the batch, shuffled for step 5, come as p7 p5 p4 p11 p10 p8 p6 p9. Round 1 plays
    ceil(2 missing * 4 groups / 2 kept) = 4: p7 p5 p4 p11, of which p5 varies (3 kept of 8).
    Round 2 plays ceil(1 * 8 / 3) = 3: p10 p8 p6, where p8 varies only through the format
    reward (shaped before the check). 4 kept: it stops after 2 of its 3 rounds. Refill
    groups are seeded as the step's groups 4, 5, ... would be."""
    train = [Problem(messages=[{"role": "user", "content": f"p{i}"}]) for i in range(12)]
    batch = train[:4]
    calls: list[tuple[list[str], list[int]]] = []

    def group(p: Problem) -> list[Rollout]:
        name = p.messages[-1]["content"]
        rewards = [1.0, 0.0] if name in {"p1", "p3", "p5"} else [0.0, 0.0]
        return [
            Rollout([1], [2], [-0.5], None, Completion(f"{name}-{j}", True), reward=x)
            for j, x in enumerate(rewards)
        ]

    async def play(
        problems: list[Problem], config: RLConfig, seeds: list[int], version: int, dro: bool
    ) -> list[list[Rollout]]:
        calls.append(([p.messages[-1]["content"] for p in problems], seeds))
        return [group(p) for p in problems]

    config = _config(
        group_size=2, groups_per_batch=4, dynamic_sampling=True, max_refill_rounds=3,
        format_reward={"pattern": "p8-0", "weight": 1.0},
    )  # fmt: skip
    got = asyncio.run(refill(train, batch, [group(p) for p in batch], config, 5, play))
    assert calls == [
        (["p7", "p5", "p4", "p11"], [5 * 1009 + 4 + i for i in range(4)]),
        (["p10", "p8", "p6"], [5 * 1009 + 8 + i for i in range(3)]),
    ]
    assert got.rounds == 2 and got.batch == batch + [train[i] for i in (7, 5, 4, 11, 10, 8, 6)]
    assert [[r.reward for r in g] for g in got.groups[8:]] == [[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]]
    assert sum(len({r.reward for r in g}) > 1 for g in got.groups) == 4
    assert variant_metrics(got.groups, config, got.rounds) == {
        "refill_rounds": 2.0, "reward_shaping_mean": pytest.approx(1 / 22),
    }  # fmt: skip
    off = asyncio.run(refill(train, batch, [], _config(), 5, play))
    assert (off.batch, off.groups, off.rounds, off.seconds) == (batch, [], 0, 0.0)


# ---- through the engine -------------------------------------------------------------------


def test_the_weighted_datums_give_each_aggregations_loss(tmp_path: Path) -> None:
    """ppo with DAPO's clip (0.8, 1.28) on thinker/tiny; the sampler's logprobs are set from
    the learner's so that r = 1.5 on completion 1 (2 tokens, A = +1: min(1.5, 1.28) = 1.28, a
    term -1.28 a token) and r = 0.5 on completion 2 (4 tokens, A = -1: min(-0.5, -0.8) =
    -0.8, a term +0.8 a token). The formulas, max_tokens 8:
      token    (1 / 6) * (2 * -1.28 + 4 * 0.8)               =  0.64 / 6 = 0.106667
      sequence (1 / 2) * (-1.28 + 0.8)                       = -0.24
      constant (1 / 2) * ((2 * -1.28 + 4 * 0.8) / 8)         =  0.04
    and the engine's loss:sum divided by loss_units gives each."""
    service = thinker.ServiceClient(backend="local", storage_dir=tmp_path, device="cpu")
    client = service.create_lora_training_client("thinker/tiny", rank=4, seed=0).result()
    rollouts = [_rollout(2, 1.0), _rollout(4, -1.0)]
    plain = [_datum(r, "importance_sampling") for r in rollouts]
    out = client.forward(plain, "importance_sampling").result()
    for r, result, ratio in zip(rollouts, out.loss_fn_outputs, (1.5, 0.5), strict=True):
        learner = result["logprobs"].to_torch()[len(r.prompt_tokens) - 1 :].tolist()
        r.logprobs = [p - math.log(ratio) for p in learner]
    clip = {"clip_low_threshold": 0.8, "clip_high_threshold": 1.28}
    for aggregation, expected in (("token", 0.64 / 6), ("sequence", -0.24), ("constant", 0.04)):
        config = _config(max_tokens=8, loss_aggregation=aggregation, loss_fn="ppo")
        weighted = [replace(r) for r in rollouts]
        weigh_tokens(weighted, config)
        data = [_datum(r, "ppo") for r in weighted]
        loss = client.forward(data, "ppo", clip).result().metrics["loss:sum"]
        assert loss / loss_units(weighted, config) == pytest.approx(expected, abs=1e-5)
