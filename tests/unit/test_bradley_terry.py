"""The Bradley-Terry head's loss against hand-computed values, its sequences, and its reward
read back through the local engine (the base thinker/tiny: no training needed)."""

from __future__ import annotations

import math

import pytest
import torch
from tinker import types

import thinker
from thinker.algorithms.bradley_terry import (
    BradleyTerryReward,
    bradley_terry_loss,
    score_datums,
)
from thinker.renderers import Message, get_renderer
from thinker.rewards import Completion, Problem

PROMPT = [Message(role="user", content="3+4")]


def _datum(n: int) -> types.Datum:
    """n targets, weight 1 on the last (the deciding token)."""
    return types.Datum(
        model_input=types.ModelInput.from_ints(list(range(n))),
        loss_fn_inputs={"target_tokens": list(range(1, n + 1)), "weights": [0.0] * (n - 1) + [1.0]},
    )


def test_the_loss_is_minus_log_sigmoid_of_the_score_margin_by_hand() -> None:
    # Two pairs; each datum's last logprob is what r reads (the others carry weight 0).
    last = [-0.2, -1.9, -1.1, -0.4, -2.0, -0.3, -0.6, -0.5]  # Yes_c, No_c, Yes_r, No_r (x2)
    logprobs = [torch.tensor([-5.0, -7.0, value], requires_grad=True) for value in last]
    data = [_datum(3) for _ in last]
    loss, metrics = bradley_terry_loss(weight=0.5)(data, logprobs)
    # Pair 1: r_c = -0.2 + 1.9 = 1.7, r_r = -1.1 + 0.4 = -0.7, margin 2.4.
    # Pair 2: r_c = -2.0 + 0.3 = -1.7, r_r = -0.6 + 0.5 = -0.1, margin -1.6.
    per_pair = [math.log1p(math.exp(-2.4)), math.log1p(math.exp(1.6))]
    assert metrics["rm_train_nll"] == pytest.approx(sum(per_pair) / 2, rel=1e-6)
    assert metrics["rm_train_accuracy"] == 0.5
    assert float(loss.detach()) == pytest.approx(0.5 * sum(per_pair) / 2, rel=1e-6)
    loss.backward()
    # d loss / d l_Yes(chosen of pair 1) = -weight / P * (1 - sigmoid(2.4)); l_No: the opposite.
    grad = -0.5 / 2 * (1 - 1 / (1 + math.exp(-2.4)))
    assert logprobs[0].grad is not None and logprobs[1].grad is not None
    assert logprobs[0].grad.tolist() == pytest.approx([0.0, 0.0, grad], abs=1e-7)
    assert logprobs[1].grad.tolist() == pytest.approx([0.0, 0.0, -grad], abs=1e-7)
    assert logprobs[2].grad is not None
    assert float(logprobs[2].grad[-1]) == pytest.approx(-grad, abs=1e-7)  # the rejected's


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> BradleyTerryReward:
    service = thinker.ServiceClient(storage_dir=tmp_path_factory.mktemp("bt"))
    sampler = service.create_sampling_client(base_model="thinker/tiny").result()
    return BradleyTerryReward(sampler, get_renderer("role_colon", sampler.get_tokenizer()))


def test_the_two_sequences_differ_in_their_deciding_token_only(base: BradleyTerryReward) -> None:
    yes, no = score_datums(base.renderer, PROMPT, "7")
    assert yes.model_input.to_ints() == no.model_input.to_ints()
    deciding_yes = yes.loss_fn_inputs["target_tokens"].tolist()[-1]
    deciding_no = no.loss_fn_inputs["target_tokens"].tolist()[-1]
    assert deciding_yes != deciding_no
    assert yes.loss_fn_inputs["weights"].tolist()[-1] == 1.0
    assert sum(yes.loss_fn_inputs["weights"].tolist()) == 1.0
    # A limit keeps the end: the question and the deciding token.
    short, _ = score_datums(base.renderer, PROMPT, "a long answer " * 20, max_length=24)
    assert short.model_input.length + 1 == 24


def test_scores_and_comparisons_agree(base: BradleyTerryReward) -> None:
    problem = Problem(messages=PROMPT, answer="7", row={})
    scores = base(problem, [Completion("7", True), Completion("eight", True), Completion("", True)])
    (p, margin), (empty_p, _) = base.compare([(PROMPT, "7", "eight"), (PROMPT, "", "7")])
    assert margin == pytest.approx(scores[0] - scores[1], abs=1e-5)
    assert p == pytest.approx(1 / (1 + math.exp(-margin)), abs=1e-6)
    # An empty answer is not scored: 20 below the group's lowest, and it loses unjudged.
    assert scores[2] == pytest.approx(min(scores[:2]) - 20.0)
    assert empty_p == 0.0
