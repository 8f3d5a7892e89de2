"""How sure an answer is (algorithms/uncertainty.py), on samples whose figures are known."""

from __future__ import annotations

import pytest

from thinker.algorithms.uncertainty import measure


def test_agreement_folds_case_and_spaces_and_picks_the_likeliest_of_the_majority() -> None:
    texts = ["Seven", "seven ", "eight", "SEVEN"]
    logprobs = [[-0.5, -0.5], [-0.1], [-0.2, -0.2], [-2.0]]
    result = measure(texts, logprobs)
    assert result.agreement == 0.75 and result.distinct_answers == 2
    assert result.answer == 1  # "seven " has the highest mean logprob of the three
    assert result.mean_logprob == pytest.approx(-0.1)
    assert result.mean_entropy == pytest.approx((0.5 + 0.5 + 0.1 + 0.2 + 0.2 + 2.0) / 6)
    assert not result.not_sure


def test_not_sure_past_either_threshold() -> None:
    split = measure(["a", "b", "c", "a"], [[-1.0]] * 4)
    assert split.agreement == 0.5 and not split.not_sure  # at the threshold, not under it
    assert measure(["a", "b", "c", "a"], [[-1.0]] * 4, agreement_below=0.6).not_sure
    agreed = measure(["a", "a"], [[-3.0], [-3.0]], entropy_above=2.0)
    assert agreed.agreement == 1.0 and agreed.not_sure  # agreeing, but on unlikely tokens
    assert measure(["a"], [[]]).mean_entropy is None
    with pytest.raises(ValueError, match="one or more samples"):
        measure([], [])
