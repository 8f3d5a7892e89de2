"""Direct Preference Optimization (DPO, https://arxiv.org/abs/2305.18290) with LoRA.

What it computes: each preference pair (prompt x, chosen y_c, rejected y_r) is rendered
twice, x + y_c and x + y_r, with weight 1 on the completion's tokens only. A completion's
log-ratio is the sum over those tokens of log pi(token) - log pi_ref(token), where pi is the
policy being trained and pi_ref the frozen reference: the starting weights (the base model
with the adapter off for a fresh adapter, else the weights of `init_from`). The reference
logprobs are computed once per pair, before the first step, with `compute_logprobs` on a
sampling client of the reference (on the local engine it shares the training model's
weights, so the reference costs no second copy). With c and r the chosen and rejected
log-ratios, each step minimises

    mean over the batch's pairs of  -log sigmoid(beta * (c - r))

through `forward_backward_custom` (chosen and rejected interleaved), then takes one AdamW
`optim_step`. The batch goes through in passes of `micro_batch_size` pairs (as many as fit in
free memory unless set; see `plan_batch`), each pass's mean weighted by its share of the
batch, so the accumulated gradient and the metrics are those of one pass over the batch.
beta * c and beta * r are the implicit rewards; accuracy is the fraction of pairs with c > r,
a tie counting one half (at the start the policy is the reference and every pair ties, so
accuracy starts at chance). Held-out pairs are scored the same way with `forward` before the
first step and every `eval_every` steps. Checkpoints go to the append-only checkpoints.jsonl,
each line naming the reference, so a resumed run keeps the reference it started with; on the
CPU it ends with the same weights bit for bit as a run that was never interrupted.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from tinker import types
from torch import Tensor

from thinker.algorithms.common import (
    BatchPlan,
    RunResult,
    Step,
    SupervisedLoop,
    log_step,
    pair_tokens,
    prepare_run,
    start_or_resume,
)
from thinker.algorithms.dpo_config import DPOConfig
from thinker.data import split_train_eval
from thinker.data.preferences import PreferencePair, load_preference_pairs
from thinker.engine import ServiceClient
from thinker.engine.protocols import (
    APIFuture,
    CustomLossFn,
    SamplingClient,
    TrainingClient,
    together,
)
from thinker.files import storage_guard, write_json_atomically
from thinker.renderers import (
    Message,
    Renderer,
    TrainOnWhat,
    datum_from_tokens_weights,
    renderer_for,
)
from thinker.runs import MetricsLogger, RunDir

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["DPOConfig", "ScoredPair", "dpo_custom_loss", "dpo_loss", "main"]

METRICS = ("dpo_loss", "accuracy", "margin", "chosen_reward", "rejected_reward")


def dpo_loss(
    chosen_logratio_P: Tensor, rejected_logratio_P: Tensor, beta: float
) -> tuple[Tensor, dict[str, float]]:
    """The DPO loss of P pairs (arXiv:2305.18290, eq. 7), and its metrics.

    Args:
        chosen_logratio_P: log pi(y_c | x) - log pi_ref(y_c | x) of each pair, each a sum
            over the completion's tokens.
        rejected_logratio_P: The same for the rejected completions.
        beta: How strongly the policy is held to the reference (0.1 in the paper).

    Returns:
        The mean over pairs of -log sigmoid(beta (c - r)), and the metrics `dpo_loss`,
        `accuracy` (fraction of pairs with c > r, a tie counting one half), `margin`
        (mean beta (c - r)), `chosen_reward` (mean beta c), `rejected_reward` (mean beta r).
    """
    margin_P = beta * (chosen_logratio_P - rejected_logratio_P)
    loss = -F.logsigmoid(margin_P).mean()
    wins_P = (margin_P > 0).float() + 0.5 * (margin_P == 0).float()
    metrics = {
        "dpo_loss": loss.item(),
        "accuracy": wins_P.mean().item(),
        "margin": margin_P.mean().item(),
        "chosen_reward": (beta * chosen_logratio_P).mean().item(),
        "rejected_reward": (beta * rejected_logratio_P).mean().item(),
    }
    return loss, metrics


def dpo_custom_loss(
    reference_chosen_P: Tensor, reference_rejected_P: Tensor, beta: float, weight: float = 1.0
) -> CustomLossFn:
    """The loss for `forward_backward_custom` on data [chosen_0, rejected_0, chosen_1, ...].

    Args:
        reference_chosen_P: The reference's logprob sum over each chosen completion.
        reference_rejected_P: The same for each rejected completion.
        beta: DPO's beta.
        weight: A factor on the loss (not the metrics): a pass's share of the step's pairs,
            so that passes' gradients add up to the gradient of the whole step's mean.
    """

    def loss_fn(
        data: list[types.Datum], logprobs_D: list[Tensor]
    ) -> tuple[Tensor, dict[str, float]]:
        sums_D = _completion_logprobs_D(data, logprobs_D)
        loss, metrics = dpo_loss(
            sums_D[0::2] - reference_chosen_P, sums_D[1::2] - reference_rejected_P, beta
        )
        return weight * loss, metrics

    return loss_fn


@dataclass(frozen=True)
class ScoredPair:
    """A rendered pair and the reference's logprob sums over its two completions."""

    chosen: types.Datum
    rejected: types.Datum
    reference_chosen: float
    reference_rejected: float


async def main(
    config: DPOConfig, service: ServiceClient | None = None, logger: MetricsLogger | None = None
) -> RunResult:
    run, service, logger = prepare_run(config, service, logger)

    # Set up: the client (fresh, from `init_from`, or resumed), the frozen reference, and
    # the rendered pairs with their reference logprobs.
    start = await start_or_resume(config, service, run, logger)
    client = start.client
    reference_path = await _reference_path(config, client, start.step > 0)
    if reference_path is None:
        reference = await service.create_sampling_client(base_model=config.base_model)
    else:
        reference = await service.create_sampling_client(model_path=reference_path)
    logger.log_event("reference", {"reference_path": reference_path or config.base_model})
    train_pairs, eval_pairs = await _datasets(
        config, client.get_tokenizer(), reference, reference_path or config.base_model, run
    )
    lengths = [pair_tokens(pair.chosen, pair.rejected) for pair in train_pairs]
    loop = SupervisedLoop.planned(config, run, start, logger, train_pairs, lengths, "pairs")
    return await loop.run(
        partial(_forward_backward, client, beta=config.beta),
        partial(_finish, logger=logger, config=config),
        partial(_evaluate, client, eval_pairs, config, loop.plan),
        reference_path=reference_path,
    )


async def _reference_path(config: DPOConfig, client: TrainingClient, resumed: bool) -> str | None:
    """Sampler weights of the reference, or None for the base model with the adapter off.

    A resumed run keeps the reference its checkpoints name, never its resumed weights.
    """
    last = RunDir(config.log_path).last_checkpoint() if resumed else None
    if last is not None:
        return last.reference_path
    if config.reference_path is not None or config.init_from is None:
        return config.reference_path
    # The starting weights of `init_from`, saved before any step (a fresh name per client).
    return (await client.save_weights_for_sampler("reference")).path


async def _datasets(
    config: DPOConfig,
    tokenizer: PreTrainedTokenizerBase,
    reference: SamplingClient,
    reference_name: str,
    run: RunDir,
) -> tuple[list[ScoredPair], list[ScoredPair]]:
    renderer = renderer_for(config.renderer, config.base_model, tokenizer)
    pairs = load_preference_pairs(config.dataset)
    if config.eval_dataset is not None:
        train, held_out = pairs, load_preference_pairs(config.eval_dataset)
    else:
        train, held_out = split_train_eval(pairs, config.eval_fraction, config.seed)
    rendered = [_render(renderer, pair, config.max_length) for pair in train + held_out]
    scored = await _scored(reference, reference_name, rendered, run)
    return scored[: len(train)], scored[len(train) :]


async def _scored(
    reference: SamplingClient,
    reference_name: str,
    rendered: list[tuple[types.Datum, types.Datum]],
    run: RunDir,
) -> list[ScoredPair]:
    """The pairs with their reference logprob sums: read from the run directory when they were
    computed there for the same reference and the same rendered pairs (a resumed run, or the
    same run started again), else computed and written there. The key covers every token and
    weight, so another dataset, renderer or max_length never reads stale sums."""
    key = _reference_key(reference_name, rendered)
    path = run.reference_logprobs
    if path.is_file():
        cached = json.loads(path.read_text())
        if cached.get("key") == key:
            print(f"[thinker] reference logprobs of {len(rendered)} pairs read from {path.name}")
            return [
                ScoredPair(c, r, chosen, rejected)
                for (c, r), chosen, rejected in zip(
                    rendered, cached["chosen"], cached["rejected"], strict=True
                )
            ]
    scored = await _score_with_reference(reference, rendered)
    chosen = [p.reference_chosen for p in scored]
    rejected = [p.reference_rejected for p in scored]
    with storage_guard("the reference logprobs"):
        write_json_atomically(
            path, {"key": key, "reference": reference_name, "chosen": chosen, "rejected": rejected}
        )
    return scored


def _reference_key(reference_name: str, rendered: list[tuple[types.Datum, types.Datum]]) -> str:
    digest = hashlib.sha256(reference_name.encode())
    for pair in rendered:
        for datum in pair:
            tokens = torch.tensor(_sequence(datum).to_ints(), dtype=torch.int64)
            digest.update(tokens.numpy().tobytes())
            digest.update(datum.loss_fn_inputs["weights"].to_torch().float().numpy().tobytes())
    return digest.hexdigest()


def _render(
    renderer: Renderer, pair: PreferencePair, max_length: int
) -> tuple[types.Datum, types.Datum]:
    """Prompt + chosen and prompt + rejected as datums (see render_pair)."""
    chosen, rejected = render_pair(renderer, pair)
    return datum_from_tokens_weights(*chosen, max_length), datum_from_tokens_weights(
        *rejected, max_length
    )


def render_pair(
    renderer: Renderer, pair: PreferencePair
) -> tuple[tuple[list[int], list[float]], tuple[list[int], list[float]]]:
    """(tokens, weights) of prompt + chosen and of prompt + rejected: the prompt untrained, the
    completion's assistant turns trained. The dataset preview renders pairs with this too."""
    prompt = [_message(m, trainable=False) for m in pair.prompt_messages]

    def render(completion: list[Message]) -> tuple[list[int], list[float]]:
        trained = [_message(m, trainable=m["role"] == "assistant") for m in completion]
        return renderer.build_supervised_example(prompt + trained, TrainOnWhat.CUSTOMIZED)

    return render(pair.chosen_messages), render(pair.rejected_messages)


def _message(message: Message, trainable: bool) -> Message:
    return Message(role=message["role"], content=message["content"], trainable=trainable)


async def _score_with_reference(
    reference: SamplingClient, rendered: list[tuple[types.Datum, types.Datum]]
) -> list[ScoredPair]:
    """Each pair with the reference's completion logprob sums (all requests submitted first,
    as one burst: batched by arrival, a loaded machine would batch a run and its resumption
    differently, and a logprob's last bits follow its batch)."""
    with together(reference):
        futures = [
            (reference.compute_logprobs(_sequence(c)), reference.compute_logprobs(_sequence(r)))
            for c, r in rendered
        ]
    scored = []
    for (chosen, rejected), (chosen_lp, rejected_lp) in zip(rendered, futures, strict=True):
        scored.append(
            ScoredPair(
                chosen,
                rejected,
                _reference_sum(chosen, await chosen_lp),
                _reference_sum(rejected, await rejected_lp),
            )
        )
    return scored


def _sequence(datum: types.Datum) -> types.ModelInput:
    """The full token sequence a datum was cut from: its input plus the last target."""
    last = int(datum.loss_fn_inputs["target_tokens"].to_torch()[-1])
    return types.ModelInput.from_ints([*datum.model_input.to_ints(), last])


def _reference_sum(datum: types.Datum, logprobs: list[float | None]) -> float:
    # compute_logprobs gives None at position 0; entry i + 1 scores target i of the datum.
    logprobs_N = torch.tensor(logprobs[1:], dtype=torch.float32)
    return float((logprobs_N * datum.loss_fn_inputs["weights"].to_torch()).sum())


def _completion_logprobs_D(data: list[types.Datum], logprobs_D: list[Tensor]) -> Tensor:
    """Each datum's logprob summed over its weighted (completion) tokens."""
    return torch.stack(
        [
            (lp * d.loss_fn_inputs["weights"].to_torch()).sum()
            for d, lp in zip(data, logprobs_D, strict=True)
        ]
    )


def _references_P(pairs: list[ScoredPair]) -> tuple[Tensor, Tensor]:
    return (
        torch.tensor([p.reference_chosen for p in pairs]),
        torch.tensor([p.reference_rejected for p in pairs]),
    )


def _interleave(pairs: list[ScoredPair]) -> list[types.Datum]:
    return [d for p in pairs for d in (p.chosen, p.rejected)]


def _forward_backward(
    client: TrainingClient, pairs: list[ScoredPair], share: float, beta: float
) -> APIFuture[types.ForwardBackwardOutput]:
    """Submit one pass: the DPO loss of `pairs`, weighted by their `share` of the step's."""
    loss_fn = dpo_custom_loss(*_references_P(pairs), beta, share)
    return client.forward_backward_custom(_interleave(pairs), loss_fn)


async def _finish(
    step: Step[ScoredPair], evals: dict[str, float], logger: MetricsLogger, config: DPOConfig
) -> dict[str, float]:
    outputs = [(output.metrics, n) for output, n in await step.outputs()]
    # Every metric is a mean over pairs: the passes' means weighted by their pairs.
    num_pairs = len(step.batch)
    metrics = {name: sum(float(m[name]) * n for m, n in outputs) / num_pairs for name in METRICS}
    metrics["num_pairs"] = float(num_pairs)
    return await log_step(step, metrics, evals, logger, config, "dpo_loss")


async def _evaluate(
    client: TrainingClient, pairs: list[ScoredPair], config: DPOConfig, plan: BatchPlan
) -> dict[str, float]:
    """The DPO metrics of the held-out pairs under the current weights, as eval_<name>."""
    if not pairs:
        return {}
    futures = [client.forward(_interleave(part), "cross_entropy") for part in plan.passes(pairs)]
    logprobs_D = [o["logprobs"].to_torch() for f in futures for o in (await f).loss_fn_outputs]
    loss_fn = dpo_custom_loss(*_references_P(pairs), config.beta)
    _, metrics = loss_fn(_interleave(pairs), logprobs_D)
    return {f"eval_{name}": value for name, value in metrics.items()}
