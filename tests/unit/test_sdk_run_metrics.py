"""A Tinker SDK run's step metrics (services/sdk_runs.py), by hand."""

from __future__ import annotations

import pytest
from tinker import types

from thinker.services.sdk_runs import Batch, batch_of, step_metrics


def test_a_batch_counts_weights_else_targets() -> None:
    """Weights 1 + 0.5 + 0 = 1.5 trained tokens; a datum without weights counts its 3
    targets; cross-entropy is weighted only when every datum has weights."""
    weighted = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3]),
        loss_fn_inputs={"target_tokens": [2, 3, 4], "weights": [1.0, 0.5, 0.0]},
    )
    plain = types.Datum(
        model_input=types.ModelInput.from_ints([1, 2, 3]),
        loss_fn_inputs={"target_tokens": [2, 3, 4], "advantages": [0.0, 1.0, 1.0]},
    )
    assert batch_of([weighted], "cross_entropy") == Batch(1, 1.5, True)
    assert batch_of([weighted, plain], "cross_entropy") == Batch(2, 4.5, False)
    assert batch_of([plain], "importance_sampling") == Batch(1, 3.0, False)


def test_a_steps_metrics_sum_sums_average_the_rest_and_add_rates() -> None:
    """Two forward_backward calls: loss:sum 3 + 1 = 4 over 2 + 6 = 8 weighted tokens gives a
    mean NLL of 0.5; clip:mean averages (0.2 + 0.4) / 2 = 0.3; 8 tokens in 2 s = 4 tokens/s."""
    batches = [
        (Batch(1, 2.0, True), {"loss:sum": 3.0, "clip:mean": 0.2}),
        (Batch(3, 6.0, True), {"loss:sum": 1.0, "clip:mean": 0.4}),
    ]
    row = step_metrics(batches, 1e-3, {"grad_norm": 2.5}, 2.0)
    assert row == {
        "loss:sum": 4.0,
        "clip:mean": pytest.approx(0.3),
        "num_sequences": 4.0,
        "num_tokens": 8.0,
        "train_mean_nll": 0.5,
        "learning_rate": 1e-3,
        "grad_norm": 2.5,
        "step_time_s": 2.0,
        "train_tokens_per_s": 4.0,
    }


def test_an_unweighted_loss_has_no_nll_and_a_bare_step_only_its_optimizer() -> None:
    rl = step_metrics([(Batch(2, 10.0, False), {"loss:sum": -1.5})], 1e-4, {}, None)
    assert rl == {"loss:sum": -1.5, "num_sequences": 2.0, "num_tokens": 10.0, "learning_rate": 1e-4}
    assert step_metrics([], None, {"grad_norm": 0.0}, None) == {"grad_norm": 0.0}
