"""A model as judge: an eval scorer that asks a language model to grade each answer.

The judge is shown the question, the reference answer (when the row has one) and the answer,
with a rubric, and replies with a grade from 1 to 10; the score is (grade - 1) / 9, from 0 to
1. The grade is the first whole number from 1 to 10 in the reply; a reply without one scores
0 and is counted (`unparsed`), so that a judge that does not follow the format shows up in
the job's log rather than as a plausible score.

Two kinds of judge:
- a model Thinker serves (a base model, sampler weights), on a sampling client of this run's
  engine, greedy;
- an external OpenAI-compatible endpoint (`judge_url`, for example https://api.openai.com/v1,
  and its `judge_model` name), called at `/chat/completions` with temperature 0. Its API key
  is the server's stored judge key (PUT /api/settings/judge-key), which a job's worker gets
  in THINKER_JUDGE_API_KEY; it is never written to the run directory or printed.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable

import httpx
from tinker import types

from thinker.engine.protocols import SamplingClient, together
from thinker.errors import BackendError, ConfigError
from thinker.renderers import Message, Renderer
from thinker.rewards import Completion, Problem

KEY_ENV = "THINKER_JUDGE_API_KEY"
RUBRIC = (
    "Grade how well the answer responds to the question: 1 means wrong or useless, 10 means "
    "fully correct and helpful."
)
GRADE = re.compile(r"\b(10|[1-9])\b")
REPLY_TOKENS = 16
TIMEOUT_S = 120.0

Ask = Callable[[list[list[Message]]], list[str]]  # judge conversations -> the judge's replies


def judge_prompt(problem: Problem, answer: str, rubric: str | None) -> list[Message]:
    """The conversation the judge answers with a grade."""
    question = "\n\n".join(f"{m['role']}: {m['content']}" for m in problem.messages)
    parts = [rubric or RUBRIC, f"Question:\n{question}"]
    if problem.answer is not None:
        parts.append(f"Reference answer:\n{problem.answer}")
    parts += [f"Answer to grade:\n{answer}", "Reply with the grade alone, a number from 1 to 10."]
    return [{"role": "user", "content": "\n\n".join(parts)}]


def grade(reply: str) -> float | None:
    """(grade - 1) / 9 for the first whole number from 1 to 10 in `reply`; None without one."""
    found = GRADE.search(reply)
    return None if found is None else (int(found.group(1)) - 1) / 9


class ModelJudge:
    """RewardFn: each completion graded by the judge (`ask`), as the module docstring says."""

    def __init__(self, ask: Ask, rubric: str | None = None) -> None:
        self.ask = ask
        self.rubric = rubric
        self.unparsed = 0  # replies without a grade (scored 0)
        self.replies = 0
        self._lock = threading.Lock()

    def __call__(self, problem: Problem, completions: list[Completion]) -> list[float]:
        return self.judge(problem, completions)[0]

    def judge(
        self, problem: Problem, completions: list[Completion]
    ) -> tuple[list[float], list[str]]:
        """Each completion's score and the judge's reply it was read from (kept with the
        eval's samples: what a grade rests on, and the replies that had none)."""
        replies = self.ask([judge_prompt(problem, c.text, self.rubric) for c in completions])
        grades = [grade(r) for r in replies]
        with self._lock:
            self.replies += len(grades)
            self.unparsed += sum(g is None for g in grades)
        return [0.0 if g is None else g for g in grades], replies


def served_judge(sampler: SamplingClient, renderer: Renderer) -> Ask:
    """A judge on a model Thinker serves: greedy replies from `sampler`."""
    params = types.SamplingParams(
        max_tokens=REPLY_TOKENS, temperature=0.0, stop=renderer.get_stop_sequences()
    )

    def ask(conversations: list[list[Message]]) -> list[str]:
        with together(sampler):  # one batch
            futures = [
                sampler.sample(renderer.build_generation_prompt(c), 1, params)
                for c in conversations
            ]
        replies = []
        for future in futures:
            message, _ = renderer.parse_response(list(future.result().sequences[0].tokens))
            replies.append(str(message["content"]))
        return replies

    return ask


def endpoint_judge(base_url: str, model: str, api_key: str | None = None) -> Ask:
    """A judge at an OpenAI-compatible endpoint: `base_url`/chat/completions, temperature 0.
    `api_key`: the stored judge key (default: THINKER_JUDGE_API_KEY; none is sent without)."""
    key = api_key if api_key is not None else os.environ.get(KEY_ENV)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = base_url.rstrip("/") + "/chat/completions"

    def ask(conversations: list[list[Message]]) -> list[str]:
        replies = []
        with httpx.Client(timeout=TIMEOUT_S, headers=headers) as client:
            for messages in conversations:
                body = {"model": model, "messages": messages, "temperature": 0.0}
                try:
                    response = client.post(url, json=body)
                except httpx.HTTPError as e:
                    raise BackendError(f"the judge at {url} did not answer: {e}") from None
                if response.status_code in (401, 403):
                    raise ConfigError(
                        f"the judge at {url} refused the API key ({response.status_code}): "
                        "store the right one with PUT /api/settings/judge-key"
                    )
                if response.status_code != 200:
                    raise BackendError(
                        f"the judge at {url} answered {response.status_code}: {response.text[:300]}"
                    )
                try:
                    replies.append(str(response.json()["choices"][0]["message"]["content"]))
                except (ValueError, KeyError, IndexError, TypeError):
                    raise BackendError(
                        f"the judge at {url} sent no chat completion: {response.text[:300]}"
                    ) from None
        return replies

    return ask
