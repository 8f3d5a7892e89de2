"""The pairwise judge: its prompt, its training example, and how its answers become rewards.

The arithmetic is checked by hand; the reward itself runs on a real judge client (thinker/tiny
on the local engine), its output recomputed from that client's own `compute_logprobs`.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from pydantic import ValidationError
from tinker import types

import thinker
from thinker.algorithms.reward_model import (
    JudgeReward,
    judge_datum,
    judge_messages,
    preference,
    render_judge_prompt,
    round_robin_rewards,
)
from thinker.algorithms.rlhf import RLHFConfig
from thinker.errors import DatasetError
from thinker.renderers import Message, get_renderer
from thinker.rewards import Completion, Problem

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples"
QUESTION = [Message(role="user", content="3+4")]


def test_judge_prompt_shows_the_question_and_both_responses() -> None:
    (message,) = judge_messages(QUESTION, "7", "I am not sure, maybe 8.")
    assert message == {
        "role": "user",
        "content": "Question: 3+4\n"
        "Response A: 7\n"
        "Response B: I am not sure, maybe 8.\n"
        "Which response is better, A or B?",
    }


def test_judge_prompt_writes_a_longer_conversation_as_a_transcript() -> None:
    prompt = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="3+4"),
    ]
    (message,) = judge_messages(prompt, "7", "8")
    assert message["content"].startswith("Question: system: Be brief.\nuser: 3+4\nResponse A: 7")


@pytest.fixture(autouse=True, scope="module")
def one_cpu_thread() -> Iterator[None]:
    # Many small forwards: on two shared cores, a second OpenMP thread only waits (as in
    # test_dpo_learns.py).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def judge_sampler() -> Any:
    """A real judge client: thinker/tiny's base weights, read through the local engine."""
    service = thinker.ServiceClient()
    return service.create_sampling_client(base_model="thinker/tiny").result()


@pytest.fixture(scope="module")
def renderer(judge_sampler: Any) -> Any:
    return get_renderer("role_colon", judge_sampler.get_tokenizer())


def test_rendered_judge_prompt_and_its_training_example(renderer: Any) -> None:
    judge_prompt = render_judge_prompt(renderer, QUESTION, "7", "I am not sure, maybe 8.")
    tokenizer = renderer.tokenizer
    # role_colon on the byte-level tokenizer: the deciding token is the letter, after "Assistant: "
    assert tokenizer.decode(judge_prompt.prefix) == (
        "User: Question: 3+4\nResponse A: 7\nResponse B: I am not sure, maybe 8.\n"
        "Which response is better, A or B?\n\nAssistant: "
    )
    assert tokenizer.decode([judge_prompt.token_a]) == "A"
    assert tokenizer.decode([judge_prompt.token_b]) == "B"

    datum = judge_datum(judge_prompt, "B")
    weights = datum.loss_fn_inputs["weights"].to_torch()
    targets = datum.loss_fn_inputs["target_tokens"].to_torch()
    assert datum.model_input.to_ints() == judge_prompt.prefix
    assert weights.tolist() == [0.0] * (len(judge_prompt.prefix) - 1) + [1.0]
    assert int(targets[-1]) == judge_prompt.token_b


def test_judge_prompt_over_max_length_keeps_its_end(renderer: Any) -> None:
    full = render_judge_prompt(renderer, QUESTION, "7", "8")
    cut = render_judge_prompt(renderer, QUESTION, "7", "8", max_length=20)
    assert len(cut.prefix) == 19 and cut.prefix == full.prefix[-19:]
    assert (cut.token_a, cut.token_b) == (full.token_a, full.token_b)


def test_preference_averages_both_orders_by_hand() -> None:
    """x shown as A: p(A) = 0.6, p(B) = 0.2, so P(x) = 0.6 / 0.8 = 0.75 (log-odds ln 3).
    y shown as A: p(A) = p(B) = 0.3, so P(x) = 0.5 (log-odds 0).
    P(x beats y) = (0.75 + 0.5) / 2 = 0.625; log-odds (ln 3 + 0) / 2 = 0.549306."""
    x_first = (math.log(0.6), math.log(0.2))
    y_first = (math.log(0.3), math.log(0.3))
    probability, log_odds = preference(x_first, y_first)
    assert probability == pytest.approx(0.625)
    assert log_odds == pytest.approx(0.5 * math.log(3))
    # Seen from y, the same two prompts (y first is now "its" first) give the complement.
    swapped = preference(y_first, x_first)
    assert swapped == pytest.approx((0.375, -0.5 * math.log(3)))


def test_a_position_bias_alone_averages_out() -> None:
    """A judge that says "A" with p = 0.9 whatever it is shown: 0.9 one way, 0.1 the other."""
    biased = (math.log(0.9), math.log(0.1))
    assert preference(biased, biased) == pytest.approx((0.5, 0.0))


def test_round_robin_rewards_by_hand() -> None:
    """Three completions; P(0 beats 1) = 0.8, P(0 beats 2) = 0.6, P(1 beats 2) = 0.3.
    reward_0 = (0.8 + 0.6) / 2 = 0.7; reward_1 = (0.2 + 0.3) / 2 = 0.25;
    reward_2 = (0.4 + 0.7) / 2 = 0.55. They average 1/2, as every round robin does."""
    win = [[0.5, 0.8, 0.6], [0.2, 0.5, 0.3], [0.4, 0.7, 0.5]]
    rewards = round_robin_rewards(win)
    assert rewards == pytest.approx([0.7, 0.25, 0.55])
    assert sum(rewards) / 3 == pytest.approx(0.5)
    with pytest.raises(ValueError):
        round_robin_rewards([[0.5]])


def _by_hand(sampler: Any, renderer: Any, x: str, y: str) -> float:
    """P(x beats y) from the sampler's own logprobs of the four judge answers."""
    logprobs = []
    for a, b in ((x, y), (y, x)):
        judge_prompt = render_judge_prompt(renderer, QUESTION, a, b)
        for label in ("A", "B"):
            tokens = types.ModelInput.from_ints(judge_prompt.sequence(label))
            logprobs.append(sampler.compute_logprobs(tokens).result()[-1])
    l_a1, l_b1, l_a2, l_b2 = logprobs
    sigmoid = torch.sigmoid
    return 0.5 * float(sigmoid(torch.tensor(l_a1 - l_b1)) + sigmoid(torch.tensor(l_b2 - l_a2)))


def test_judge_reward_is_each_completions_mean_win_probability(
    judge_sampler: Any, renderer: Any
) -> None:
    texts = ["7", "I am not sure, maybe 8.", "8", "7"]
    reward = JudgeReward(judge_sampler, renderer)
    rewards = reward(Problem(QUESTION), [Completion(t, True) for t in texts])

    distinct = ["7", "I am not sure, maybe 8.", "8"]
    p = {(x, y): _by_hand(judge_sampler, renderer, x, y) for x in distinct for y in distinct}
    assert p[("7", "8")] != pytest.approx(0.5, abs=1e-6)  # the judge does tell them apart
    for x, y in p:
        assert p[(x, y)] + p[(y, x)] == pytest.approx(1.0)  # and P(x, x) = 1/2 exactly
    win = [[0.5 if x == y else p[(x, y)] for y in texts] for x in texts]
    expected = [sum(row[j] for j in range(4) if j != i) / 3 for i, row in enumerate(win)]
    assert rewards == pytest.approx(expected, abs=1e-6)
    assert rewards[0] == rewards[3]  # identical completions score alike
    assert sum(rewards) / 4 == pytest.approx(0.5)


def test_a_lone_completion_is_judged_against_the_reference(
    judge_sampler: Any, renderer: Any
) -> None:
    reward = JudgeReward(judge_sampler, renderer)
    problem = Problem(QUESTION, row={"prompt": "3+4", "reference": "7"})
    (score,) = reward(problem, [Completion("8", True)])
    assert score == pytest.approx(_by_hand(judge_sampler, renderer, "8", "7"), abs=1e-6)
    (tie,) = reward(problem, [Completion("7", True)])
    assert tie == pytest.approx(0.5)
    with pytest.raises(DatasetError, match="reference"):
        reward(Problem(QUESTION), [Completion("8", True)])


def test_an_empty_answer_loses_to_any_answer_unjudged(judge_sampler: Any, renderer: Any) -> None:
    """An empty answer was never in the judge's pairs; RL against the bare judge made every
    answer empty. It now loses every comparison with a non-empty answer (P = 0) and ties
    with another empty one, whatever the judge would have said."""
    reward = JudgeReward(judge_sampler, renderer)
    texts = ["", "8", " ", "7"]
    rewards = reward(Problem(QUESTION), [Completion(t, True) for t in texts])
    p78 = _by_hand(judge_sampler, renderer, "7", "8")
    # "" vs "8" 0, vs " " 1/2, vs "7" 0; "8" beats both empties, then P(8 beats 7)
    assert rewards == pytest.approx([1 / 6, (2 + 1 - p78) / 3, 1 / 6, (2 + p78) / 3], abs=1e-6)
    problem = Problem(QUESTION, row={"prompt": "3+4", "reference": "7"})
    assert reward(problem, [Completion("  ", True)]) == [0.0]
    assert reward.compare([(QUESTION, "8", "")]) == [(1.0, 20.0)]


def test_generator_reproduces_the_shipped_rlhf_files(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_rlhf", EXAMPLES / "rlhf" / "make_rlhf.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_rlhf(tmp_path)
    for name in ("demos.jsonl", "prompts.jsonl", "prompts_test.jsonl"):
        assert (tmp_path / name).read_bytes() == (EXAMPLES / "rlhf" / name).read_bytes()


# ---- the RLHF config: shared fields given once, copied into each stage ----------------------
def _rlhf_fields(**top: Any) -> dict[str, Any]:
    return {
        "log_path": "runs/x",
        "sl": {"dataset": "demos.jsonl"},
        "rm": {"dataset": "pairs.jsonl"},
        "rl": {"dataset": "prompts.jsonl"},
        **top,
    }


def test_rlhf_config_copies_the_shared_fields_into_each_stage() -> None:
    config = RLHFConfig.model_validate(_rlhf_fields(lora_rank=8, seed=3, backend="tinker"))
    for stage, section in (("sl", config.sl), ("rm", config.rm), ("rl", config.rl)):
        assert (section.lora_rank, section.seed, section.backend) == (8, 3, "tinker")
        assert section.log_path == Path("runs/x") / stage
    assert config.rl.reward.type == "reward_model" and config.rl.init_from is None
    # A dump validates back, also under another run directory (as a pipeline moves it).
    moved = RLHFConfig.model_validate({**config.model_dump(), "log_path": "elsewhere"})
    assert moved.sl.log_path == Path("elsewhere/sl") and moved.rl == config.rl.model_copy(
        update={"log_path": Path("elsewhere/rl")}
    )


def test_rlhf_config_reports_every_conflict_at_once() -> None:
    fields = _rlhf_fields(lora_rank=8)
    fields["sl"] = {"dataset": "demos.jsonl", "lora_rank": 16}
    fields["rl"] = {
        "dataset": "prompts.jsonl",
        "init_from": "thinker://run/weights/000010",
        "reward": {"type": "exact_match"},
    }
    with pytest.raises(ValidationError) as raised:
        RLHFConfig.model_validate(fields)
    message = str(raised.value)
    assert "sl.lora_rank: set once at the top level" in message
    assert "rl.init_from: set by the pipeline" in message
    assert "rl.reward.type: 'exact_match'" in message
