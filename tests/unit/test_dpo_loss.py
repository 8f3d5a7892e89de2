"""The DPO loss (arXiv:2305.18290) on fixed numbers computed by hand, its gradient through the
local engine against autograd of the formula, and the preference-pair loader DPO reads.

Hand case (torchtune style), beta = 0.5, three pairs of log-ratios (policy - reference):

    chosen c   = [1, -2, 0.5]      rejected r = [-3, 0, 0.5]
    c - r      = [4, -2, 0]        margin beta (c - r) = [2, -1, 0]
    -log sigmoid(m) = log(1 + e^-m) = [0.126928, 1.313262, 0.693147]
    loss     = mean = 2.133337 / 3 = 0.711112
    accuracy = (1 + 0 + 1/2) / 3 = 0.5     (the tie counts one half)
    margin   = (2 - 1 + 0) / 3 = 1/3
    chosen_reward   = 0.5 * (1 - 2 + 0.5) / 3 = -1/12
    rejected_reward = 0.5 * (-3 + 0 + 0.5) / 3 = -5/12
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch
from tinker import types
from torch import Tensor

import thinker
from thinker.algorithms.dpo import _reference_key, dpo_custom_loss, dpo_loss
from thinker.data.preferences import PreferencePair, load_preference_pairs
from thinker.errors import DatasetError

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "examples" / "preferences"


def test_dpo_loss_and_metrics_by_hand() -> None:
    loss, metrics = dpo_loss(torch.tensor([1.0, -2.0, 0.5]), torch.tensor([-3.0, 0.0, 0.5]), 0.5)
    expected = (math.log1p(math.exp(-2)) + math.log1p(math.exp(1)) + math.log(2)) / 3
    assert expected == pytest.approx(0.711112, abs=1e-6)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert metrics == pytest.approx(
        {
            "dpo_loss": expected,
            "accuracy": 0.5,
            "margin": 1 / 3,
            "chosen_reward": -1 / 12,
            "rejected_reward": -5 / 12,
        },
        rel=1e-6,
    )


def test_dpo_loss_is_log_2_where_policy_equals_reference() -> None:
    """At the start every log-ratio is 0: loss ln 2, accuracy 1/2 (all ties), rewards 0."""
    loss, metrics = dpo_loss(torch.zeros(4), torch.zeros(4), 0.1)
    assert loss.item() == pytest.approx(math.log(2))
    assert metrics["accuracy"] == 0.5 and metrics["margin"] == 0.0


def test_custom_loss_sums_completion_tokens_and_subtracts_the_reference() -> None:
    """One pair, the prompt token weighted 0.

    chosen:   logprobs [-1, -2, -3], weights [0, 1, 1]: sum -5, reference -6, so c = 1
    rejected: logprobs [-1, -4, -4], weights [0, 1, 1]: sum -8, reference -7, so r = -1
    beta 0.5: margin 1, loss log(1 + e^-1) = 0.313262. d loss / d margin = -sigmoid(-1)
    = -0.268941, so d loss / d logprob = -0.5 * 0.268941 * w = -0.134471 w (chosen) and
    +0.134471 w (rejected).
    """
    data = [_datum([5, 6, 7], [0.0, 1.0, 1.0]), _datum([5, 8, 9], [0.0, 1.0, 1.0])]
    logprobs = [
        torch.tensor([-1.0, -2.0, -3.0], requires_grad=True),
        torch.tensor([-1.0, -4.0, -4.0], requires_grad=True),
    ]
    loss_fn = dpo_custom_loss(torch.tensor([-6.0]), torch.tensor([-7.0]), 0.5)
    loss, metrics = loss_fn(data, logprobs)
    loss.backward()
    assert loss.item() == pytest.approx(0.313262, abs=1e-6)
    assert metrics["chosen_reward"] == pytest.approx(0.5) and metrics["accuracy"] == 1.0
    g = 0.5 * (1 - 1 / (1 + math.exp(-1)))
    torch.testing.assert_close(logprobs[0].grad, torch.tensor([0.0, -g, -g]))
    torch.testing.assert_close(logprobs[1].grad, torch.tensor([0.0, g, g]))


def _datum(targets: list[int], weights: list[float]) -> types.Datum:
    return types.Datum(
        model_input=types.ModelInput.from_ints([3, *targets[:-1]]),
        loss_fn_inputs={
            "target_tokens": torch.tensor(targets),
            "weights": torch.tensor(weights),
        },
    )


# ---- the gradient through the engine ----------------------------------------------------


@pytest.fixture
def client(tmp_path: Path):  # type: ignore[no-untyped-def]
    service = thinker.ServiceClient(storage_dir=tmp_path, device="cpu")
    tc = service.create_lora_training_client("thinker/tiny", rank=4, seed=3).result()
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # move B off zero so that every LoRA weight gets a gradient
        for name, p in tc._model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    return tc


def _pairs_data() -> list[types.Datum]:
    """Two pairs [c0, r0, c1, r1] of random bytes: a shared 4-token prompt (weight 0), then
    completions of different lengths, so the engine pads and the reference does not."""
    gen = torch.Generator().manual_seed(1)
    data = []
    for _pair in range(2):
        prompt = torch.randint(3, 259, (4,), generator=gen)
        for n in (3, 8):
            tokens = torch.cat([prompt, torch.randint(3, 259, (n,), generator=gen)])
            weights = torch.cat([torch.zeros(3), torch.ones(n)])  # targets tokens[1:]
            data.append(
                types.Datum(
                    model_input=types.ModelInput.from_ints(tokens[:-1].tolist()),
                    loss_fn_inputs={"target_tokens": tokens[1:], "weights": weights},
                )
            )
    return data


def _formula_by_hand(
    model: torch.nn.Module, data: list[types.Datum], ref_c: Tensor, ref_r: Tensor, beta: float
) -> Tensor:
    """-log sigmoid(beta ((pi_c - ref_c) - (pi_r - ref_r))), mean over pairs; one datum a pass."""
    sums = []
    for d in data:
        logits = model(input_ids=torch.tensor([d.model_input.to_ints()])).logits[0].float()
        x = {k: v.to_torch() for k, v in d.loss_fn_inputs.items()}
        lp = torch.log_softmax(logits, -1).gather(-1, x["target_tokens"][:, None]).squeeze(-1)
        sums.append((lp * x["weights"]).sum())
    chosen = torch.stack(sums[0::2]) - ref_c
    rejected = torch.stack(sums[1::2]) - ref_r
    return torch.log1p(torch.exp(-beta * (chosen - rejected))).mean()


def _lora_grads(model: torch.nn.Module) -> dict[str, Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if "lora_" in n}


def test_engine_gradient_matches_autograd_of_the_dpo_formula(client) -> None:  # type: ignore[no-untyped-def]
    reference_model = copy.deepcopy(client._model)
    data = _pairs_data()
    # The tiny model gives about -6 per token (3 chosen, 8 rejected tokens): with these
    # reference sums the margins are about +1 and -1, where the sigmoid is not saturated.
    ref_c, ref_r, beta = torch.tensor([-20.0, -10.0]), torch.tensor([-40.0, -50.0]), 0.1

    out = client.forward_backward_custom(data, dpo_custom_loss(ref_c, ref_r, beta)).result()
    want = _formula_by_hand(reference_model, data, ref_c, ref_r, beta)
    want.backward()

    assert out.metrics["loss:sum"] == pytest.approx(want.item(), rel=1e-5)
    assert out.metrics["dpo_loss"] == pytest.approx(want.item(), rel=1e-5)
    engine_grads, ref_grads = _lora_grads(client._model), _lora_grads(reference_model)
    assert set(engine_grads) == set(ref_grads) and len(engine_grads) > 0
    for name, grad in engine_grads.items():
        assert grad.abs().sum() > 0, f"{name} got no gradient"
        want_grad = ref_grads[name]
        # fp32 summation order differs between the padded batch and the one-by-one reference
        torch.testing.assert_close(
            grad, want_grad, rtol=1e-4, atol=1e-4 * float(want_grad.abs().max())
        )


# ---- the preference pairs DPO reads ------------------------------------------------------


def _write(tmp_path: Path, *rows: object) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_load_preference_pairs_reads_both_forms(tmp_path: Path) -> None:
    system = {"role": "system", "content": "Be brief."}
    path = _write(
        tmp_path,
        {"prompt": "3+4", "chosen": "7", "rejected": "I am not sure, maybe 8."},
        {
            "messages": [system, {"role": "user", "content": "2+2"}],
            "chosen": [{"role": "assistant", "content": "4"}],
            "rejected": "5",
        },
    )
    first, second = load_preference_pairs(path)
    assert first == PreferencePair(
        [{"role": "user", "content": "3+4"}],
        [{"role": "assistant", "content": "7"}],
        [{"role": "assistant", "content": "I am not sure, maybe 8."}],
    )
    assert second.prompt_messages[0] == system
    assert second.rejected_messages == [{"role": "assistant", "content": "5"}]


def test_an_empty_rejected_answer_is_a_pair_and_an_empty_chosen_one_is_not(tmp_path: Path) -> None:
    """The playground's A/B feedback when one model said nothing: "A is better" than silence
    is a pair (string or message form); silence as the chosen answer is refused."""
    path = _write(
        tmp_path,
        {"prompt": "5+2", "chosen": "7", "rejected": ""},
        {
            "messages": [{"role": "user", "content": "5+2"}],
            "chosen": [{"role": "assistant", "content": "7"}],
            "rejected": [{"role": "assistant", "content": ""}],
        },
    )
    first, second = load_preference_pairs(path)
    assert (
        first.rejected_messages
        == second.rejected_messages
        == [{"role": "assistant", "content": ""}]
    )
    bad = _write(
        tmp_path,
        {"prompt": "5+2", "chosen": [{"role": "assistant", "content": " "}], "rejected": "8"},
        {"prompt": "", "chosen": "7", "rejected": ""},
        {"prompt": "5+2", "chosen": "7", "rejected": [{"role": "user", "content": ""}]},
    )
    with pytest.raises(DatasetError) as caught:
        load_preference_pairs(bad)
    text = str(caught.value)
    for where in (
        ":1: chosen[0].content: is empty",
        ":2: prompt: is empty",
        ":3: rejected[0].content: is empty",
    ):
        assert where in text, (where, text)


def test_load_preference_pairs_reports_every_bad_row_with_its_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {"prompt": "1+1", "chosen": "2", "rejected": "3"},  # fine
        {"chosen": "2", "rejected": "3"},  # 2: no prompt
        {"prompt": "1+1", "chosen": "", "rejected": 3},  # 3: empty chosen, rejected not text
        {"prompt": "1+1", "chosen": [{"role": "user", "content": "2"}], "rejected": "3"},  # 4
        {"prompt": "1+1", "chosen": "2", "rejected": "2"},  # 5: identical
        {"prompt": "1+1", "messages": [], "chosen": "2", "rejected": "3"},  # 6: both forms
    )
    with pytest.raises(DatasetError) as caught:
        load_preference_pairs(path)
    text = str(caught.value)
    for where in (
        ":2: prompt: ",
        ":3: chosen: is empty",
        ":3: rejected: expected string or array",
        ":4: chosen: has no assistant message",
        ":5: rejected: is identical",
        ":6: prompt: ",
    ):
        assert where in text, (where, text)
    assert ":1:" not in text


def test_shipped_preference_examples_load_and_share_no_prompt() -> None:
    train = load_preference_pairs(EXAMPLES / "train.jsonl")
    test = load_preference_pairs(EXAMPLES / "test.jsonl")
    assert (len(train), len(test)) == (300, 100)
    prompts = {p.prompt_messages[0]["content"] for p in train}
    assert not prompts & {p.prompt_messages[0]["content"] for p in test}


def test_generator_reproduces_the_shipped_preference_files(tmp_path: Path) -> None:
    path = EXAMPLES / "make_preferences.py"
    spec = importlib.util.spec_from_file_location("make_preferences", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_preferences(tmp_path / "out")
    for name in ("train.jsonl", "test.jsonl"):
        assert (tmp_path / "out" / name).read_bytes() == (EXAMPLES / name).read_bytes()


def test_the_reference_cache_key_covers_the_reference_the_tokens_and_the_weights() -> None:
    """A resumed DPO run reads its reference logprobs back only when they were computed from
    the same reference and the same rendered pairs (tokens and weights)."""

    def datum(tokens: list[int], weights: list[float]) -> types.Datum:
        return types.Datum(
            model_input=types.ModelInput.from_ints(tokens[:-1]),
            loss_fn_inputs={"target_tokens": tokens[1:], "weights": weights},
        )

    pairs = [(datum([5, 6, 7, 8], [0.0, 1.0, 1.0]), datum([5, 6, 9, 9], [0.0, 1.0, 1.0]))]
    key = _reference_key("thinker/tiny", pairs)
    assert key == _reference_key("thinker/tiny", pairs)
    assert key != _reference_key("thinker://run/sampler_weights/reference", pairs)
    cut = [(datum([5, 6, 7], [0.0, 1.0]), pairs[0][1])]  # another max_length
    assert key != _reference_key("thinker/tiny", cut)
    reweighted = [(datum([5, 6, 7, 8], [1.0, 1.0, 1.0]), pairs[0][1])]  # another renderer
    assert key != _reference_key("thinker/tiny", reweighted)
