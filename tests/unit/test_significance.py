"""The A/B statistics (algorithms/significance.py) against values computed by hand and against
seeded simulations of known win rates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from thinker.algorithms import significance as sig


def test_sign_test_is_the_exact_two_sided_binomial_test() -> None:
    # 7 wins, 3 losses: 2 * (C(10,0) + C(10,1) + C(10,2) + C(10,3)) / 2^10 = 2 * 176 / 1024
    assert sig.sign_test(7, 3) == pytest.approx(352 / 1024, rel=1e-12)
    assert sig.sign_test(3, 7) == pytest.approx(352 / 1024, rel=1e-12)
    # 15 wins, 5 losses: 2 * (1 + 20 + 190 + 1140 + 4845 + 15504) / 2^20
    assert sig.sign_test(15, 5) == pytest.approx(2 * 21700 / 2**20, rel=1e-12)
    assert sig.sign_test(5, 5) == 1.0
    assert sig.sign_test(0, 0) == 1.0  # nothing decided
    with pytest.raises(ValueError, match="counts must be >= 0"):
        sig.sign_test(-1, 3)


def test_compare_counts_a_tie_as_half_a_win_and_leaves_ties_out_of_the_test() -> None:
    outcomes = [1] * 6 + [0] * 2 + [-1] * 2
    result = sig.compare(outcomes, "base", "tuned")
    assert (result.n, result.wins, result.ties, result.losses) == (10, 6, 2, 2)
    assert result.win_rate == pytest.approx((6 + 1) / 10)
    # the sign test on 6 wins and 2 losses: 2 * (1 + 8 + 28) / 2^8
    assert result.p_value == pytest.approx(74 / 256, rel=1e-12)
    assert not result.significant
    assert result.verdict == (
        "No significant difference between base and tuned: tuned's 70% win rate "
        f"[{100 * result.interval[0]:.0f}%, {100 * result.interval[1]:.0f}%], p = 0.29, "
        "n = 10 (2 ties, left out of the sign test)"
    )


def test_the_verdict_names_the_better_model_in_its_own_terms() -> None:
    better_b = sig.compare([1] * 128 + [-1] * 72, "base", "tuned")
    assert better_b.significant and better_b.p_value == pytest.approx(sig.sign_test(128, 72))
    low, high = better_b.interval
    assert better_b.verdict == (
        f"tuned is better: 64% win rate [{100 * low:.0f}%, {100 * high:.0f}%], "
        f"{sig.format_p(better_b.p_value)}, n = 200"
    )
    better_a = sig.compare([-1] * 128 + [1] * 72, "base", "tuned")
    assert better_a.win_rate == pytest.approx(0.36)
    # A's win rate is 1 - B's, and its interval B's mirrored
    assert better_a.verdict.startswith(
        f"base is better: 64% win rate [{100 * (1 - better_a.interval[1]):.0f}%, "
        f"{100 * (1 - better_a.interval[0]):.0f}%]"
    )


def test_p_values_are_written_as_people_read_them() -> None:
    assert sig.format_p(0.6213) == "p = 0.62"
    assert sig.format_p(0.034) == "p = 0.03"
    assert sig.format_p(0.0042) == "p = 0.004"
    assert sig.format_p(0.00042) == "p = 0.0004"
    assert sig.format_p(3e-7) == "p < 0.0001"


def test_the_bootstrap_interval_has_the_width_of_the_normal_interval() -> None:
    # 128 wins of 200: the normal approximation's 95% interval is +-1.96 sqrt(p (1 - p) / n)
    low, high = sig.bootstrap_interval([1.0] * 128 + [0.0] * 72, seed=1)
    half = 1.96 * math.sqrt(0.64 * 0.36 / 200)
    assert low == pytest.approx(0.64 - half, abs=0.01)
    assert high == pytest.approx(0.64 + half, abs=0.01)
    assert sig.bootstrap_interval([0.5] * 20) == (0.5, 0.5)  # no spread, no interval
    with pytest.raises(ValueError, match="at least one value"):
        sig.bootstrap_interval([])


def test_a_true_60_40_split_is_called_at_the_sign_tests_power_and_50_50_at_its_size() -> None:
    """1,000 seeded A/Bs of 400 prompts: the share called significant is the exact
    probability the sign test rejects (sign_test_power), within 3 standard errors, for a true
    win rate of 0.6 (power 0.98) and of 0.5 (the test's size, under alpha = 0.05)."""
    rng = np.random.default_rng(7)
    trials, n = 1000, 400
    for true_rate in (0.6, 0.5):
        wins = rng.binomial(n, true_rate, size=trials)
        called = np.mean([sig.sign_test(int(w), n - int(w)) < sig.ALPHA for w in wins])
        expected = float(sig.sign_test_power(np.array([n]), true_rate)[0])
        spread = 3 * math.sqrt(expected * (1 - expected) / trials)
        print(f"true {true_rate}: called significant {called:.3f}, exact {expected:.3f}")
        assert abs(called - expected) <= spread
        if true_rate == 0.6:
            assert expected > 0.95
        else:
            assert expected <= sig.ALPHA
    # compare() calls it the same way, ties included in n and left out of the test
    result = sig.compare([1] * 230 + [-1] * 160 + [0] * 10)
    assert result.significant == (sig.sign_test(230, 160) < sig.ALPHA) is True


def test_the_bootstrap_interval_covers_the_true_win_rate_95_times_in_100() -> None:
    rng = np.random.default_rng(3)
    trials, covered = 300, 0
    for seed in range(trials):  # a true win rate of 0.6: 50% wins, 20% ties, 30% losses
        outcomes = rng.choice([1, 0, -1], size=150, p=[0.5, 0.2, 0.3]).tolist()
        low, high = sig.compare(outcomes, resamples=2000, seed=seed).interval
        covered += low <= 0.6 <= high
    rate = covered / trials
    print(f"coverage {rate:.3f}")
    assert abs(rate - 0.95) <= 3 * math.sqrt(0.95 * 0.05 / trials)


def test_bradley_terry_recovers_strengths_that_fit_every_pair_exactly() -> None:
    # Strengths 4 : 2 : 1 give P(A > B) = 2/3, P(B > C) = 2/3, P(A > C) = 4/5: results in those
    # proportions are fitted exactly, and the ratings are 400 log10 of the ratios apart.
    board = sig.bradley_terry(
        [
            sig.Pairing("A", "B", 20, 10),
            sig.Pairing("B", "C", 20, 10),
            sig.Pairing("A", "C", 40, 10),
        ],
        prior=0,
    )
    assert [r.model for r in board] == ["A", "B", "C"] and [r.rank for r in board] == [1, 2, 3]
    strength = {r.model: r.strength for r in board}
    assert strength["A"] / strength["B"] == pytest.approx(2, rel=1e-6)
    assert strength["B"] / strength["C"] == pytest.approx(2, rel=1e-6)
    assert strength["A"] * strength["B"] * strength["C"] == pytest.approx(1, rel=1e-9)
    rating = {r.model: r.rating for r in board}
    assert rating["A"] - rating["B"] == pytest.approx(400 * math.log10(2), rel=1e-6)
    assert sum(rating.values()) / 3 == pytest.approx(1000)
    assert {r.model: (r.wins, r.games) for r in board} == {
        "A": (60, 80), "B": (30, 60), "C": (20, 80),
    }  # fmt: skip


def test_bradley_terry_counts_ties_half_and_keeps_a_winless_model_finite_with_a_prior() -> None:
    # 3 wins, 1 loss and 2 ties are 4 to 2: A is twice as strong as B
    board = sig.bradley_terry([sig.Pairing("A", "B", 3, 1, ties=2)], prior=0)
    assert board[0].strength / board[1].strength == pytest.approx(2, rel=1e-6)
    with pytest.raises(ValueError, match="C never won"):
        sig.bradley_terry([sig.Pairing("A", "C", 5, 0)], prior=0)
    # one virtual win each way: 5.5 to 0.5, 11 times as strong; the counts stay the real ones
    winless = sig.bradley_terry([sig.Pairing("A", "C", 5, 0)])
    assert winless[0].strength / winless[1].strength == pytest.approx(11, rel=1e-6)
    assert [(r.model, r.wins, r.games) for r in winless] == [("A", 5, 5), ("C", 0, 5)]
    with pytest.raises(ValueError, match="itself"):
        sig.bradley_terry([sig.Pairing("A", "A", 1, 1)])


def test_required_samples_follows_the_normal_approximation() -> None:
    """The exact count is at least the textbook one, n = ((z_a/2 0.5 + z_b sqrt(p q)) /
    (p - 0.5))^2, and within a quarter of it (the exact test is conservative, more so at
    small n), and it is the count from which on the power stays at 0.8."""
    z_alpha, z_power = 1.959964, 0.841621
    for rate in (0.55, 0.6, 0.7, 0.8):
        n = sig.required_samples(rate)
        approx = ((z_alpha * 0.5 + z_power * math.sqrt(rate * (1 - rate))) / (rate - 0.5)) ** 2
        assert approx <= n <= 1.25 * approx, (rate, n, approx)
        power = sig.sign_test_power(np.arange(n - 1, 3 * n), rate)
        assert power[0] < 0.8 and np.all(power[1:] >= 0.8)
    assert sig.required_samples(0.4) == sig.required_samples(0.6)  # symmetric
    with pytest.raises(ValueError, match="not 0.5"):
        sig.required_samples(0.5)


def test_calibration_compares_how_sure_a_judge_is_with_how_often_it_is_right() -> None:
    # Five pairs said at 0.9 (four right: 0.9, 0.9, 0.9, 0.9 for the first, 0.1 against it)
    # and four at 0.6 (two right): bins [0.8, 0.9] and [0.6, 0.7); a tie counts one half.
    probabilities = [0.9, 0.9, 0.9, 0.9, 0.1, 0.6, 0.6, 0.4, 0.4, 0.5]
    result = sig.calibration(probabilities)
    high = next(b for b in result["bins"] if b["low"] <= 0.9 <= b["high"])
    assert (high["pairs"], high["confidence"], high["accuracy"]) == (5, 0.9, 0.8)
    mid = next(b for b in result["bins"] if b["low"] <= 0.6 < b["high"])
    assert (mid["pairs"], mid["accuracy"]) == (4, 0.5) and mid["confidence"] == pytest.approx(0.6)
    tie = next(b for b in result["bins"] if b["low"] == 0.5)
    assert (tie["pairs"], tie["accuracy"]) == (1, 0.5)
    # ECE: 5/10 |0.8 - 0.9| + 4/10 |0.5 - 0.6| + 1/10 |0.5 - 0.5|
    assert result["ece"] == pytest.approx(0.05 + 0.04)
    assert result["accuracy"] == pytest.approx((4 + 2 + 0.5) / 10)
    assert sig.calibration([0.75] * 4)["ece"] == pytest.approx(0.25)  # right always: underconfident
    with pytest.raises(ValueError, match="at least one"):
        sig.calibration([])
