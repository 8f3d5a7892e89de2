"""Reward model: a pairwise judge, trained and read through the engine, that says which of two
responses to a prompt is better (the Tinker cookbook's preference model).

What it computes. A preference pair (prompt x, chosen y_c, rejected y_r) becomes two judge
prompts, one per order: a user message showing the question and both responses,

    Question: 3+4
    Response A: 7
    Response B: I am not sure, maybe 8.
    Which response is better, A or B?

rendered with the model's renderer and followed by the assistant's answer, "A" when y_c is
shown first and "B" when it is shown second. Only the answer's deciding token (the first
token where the rendered "A" and "B" replies differ; with a byte-level tokenizer the letter
itself, not the space before it) has weight. Each step runs `forward_backward` with the
`cross_entropy` loss on both orders of `batch_size` pairs, so a bias for a position earns
nothing, then one AdamW `optim_step`; the pairs go through in passes of `micro_batch_size`
(as many as fit in free memory unless set; see `plan_batch`), whose summed losses add up to
the step's. `rm_train_nll` is the mean NLL of the answer token.

The judge is read with `compute_logprobs` on a sampling client of its weights. With l_A and
l_B the logprobs of the two answer tokens, the judge prefers the response shown as A with
probability sigmoid(l_A - l_B) (the two letters renormalised), and

    P(x beats y) = 1/2 * (sigmoid(l_A - l_B | x shown as A) + sigmoid(l_B - l_A | x shown as B))

so P(y beats x) = 1 - P(x beats y) exactly. Held-out metrics, at step 0, every `eval_every`
steps and at the end: `rm_eval_accuracy`, the fraction of pairs with P(chosen beats rejected)
> 1/2 (a tie counting one half); `rm_eval_prob_chosen`, the mean of that probability;
`rm_eval_margin`, the mean log-odds for the chosen response, averaged over the two orders
(0 for a judge that only knows positions).

`JudgeReward` makes the judge an RL reward: each completion of a group scores its mean win
probability against the other completions (a round robin, so a group's rewards average 1/2);
a lone completion scores its win probability against the problem's reference answer, the
pointwise use of the same judge.
"""

from __future__ import annotations

import concurrent.futures
import math
import statistics
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal

from tinker import types

from thinker.algorithms import significance
from thinker.algorithms.common import (
    RunResult,
    Step,
    SupervisedLoop,
    log_step,
    pair_tokens,
    prepare_run,
    start_or_resume,
)
from thinker.algorithms.reward_model_config import RewardModelConfig
from thinker.data import split_train_eval
from thinker.data.preferences import PreferencePair, load_preference_pairs
from thinker.engine import ServiceClient
from thinker.engine.protocols import APIFuture, SamplingClient, TrainingClient, together
from thinker.errors import ConfigError, DatasetError
from thinker.renderers import (
    Message,
    Renderer,
    TrainOnWhat,
    datum_from_tokens_weights,
    renderer_for,
)
from thinker.rewards import Completion, Problem
from thinker.runs import MetricsLogger

__all__ = [
    "JudgePrompt",
    "JudgeReward",
    "RewardModelConfig",
    "judge_datum",
    "judge_messages",
    "preference",
    "render_judge_prompt",
    "round_robin_rewards",
    "train_reward_model",
]

Label = Literal["A", "B"]
LABELS: tuple[Label, Label] = ("A", "B")
# A comparison to judge: (the prompt's messages, response x, response y).
Comparison = tuple[list[Message], str, str]
# A preference pair rendered for the judge: chosen shown as A, then chosen shown as B.
PairDatums = tuple[types.Datum, types.Datum]


def judge_messages(prompt: list[Message], response_a: str, response_b: str) -> list[Message]:
    """The judge's conversation: one user message showing the question and both responses."""
    content = (
        f"Question: {_transcript(prompt)}\n"
        f"Response A: {response_a}\n"
        f"Response B: {response_b}\n"
        "Which response is better, A or B?"
    )
    return [Message(role="user", content=content)]


def _transcript(prompt: list[Message]) -> str:
    """A lone user message as itself; a longer conversation as "role: content" lines."""
    if len(prompt) == 1 and prompt[0]["role"] == "user":
        return prompt[0]["content"]
    return "\n".join(f"{m['role']}: {m['content']}" for m in prompt)


@dataclass(frozen=True)
class JudgePrompt:
    """One ordered comparison as tokens: the judge prompt and each answer's deciding token."""

    prefix: list[int]  # everything before the deciding token (the same for both answers)
    token_a: int
    token_b: int

    def sequence(self, label: Label) -> list[int]:
        return [*self.prefix, self.token_a if label == "A" else self.token_b]


def render_judge_prompt(
    renderer: Renderer,
    prompt: list[Message],
    response_a: str,
    response_b: str,
    max_length: int | None = None,
) -> JudgePrompt:
    """The comparison rendered with the reply "A" and with "B", split where the two differ.

    A prompt longer than `max_length` tokens keeps its last `max_length - 1` tokens.
    """
    messages = judge_messages(prompt, response_a, response_b)
    return split_replies(renderer, messages, LABELS, max_length)


def split_replies(
    renderer: Renderer,
    messages: list[Message],
    replies: tuple[str, str],
    max_length: int | None = None,
) -> JudgePrompt:
    """`messages` rendered with each of two assistant replies, split where the two differ:
    the shared prefix and each reply's deciding token (`sequence("A")` ends with the first
    reply's, `sequence("B")` with the second's). A prefix longer than `max_length` tokens
    keeps its last `max_length - 1` tokens."""
    tokens_a = _with_reply(renderer, messages, replies[0])
    tokens_b = _with_reply(renderer, messages, replies[1])
    pairs = zip(tokens_a, tokens_b, strict=False)  # the shorter one may end first
    split = next((i for i, (a, b) in enumerate(pairs) if a != b), None)
    if split is None:
        raise ConfigError(f"renderer {renderer.name!r} renders the replies {replies} alike")
    prefix = tokens_a[:split]
    if max_length is not None and len(prefix) >= max_length:
        prefix = prefix[len(prefix) - max_length + 1 :]
    return JudgePrompt(prefix, tokens_a[split], tokens_b[split])


def _with_reply(renderer: Renderer, messages: list[Message], label: str) -> list[int]:
    reply = Message(role="assistant", content=label)
    tokens, _ = renderer.build_supervised_example(
        [*messages, reply], TrainOnWhat.LAST_ASSISTANT_MESSAGE
    )
    return tokens


def judge_datum(judge_prompt: JudgePrompt, label: Label) -> types.Datum:
    """The SL example that teaches the judge to answer `label`: weight 1 on its deciding token."""
    tokens = judge_prompt.sequence(label)
    return datum_from_tokens_weights(tokens, [0.0] * (len(tokens) - 1) + [1.0])


def preference(
    logprobs_x_first: tuple[float, float], logprobs_y_first: tuple[float, float]
) -> tuple[float, float]:
    """P(x beats y) and its log-odds, from the judge's answer logprobs in both orders.

    Args:
        logprobs_x_first: (log p("A"), log p("B")) for the prompt showing x as A and y as B.
        logprobs_y_first: The same for the prompt showing y as A and x as B.

    Returns:
        The probability 1/2 (sigmoid(a1 - b1) + sigmoid(b2 - a2)) and the log-odds
        1/2 ((a1 - b1) + (b2 - a2)), each the mean over the two orders.
    """
    x_first = logprobs_x_first[0] - logprobs_x_first[1]
    x_second = logprobs_y_first[1] - logprobs_y_first[0]
    return 0.5 * (_sigmoid(x_first) + _sigmoid(x_second)), 0.5 * (x_first + x_second)


def round_robin_rewards(win_G_G: list[list[float]]) -> list[float]:
    """reward_i = the mean over j != i of win_G_G[i][j] = P(completion i beats completion j)."""
    n = len(win_G_G)
    if n < 2:
        raise ValueError("a round robin needs at least two completions")
    return [sum(row[j] for j in range(n) if j != i) / (n - 1) for i, row in enumerate(win_G_G)]


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


class JudgeReward:
    """RewardFn of a pairwise judge: each completion's mean win probability against its group.

    A group of one is scored against the problem's reference answer (the dataset row's
    "reference", else its "answer"): P(completion beats reference). Every judge request is
    submitted before any is awaited; identical responses tie at exactly 1/2 unasked.

    Args:
        sampler: A sampling client of the judge's weights (local or Tinker).
        renderer: The renderer the judge was trained with.
        max_length: The judge prompts' token limit (the reward model's `max_length`).
    """

    def __init__(
        self, sampler: SamplingClient, renderer: Renderer, max_length: int | None = None
    ) -> None:
        self.sampler = sampler
        self.renderer = renderer
        self.max_length = max_length

    def __call__(self, problem: Problem, completions: list[Completion]) -> list[float]:
        texts = [c.text for c in completions]
        if len(texts) == 1:
            return [self.compare([(problem.messages, texts[0], _reference(problem))])[0][0]]
        distinct = sorted(set(texts))
        pairs = [(x, y) for i, x in enumerate(distinct) for y in distinct[i + 1 :]]
        wins: dict[tuple[str, str], float] = {}
        results = self.compare([(problem.messages, x, y) for x, y in pairs])
        for (x, y), (p, _) in zip(pairs, results, strict=True):
            wins[x, y], wins[y, x] = p, 1.0 - p
        return round_robin_rewards([[wins.get((a, b), 0.5) for b in texts] for a in texts])

    def compare(self, comparisons: list[Comparison]) -> list[tuple[float, float]]:
        """(P(x beats y), log-odds) of each (prompt, x, y), blocking until all are answered.

        An empty answer is not judged: it loses to any answer and ties with another empty one
        (`unjudged`). The judge never saw one in its pairs, and a policy finds that out: on
        the shipped RLHF example, RL against the bare judge ended with every held-out answer
        empty, which the judge rated above the SL policy's answers 84% of the time."""
        ruled = [unjudged(c) for c in comparisons]
        with together(self.sampler):  # one batch whatever the timing
            futures = {i: self._submit(c) for i, c in enumerate(comparisons) if ruled[i] is None}
        # One blocking wait for them all: `.result()` of a finished future never blocks (the
        # tinker SDK warns, at every call, about a blocking `.result()` inside an event loop).
        concurrent.futures.wait([f.future() for fs in futures.values() for f in fs])
        return [
            r if r is not None else _combine([f.result() for f in futures[i]])
            for i, r in enumerate(ruled)
        ]

    async def compare_async(self, comparisons: list[Comparison]) -> list[tuple[float, float]]:
        """As `compare`, awaiting the requests instead of blocking on them."""
        ruled = [unjudged(c) for c in comparisons]
        with together(self.sampler):  # one batch whatever the timing
            futures = {i: self._submit(c) for i, c in enumerate(comparisons) if ruled[i] is None}
        return [
            r if r is not None else _combine([await f for f in futures[i]])
            for i, r in enumerate(ruled)
        ]

    def _submit(self, comparison: Comparison) -> list[APIFuture[list[float | None]]]:
        """Four logprob requests: x shown first (answer A, answer B), then y shown first."""
        prompt, x, y = comparison
        futures = []
        for a, b in ((x, y), (y, x)):
            judge_prompt = render_judge_prompt(self.renderer, prompt, a, b, self.max_length)
            for label in LABELS:
                tokens = types.ModelInput.from_ints(judge_prompt.sequence(label))
                futures.append(self.sampler.compute_logprobs(tokens))
        return futures


EMPTY_LOG_ODDS = 20.0  # how sure the rule is that an empty answer loses: e^-20


def unjudged(comparison: Comparison) -> tuple[float, float] | None:
    """The result of a comparison with an empty answer in it, or None to ask the judge."""
    _, x, y = comparison
    x_empty, y_empty = not x.strip(), not y.strip()
    if x_empty and y_empty:
        return 0.5, 0.0
    if x_empty or y_empty:
        return (0.0, -EMPTY_LOG_ODDS) if x_empty else (1.0, EMPTY_LOG_ODDS)
    return None


def _combine(logprobs: list[list[float | None]]) -> tuple[float, float]:
    """`preference` of the four answers' logprobs (the last entry of each sequence)."""
    a1, b1, a2, b2 = (_last(lp) for lp in logprobs)
    return preference((a1, b1), (a2, b2))


def _last(logprobs: list[float | None]) -> float:
    """The answer token's logprob (a judge prompt precedes it: only position 0 has None)."""
    last = logprobs[-1]
    assert last is not None, "a judge sequence of one token"
    return float(last)


def _reference(problem: Problem) -> str:
    reference = problem.row.get("reference", problem.answer)
    if not isinstance(reference, str) or not reference:
        raise DatasetError(
            "the reward model scores a lone completion against the problem's reference answer, "
            'but this problem has none; give each RL prompt a "reference" (or "answer")'
        )
    return reference


async def train_reward_model(
    config: RewardModelConfig,
    service: ServiceClient | None = None,
    logger: MetricsLogger | None = None,
) -> RunResult:
    """Train the pairwise judge by SL on preference pairs; see the module docstring."""
    run, service, logger = prepare_run(config, service, logger)

    # Set up: the client (fresh, from `init_from`, or resumed) and the rendered pairs.
    start = await start_or_resume(config, service, run, logger)
    client = start.client
    tokenizer = client.get_tokenizer()
    renderer = renderer_for(config.renderer, config.base_model, tokenizer)
    train_pairs, eval_pairs = datasets(config)
    train_data = [_pair_datums(renderer, pair, config.max_length) for pair in train_pairs]
    lengths = [pair_tokens(a, b) for a, b in train_data]
    loop = SupervisedLoop.planned(config, run, start, logger, train_data, lengths, "pairs")
    return await loop.run(
        partial(_forward_backward, client),
        partial(_finish, logger=logger, config=config),
        partial(_evaluate, client, renderer, eval_pairs, config),
        loss_units=_judged_datums,
    )


def datasets(config: RewardModelConfig) -> tuple[list[PreferencePair], list[PreferencePair]]:
    pairs = load_preference_pairs(config.dataset)
    if config.eval_dataset is not None:
        return pairs, load_preference_pairs(config.eval_dataset)
    return split_train_eval(pairs, config.eval_fraction, config.seed)


def response_text(messages: list[Message]) -> str:
    return "\n\n".join(m["content"] for m in messages)


def _pair_datums(renderer: Renderer, pair: PreferencePair, max_length: int) -> PairDatums:
    """The pair in both orders: chosen shown as A (answer "A"), then as B (answer "B")."""
    chosen, rejected = response_text(pair.chosen_messages), response_text(pair.rejected_messages)
    first = render_judge_prompt(renderer, pair.prompt_messages, chosen, rejected, max_length)
    second = render_judge_prompt(renderer, pair.prompt_messages, rejected, chosen, max_length)
    return judge_datum(first, "A"), judge_datum(second, "B")


def _forward_backward(
    client: TrainingClient, pairs: list[PairDatums], share: float
) -> APIFuture[types.ForwardBackwardOutput]:
    """Submit one pass: the judge's cross-entropy on both orders of each pair, a sum, so the
    passes add up as they are, whatever their `share` of the step."""
    return client.forward_backward([d for pair in pairs for d in pair], "cross_entropy")


def _judged_datums(pairs: list[PairDatums]) -> float:
    return 2 * len(pairs)  # both orders


async def _finish(
    step: Step[PairDatums],
    evals: dict[str, float],
    logger: MetricsLogger,
    config: RewardModelConfig,
) -> dict[str, float]:
    loss_sum = sum(output.metrics["loss:sum"] for output, _ in await step.outputs())
    num_pairs = len(step.batch)
    metrics = {
        "rm_train_nll": loss_sum / (2 * num_pairs),  # one token per datum
        "num_pairs": float(num_pairs),
    }
    return await log_step(step, metrics, evals, logger, config, "rm_train_nll")


async def _evaluate(
    client: TrainingClient,
    renderer: Renderer,
    pairs: list[PreferencePair],
    config: RewardModelConfig,
) -> dict[str, float]:
    """The judge's held-out metrics, read from a sampling client of the current weights."""
    if not pairs:
        return {}
    sampler = await client.save_weights_and_get_sampling_client()
    judge = JudgeReward(sampler, renderer, config.max_length)
    return await held_out_metrics(judge.compare_async, pairs)


async def held_out_metrics(
    compare: Callable[[list[Comparison]], Awaitable[list[tuple[float, float]]]],
    pairs: list[PreferencePair],
) -> dict[str, float]:
    """A reward model's held-out metrics from its (P(x beats y), log-odds) of each pair's
    (chosen, rejected): `rm_eval_accuracy` (a tie counts one half), `rm_eval_prob_chosen`,
    `rm_eval_margin`, and its calibration: `rm_eval_confidence` (the mean of max(p, 1 - p))
    and `rm_eval_ece` (expected calibration error over five confidence bins)."""
    results = await compare(
        [
            (
                p.prompt_messages,
                response_text(p.chosen_messages),
                response_text(p.rejected_messages),
            )
            for p in pairs
        ]
    )
    probs = [p for p, _ in results]
    calibrated = significance.calibration(probs)
    return {
        "rm_eval_accuracy": statistics.fmean(float(p > 0.5) + 0.5 * (p == 0.5) for p in probs),
        "rm_eval_prob_chosen": statistics.fmean(probs),
        "rm_eval_margin": statistics.fmean(m for _, m in results),
        # how sure it is against how often it is right (significance.calibration)
        "rm_eval_confidence": calibrated["confidence"],
        "rm_eval_ece": calibrated["ece"],
    }
