"""The eval run (algorithms/evaluation.py): its eval set's three row shapes and their errors, its
figures from known answers, and a run of the tiny model end to end with each kind of scorer."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.support.api import EXAMPLES
from tests.support.judge_server import judge_server

import thinker
from thinker.algorithms import evaluation, llm_judge, significance
from thinker.algorithms.evaluation_config import EvalConfig
from thinker.algorithms.reward_model import JudgeReward, train_reward_model
from thinker.algorithms.reward_model_config import RewardModelConfig
from thinker.errors import DatasetError
from thinker.renderers import renderer_for
from thinker.runs import RunLogger


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_eval_set_takes_chats_prompt_completions_and_problems(tmp_path: Path) -> None:
    rows = [
        {"messages": [{"role": "user", "content": "2+2"}, {"role": "assistant", "content": "4"}]},
        {"prompt": "3+3", "completion": "6"},
        {"prompt": "write f", "tests": ["assert f() == 1"]},
        {"messages": [{"role": "user", "content": "1+1"}], "answer": "2"},
    ]
    examples = evaluation.load_examples(_write(tmp_path / "set.jsonl", rows))
    assert [e.reference for e in examples] == ["4", "6", None, "2"]
    assert [e.problem.messages[-1]["content"] for e in examples] == ["2+2", "3+3", "write f", "1+1"]
    assert all(m["role"] == "user" for e in examples for m in e.problem.messages)
    assert examples[2].problem.tests == ["assert f() == 1"]
    assert len(evaluation.load_examples(tmp_path / "set.jsonl", max_examples=2)) == 2


def test_bad_rows_of_the_eval_set_are_reported_with_their_lines(tmp_path: Path) -> None:
    rows = [
        {"prompt": "ok", "completion": "fine"},
        {"prompt": "x", "completion": 7},
        {"messages": [{"role": "assistant", "content": "an answer to nothing"}]},
        {"text": "neither"},
    ]
    with pytest.raises(DatasetError) as e:
        evaluation.load_examples(_write(tmp_path / "bad.jsonl", rows))
    text = str(e.value)
    assert "bad.jsonl:2: completion: expected a string" in text
    assert "bad.jsonl:3: messages: no message before the reference to answer" in text
    assert "bad.jsonl:4" in text and "prompt" in text


def _answers(scores: list[float | None], nll: float = 1.0) -> list[dict[str, object]]:
    return [
        {"index": i, "nll": nll, "nll_tokens": 2.0, "answers": ["x"], "terminated": [True],
         "scores": [s], "score": s}
        for i, s in enumerate(scores)
    ]  # fmt: skip


def test_the_figures_compare_every_pair_of_models_prompt_by_prompt(tmp_path: Path) -> None:
    rows = [{"prompt": f"q{i}", "answer": "a"} for i in range(6)]
    set_path = _write(tmp_path / "set.jsonl", rows)
    config = EvalConfig(
        dataset=set_path,
        models=["base", {"model": "runs/x/sampler", "name": "tuned"}, "other"],
        resamples=1000,
    )
    examples = evaluation.load_examples(set_path)
    answers = [
        _answers([0, 0, 1, 0, 1, 0], nll=2.0),
        _answers([1, 1, 1, 1, 0, 0], nll=1.0),
        _answers([0, 0, 0, 0, 0, 0]),
    ]
    summary = evaluation.summarize(config, examples, answers)
    assert [m["name"] for m in summary["models"]] == ["base", "tuned", "other"]
    assert [m["score_mean"] for m in summary["models"]] == pytest.approx([2 / 6, 4 / 6, 0])
    assert summary["models"][0]["nll_mean"] == pytest.approx(2.0)
    pairs = {(c["a"], c["b"]): c for c in summary["comparisons"]}
    assert list(pairs) == [("base", "tuned"), ("base", "other"), ("tuned", "other")]
    # tuned against base: prompts 0, 1, 3 won, 4 lost, 2 and 5 tied
    first = pairs[("base", "tuned")]
    assert (first["wins"], first["ties"], first["losses"]) == (3, 2, 1)
    assert first["p_value"] == pytest.approx(significance.sign_test(3, 1))
    assert first["win_rate"] == pytest.approx(4 / 6)
    assert (pairs[("base", "other")]["losses"], pairs[("base", "other")]["ties"]) == (2, 4)
    assert [r["model"] for r in summary["leaderboard"]] == ["tuned", "base", "other"]
    rows = evaluation.sample_rows(config, examples, answers)
    assert [r["disagree"] for r in rows] == [True, True, True, True, True, False]
    assert rows[2]["answers"][1] == {
        "model": "tuned", "nll": 1.0, "nll_tokens": 2.0, "answers": ["x"],
        "terminated": [True], "scores": [1], "score": 1,
    }  # fmt: skip


def test_two_models_need_two_names() -> None:
    with pytest.raises(ValueError, match="thinker/tiny named twice"):
        EvalConfig(dataset=Path("x.jsonl"), models=["thinker/tiny", "thinker/tiny"])
    with pytest.raises(ValueError, match="at least 1"):
        EvalConfig(dataset=Path("x.jsonl"), models=[])


def test_the_tiny_model_is_evaluated_end_to_end_and_resumes_its_answers(tmp_path: Path) -> None:
    """Two labels of the tiny base model, greedy: the same answers, so every prompt ties and
    the verdict says no difference; scorer nll generates nothing and scores minus the NLL;
    a second run reuses the answers files instead of answering again."""
    rows = [{"prompt": f"{i}+{i}", "completion": str(2 * i)} for i in range(5)]
    set_path = _write(tmp_path / "set.jsonl", rows)
    run = tmp_path / "run"
    config = EvalConfig(
        dataset=set_path,
        models=[{"model": "thinker/tiny", "name": "a"}, {"model": "thinker/tiny", "name": "b"}],
        max_tokens=6,
        log_path=run,
        resamples=500,
    )
    result = asyncio.run(evaluation.main(config))
    summary = json.loads((run / evaluation.SUMMARY).read_text())
    assert result.steps == 2
    (only,) = summary["comparisons"]
    assert (only["wins"], only["ties"], only["losses"]) == (0, 5, 0) and not only["significant"]
    assert only["verdict"].startswith("No significant difference between a and b")
    samples = [json.loads(line) for line in (run / evaluation.SAMPLES).read_text().splitlines()]
    assert [s["reference"] for s in samples] == ["0", "2", "4", "6", "8"]
    assert all(len(a["answers"]) == 1 and a["nll"] > 0 for s in samples for a in s["answers"])
    before = (run / evaluation.ANSWERS_DIR / "0.jsonl").stat().st_mtime_ns
    asyncio.run(evaluation.main(config))
    assert (run / evaluation.ANSWERS_DIR / "0.jsonl").stat().st_mtime_ns == before

    by_nll = EvalConfig.model_validate(
        {**config.model_dump(), "scorer": {"type": "nll"}, "log_path": tmp_path / "nll"}
    )
    asyncio.run(evaluation.main(by_nll))
    first = json.loads((tmp_path / "nll" / evaluation.SAMPLES).read_text().splitlines()[0])
    answer = first["answers"][0]
    assert "answers" not in answer and answer["score"] == pytest.approx(-answer["nll"])


def test_thinker_compare_prints_the_scores_and_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from thinker.cli import main

    set_path = _write(tmp_path / "set.jsonl", [{"prompt": "1+1", "answer": "2"}] * 3)
    argv = ["compare", str(set_path), "--model", "thinker/tiny", "--model", "b=thinker/tiny"]
    assert main([*argv, "--max-tokens", "4", "--out", str(tmp_path / "run")]) == 0
    printed = capsys.readouterr().out
    assert "thinker/tiny: score -0.100 [-0.100, -0.100]" in printed
    assert "No significant difference between thinker/tiny and b: b's 50% win rate" in printed
    assert main([*argv, "--scorer", "judge", "--out", str(tmp_path / "bad")]) == 2
    assert "--scorer.type: Input should be" in capsys.readouterr().err
    assert main([*argv, "--scorer", "llm_judge", "--out", str(tmp_path / "bad")]) == 2
    assert "needs `judge_model`" in capsys.readouterr().err
    with judge_server() as (url, seen):
        judged = ["--scorer", "llm_judge", "--judge-url", url, "--judge-model", "grader"]
        assert main([*argv, *judged, "--max-tokens", "4", "--out", str(tmp_path / "j")]) == 0
    assert len(seen) == 6  # 3 prompts x 2 models
    assert "thinker/tiny: score 0.222 [0.222, 0.222]" in capsys.readouterr().out


def test_a_trained_judge_scores_each_answer_against_the_reference(tmp_path: Path) -> None:
    """Scorer reward_model with a pairwise judge (two SL steps on the shipped preferences):
    each answer's score is the judge's P(it beats the row's reference), what the judge itself
    gives for that comparison; the config names the weights, and rows need a reference."""
    judge_config = RewardModelConfig(
        dataset=EXAMPLES / "preferences" / "train.jsonl",
        max_steps=2,
        batch_size=8,
        save_every=0,
        eval_every=0,
        log_path=tmp_path / "rm",
    )
    service = thinker.ServiceClient(storage_dir=tmp_path / "store")
    trained = asyncio.run(train_reward_model(judge_config, service, RunLogger(tmp_path / "rm")))
    assert trained.sampler_path is not None
    rows = [{"prompt": f"{i}+{i}", "completion": str(2 * i)} for i in range(4)]
    config = EvalConfig(
        dataset=_write(tmp_path / "set.jsonl", rows),
        models=["thinker/tiny"],
        scorer={
            "type": "reward_model",
            "reward_model": trained.sampler_path,
            "reward_model_base": "thinker/tiny",
        },
        max_tokens=6,
        nll=False,
        log_path=tmp_path / "run",
        resamples=200,
    )
    asyncio.run(evaluation.main(config, service=service))
    samples = [
        json.loads(x) for x in (tmp_path / "run" / evaluation.SAMPLES).read_text().splitlines()
    ]
    summary = json.loads((tmp_path / "run" / evaluation.SUMMARY).read_text())
    assert summary["scorer"] == "reward_model"
    sampler = service.create_sampling_client(model_path=trained.sampler_path).result()
    renderer = renderer_for(None, "thinker/tiny", sampler.get_tokenizer())
    judge = JudgeReward(sampler, renderer, judge_config.max_length)
    for row in samples:
        (answer,) = row["answers"][0]["answers"]
        messages = [{"role": "user", "content": row["prompt"]}]
        ((p, _),) = judge.compare([(messages, answer, row["reference"])])
        print(f"{row['prompt']!r}: {answer!r} against {row['reference']!r}: {p:.4f}")
        assert 0.0 <= row["answers"][0]["score"] <= 1.0
        assert row["answers"][0]["score"] == pytest.approx(p, abs=1e-6)
    with pytest.raises(ValueError, match="needs `reward_model`"):
        EvalConfig.model_validate({**config.model_dump(), "scorer": {"type": "reward_model"}})
    no_reference = _write(
        tmp_path / "bare.jsonl", [{"messages": [{"role": "user", "content": "hi"}]}]
    )
    bare = EvalConfig.model_validate({**config.model_dump(), "dataset": no_reference})
    with pytest.raises(DatasetError, match="scorer reward_model needs a reference answer"):
        asyncio.run(evaluation.main(bare, service=service))


def test_a_model_as_judge_grades_each_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scorer llm_judge at an OpenAI-compatible endpoint (scripted: 10 for the reference, 3
    otherwise, no grade for a riddle): scores are (grade - 1) / 9, an answer without a grade 0
    (counted in the log), and the stored key goes in the Authorization header. Then a model
    Thinker serves as the judge (the tiny model, whose replies are rarely grades)."""
    monkeypatch.setenv(llm_judge.KEY_ENV, "sk-test-judge")
    rows = [{"prompt": f"{i}+{i}", "completion": str(2 * i)} for i in range(3)]
    rows.append({"prompt": "a riddle", "completion": "time"})
    dataset = _write(tmp_path / "set.jsonl", rows)
    with judge_server() as (url, seen):
        config = EvalConfig(
            dataset=dataset,
            models=["thinker/tiny"],
            scorer={"type": "llm_judge", "judge_url": url, "judge_model": "grader"},
            max_tokens=4,
            nll=False,
            log_path=tmp_path / "run",
            resamples=200,
        )
        asyncio.run(evaluation.main(config))
    assert seen == ["Bearer sk-test-judge"] * 4
    lines = (tmp_path / "run" / evaluation.SAMPLES).read_text().splitlines()
    scores = [json.loads(line)["answers"][0]["score"] for line in lines]
    assert scores == pytest.approx([2 / 9, 2 / 9, 2 / 9, 0.0])  # the tiny model never says 0, 2, 4
    assert "sk-test-judge" not in "".join(
        p.read_text() for p in (tmp_path / "run").rglob("*.json*")
    )
    assert llm_judge.grade("Grade: 10/10") == 1.0 and llm_judge.grade("none") is None

    served = EvalConfig.model_validate(
        {
            **config.model_dump(),
            "scorer": {"type": "llm_judge", "judge_model": "thinker/tiny"},
            "log_path": tmp_path / "served",
        }
    )
    asyncio.run(evaluation.main(served))
    lines = (tmp_path / "served" / evaluation.SAMPLES).read_text().splitlines()
    for line in lines:
        score = json.loads(line)["answers"][0]["score"]
        assert score == 0.0 or round(score * 9) == pytest.approx(score * 9)
    with pytest.raises(ValueError, match="needs `judge_model`"):
        EvalConfig.model_validate({**config.model_dump(), "scorer": {"type": "llm_judge"}})
