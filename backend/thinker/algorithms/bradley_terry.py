"""Bradley-Terry reward model: one scalar score per response, trained on preference pairs
with -log sigmoid(r_chosen - r_rejected), the loss of TRL's RewardTrainer, OpenRLHF's and
LLaMA-Factory's reward models. The other head, the pairwise judge, is reward_model.py's.

The score. The engine gives logprobs of target tokens (locally and on Tinker), not a hidden
state, so the head is read through the model's own output layer: a response y to a prompt x
is shown as the conversation x, y, then a user turn asking whether the last answer is good,
and with l_Yes and l_No the logprobs of the replies "Yes" and "No" at the deciding token,

    r(x, y) = l_Yes - l_No = (w_Yes - w_No) . h

the difference of two rows of the output layer applied to the last hidden state h (the
log-normaliser cancels): a linear scalar head, which the adapter trains through h (and
through the rows themselves with `train_unembed`). It costs two sequences per response,
which differ in their last token only.

Training. Each pair is four datums [chosen + Yes, chosen + No, rejected + Yes, rejected +
No], weight 1 on the deciding token, and each step runs `forward_backward_custom` with

    loss = mean over the step's pairs of -log sigmoid(r(x, y_c) - r(x, y_r))

(a pass of the step contributes its pairs' share), then one AdamW step. Metrics:
`rm_train_nll` (that loss) and `rm_train_accuracy` (pairs with r_c > r_r); held out, the
judge's three with P(chosen beats rejected) = sigmoid(r_c - r_r): `rm_eval_accuracy`,
`rm_eval_prob_chosen`, `rm_eval_margin` (the mean of r_c - r_r).

Reading. `BradleyTerryReward` scores each RL completion r(x, y) (an empty one scores
EMPTY_LOG_ODDS below its group's lowest, as the judge's empty answers lose unjudged), and
compares two answers as sigmoid(r_x - r_y), the pairwise judge's interface.
"""

from __future__ import annotations

import concurrent.futures
import math
from functools import partial

import torch
import torch.nn.functional as F
from tinker import types
from torch import Tensor

from thinker.algorithms.common import (
    RunResult,
    Step,
    SupervisedLoop,
    log_step,
    prepare_run,
    start_or_resume,
)
from thinker.algorithms.reward_model import (
    EMPTY_LOG_ODDS,
    Comparison,
    datasets,
    held_out_metrics,
    response_text,
    split_replies,
    unjudged,
)
from thinker.algorithms.reward_model_config import RewardModelConfig
from thinker.data.preferences import PreferencePair
from thinker.engine import ServiceClient
from thinker.engine.protocols import (
    APIFuture,
    CustomLossFn,
    SamplingClient,
    TrainingClient,
    together,
)
from thinker.renderers import Message, Renderer, datum_from_tokens_weights, renderer_for
from thinker.rewards import Completion, Problem
from thinker.runs import MetricsLogger

__all__ = ["BradleyTerryReward", "bradley_terry_loss", "score_datums", "train_bradley_terry"]

QUESTION = "Is the last answer good? Reply Yes or No."
REPLIES = ("Yes", "No")
# A pair as the four datums its loss reads: chosen + Yes, chosen + No, rejected + Yes, + No.
PairScores = tuple[types.Datum, types.Datum, types.Datum, types.Datum]


def score_messages(prompt: list[Message], response: str) -> list[Message]:
    """The conversation whose next reply scores `response`: the prompt, the response as the
    assistant's, and the question."""
    return [
        *prompt,
        Message(role="assistant", content=response),
        Message(role="user", content=QUESTION),
    ]


def score_datums(
    renderer: Renderer, prompt: list[Message], response: str, max_length: int | None = None
) -> tuple[types.Datum, types.Datum]:
    """The two sequences r(x, y) reads, "Yes" and then "No" as the deciding token, each with
    weight 1 on it. A longer conversation than `max_length` keeps its end."""
    split = split_replies(renderer, score_messages(prompt, response), REPLIES, max_length)
    yes, no = split.sequence("A"), split.sequence("B")  # the first reply, then the second
    return (
        datum_from_tokens_weights(yes, [0.0] * (len(yes) - 1) + [1.0]),
        datum_from_tokens_weights(no, [0.0] * (len(no) - 1) + [1.0]),
    )


def _scores_R(data: list[types.Datum], logprobs_D: list[Tensor]) -> Tensor:
    """r of each response: data holds (Yes, No) datums in turn, each weighted on its
    deciding token."""
    picked_D = torch.stack(
        [
            (lp * d.loss_fn_inputs["weights"].to_torch().to(lp)).sum()
            for d, lp in zip(data, logprobs_D, strict=True)
        ]
    )
    return picked_D[0::2] - picked_D[1::2]


def bradley_terry_loss(weight: float = 1.0) -> CustomLossFn:
    """The loss for `forward_backward_custom` on data [PairScores..., ...]: the mean over the
    pairs of -log sigmoid(r_c - r_r), times `weight` (a pass's share of the step's pairs, so
    that the passes' gradients add up to the step mean's); the metrics are the pass's own."""

    def loss_fn(
        data: list[types.Datum], logprobs_D: list[Tensor]
    ) -> tuple[Tensor, dict[str, float]]:
        r_R = _scores_R(data, logprobs_D)
        margin_P = r_R[0::2] - r_R[1::2]
        loss = -F.logsigmoid(margin_P).mean()
        metrics = {
            "rm_train_nll": float(loss.detach()),
            "rm_train_accuracy": float((margin_P > 0).float().mean()),
        }
        return weight * loss, metrics

    return loss_fn


class BradleyTerryReward:
    """RewardFn of a Bradley-Terry model: each completion's score r(x, y), with `compare`
    and `compare_async` as the pairwise judge's (P(x beats y) = sigmoid(r_x - r_y)).

    Args:
        sampler: A sampling client of the model's weights (local or Tinker).
        renderer: The renderer it was trained with.
        max_length: The scored conversations' token limit (the reward model's `max_length`).
    """

    def __init__(
        self, sampler: SamplingClient, renderer: Renderer, max_length: int | None = None
    ) -> None:
        self.sampler = sampler
        self.renderer = renderer
        self.max_length = max_length

    def __call__(self, problem: Problem, completions: list[Completion]) -> list[float]:
        texts = [c.text for c in completions]
        futures = {i: self._submit(problem.messages, t) for i, t in enumerate(texts) if t.strip()}
        # One blocking wait for them all (`JudgeReward.compare` says why).
        concurrent.futures.wait([f.future() for fs in futures.values() for f in fs])
        scores = {i: _score([f.result() for f in fs]) for i, fs in futures.items()}
        floor = min(scores.values(), default=EMPTY_LOG_ODDS) - EMPTY_LOG_ODDS
        return [scores.get(i, floor) for i in range(len(texts))]

    def compare(self, comparisons: list[Comparison]) -> list[tuple[float, float]]:
        """(P(x beats y), r_x - r_y) of each (prompt, x, y), blocking until all are read."""
        ruled = [unjudged(c) for c in comparisons]
        with together(self.sampler):  # one batch whatever the timing
            futures = {
                i: self._submit_pair(c) for i, c in enumerate(comparisons) if ruled[i] is None
            }
        concurrent.futures.wait([f.future() for fs in futures.values() for f in fs])
        return [
            r if r is not None else _versus([f.result() for f in futures[i]])
            for i, r in enumerate(ruled)
        ]

    async def compare_async(self, comparisons: list[Comparison]) -> list[tuple[float, float]]:
        """As `compare`, awaiting the requests instead of blocking on them."""
        ruled = [unjudged(c) for c in comparisons]
        with together(self.sampler):  # one batch whatever the timing
            futures = {
                i: self._submit_pair(c) for i, c in enumerate(comparisons) if ruled[i] is None
            }
        return [
            r if r is not None else _versus([await f for f in futures[i]])
            for i, r in enumerate(ruled)
        ]

    def _submit(self, prompt: list[Message], response: str) -> list[APIFuture[list[float | None]]]:
        """Two logprob requests: the response followed by "Yes", then by "No"."""
        datums = score_datums(self.renderer, prompt, response, self.max_length)
        return [self.sampler.compute_logprobs(_sequence(d)) for d in datums]

    def _submit_pair(self, comparison: Comparison) -> list[APIFuture[list[float | None]]]:
        prompt, x, y = comparison
        return [*self._submit(prompt, x), *self._submit(prompt, y)]


def _sequence(datum: types.Datum) -> types.ModelInput:
    """The whole sequence a datum was cut from: its input plus the deciding (last) target."""
    last = int(datum.loss_fn_inputs["target_tokens"].to_torch()[-1])
    return types.ModelInput.from_ints([*datum.model_input.to_ints(), last])


def _score(logprobs: list[list[float | None]]) -> float:
    """r from the two sequences' logprobs: the last entry of each (the deciding token)."""
    yes, no = (lp[-1] for lp in logprobs)
    assert yes is not None and no is not None, "a scored sequence of one token"
    return float(yes) - float(no)


def _versus(logprobs: list[list[float | None]]) -> tuple[float, float]:
    margin = _score(logprobs[:2]) - _score(logprobs[2:])
    return _sigmoid(margin), margin


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


async def train_bradley_terry(
    config: RewardModelConfig,
    service: ServiceClient | None = None,
    logger: MetricsLogger | None = None,
) -> RunResult:
    """Train the scalar head on preference pairs; see the module docstring."""
    run, service, logger = prepare_run(config, service, logger)

    # Set up: the client (fresh, from `init_from`, or resumed) and the rendered pairs.
    start = await start_or_resume(config, service, run, logger)
    client = start.client
    renderer = renderer_for(config.renderer, config.base_model, client.get_tokenizer())
    train_pairs, eval_pairs = datasets(config)
    train_data = [_pair_scores(renderer, pair, config.max_length) for pair in train_pairs]
    lengths = [4 * max(d.model_input.length for d in item) for item in train_data]  # padded
    loop = SupervisedLoop.planned(config, run, start, logger, train_data, lengths, "pairs")
    return await loop.run(  # no loss_units: the loss is a mean over pairs
        partial(_forward_backward, client),
        partial(_finish, logger=logger, config=config),
        partial(_evaluate, client, renderer, eval_pairs, config),
    )


def _pair_scores(renderer: Renderer, pair: PreferencePair, max_length: int) -> PairScores:
    chosen = score_datums(
        renderer, pair.prompt_messages, response_text(pair.chosen_messages), max_length
    )
    rejected = score_datums(
        renderer, pair.prompt_messages, response_text(pair.rejected_messages), max_length
    )
    return (*chosen, *rejected)


def _forward_backward(
    client: TrainingClient, items: list[PairScores], share: float
) -> APIFuture[types.ForwardBackwardOutput]:
    """Submit one pass: the loss of `items`, weighted by their `share` of the step's pairs."""
    data = [d for item in items for d in item]
    return client.forward_backward_custom(data, bradley_terry_loss(share))


METRICS = ("rm_train_nll", "rm_train_accuracy")


async def _finish(
    step: Step[PairScores],
    evals: dict[str, float],
    logger: MetricsLogger,
    config: RewardModelConfig,
) -> dict[str, float]:
    outputs = [(output.metrics, n) for output, n in await step.outputs()]
    num_pairs = len(step.batch)  # the passes' means, weighted by their pairs
    metrics = {name: sum(float(m[name]) * n for m, n in outputs) / num_pairs for name in METRICS}
    metrics["num_pairs"] = float(num_pairs)
    return await log_step(step, metrics, evals, logger, config, "rm_train_nll")


async def _evaluate(
    client: TrainingClient,
    renderer: Renderer,
    pairs: list[PreferencePair],
    config: RewardModelConfig,
) -> dict[str, float]:
    """The held-out metrics, read from a sampling client of the current weights."""
    if not pairs:
        return {}
    sampler = await client.save_weights_and_get_sampling_client()
    model = BradleyTerryReward(sampler, renderer, config.max_length)
    return await held_out_metrics(model.compare_async, pairs)
