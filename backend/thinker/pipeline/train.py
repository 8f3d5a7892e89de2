"""One algorithm's training run: a section of a pipeline (or one stage of several) handed to
its loop (`sl.main`, `dpo.main`, `rl.main`, `train_reward_model`) with the engine and the
logger it writes to. The stages themselves, each from the one before, are `pipeline.stages`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, assert_never

from thinker.algorithms import bradley_terry, dpo, reward_model, rl, sl
from thinker.algorithms.bradley_terry import BradleyTerryReward
from thinker.algorithms.common import RunResult
from thinker.algorithms.reward_model import JudgeReward
from thinker.engine import ServiceClient
from thinker.errors import ConfigError
from thinker.pipeline.config import DPOTraining, RLTraining, RMTraining, SLTraining, StageSection
from thinker.renderers import renderer_for
from thinker.runs import MetricsLogger


@dataclass(frozen=True)
class Judge:
    """A trained reward model: the final sampler weights of an rm stage, and how it reads."""

    sampler_path: str
    base_model: str
    renderer: str | None
    max_length: int  # of a judge prompt, as the rm stage trained it
    head: str = "judge"  # or "bradley_terry": a score per response

    @classmethod
    def of(cls, stage: RMTraining, result: RunResult) -> Judge:
        if result.sampler_path is None:
            raise ConfigError(f"stage {stage.name}: the reward model ended without a checkpoint")
        return cls(
            result.sampler_path, stage.base_model, stage.renderer, stage.max_length, stage.head
        )

    async def reward(self, service: ServiceClient) -> JudgeReward | BradleyTerryReward:
        """The reward model as an RL reward, on a sampling client of its weights."""
        sampler = await service.create_sampling_client(model_path=self.sampler_path)
        renderer = renderer_for(self.renderer, self.base_model, sampler.get_tokenizer())
        if self.head == "bradley_terry":
            return BradleyTerryReward(sampler, renderer, self.max_length)
        return JudgeReward(sampler, renderer, self.max_length)


async def train_section(
    section: StageSection,
    run_dir: Path,
    service: ServiceClient,
    judge: Judge | None = None,
    logger: MetricsLogger | None = None,
    **overrides: Any,
) -> RunResult:
    """Run `section`'s algorithm on `service`, writing into `run_dir`.

    Args:
        section: The training section (or stage) to run.
        run_dir: Where metrics.jsonl, checkpoints.jsonl and config.yaml go.
        service: The engine (`make_service`): every stage of a run shares one, whose storage
            is the run's, so that one stage's `tinker://` paths resolve in the next.
        judge: The reward model that scores an rl section whose reward is `reward_model`.
        logger: Where metrics and events go (default: the run directory's metrics.jsonl,
            echoed to stdout); the job worker passes one that also feeds events.jsonl.
        **overrides: Settings the pipeline sets, e.g. `init_from`.

    Raises:
        ConfigError: An rl section scored by `reward_model` and no judge.
    """
    if isinstance(section, SLTraining):
        return await sl.main(section.to_run_config(run_dir, **overrides), service, logger)
    if isinstance(section, DPOTraining):
        return await dpo.main(section.to_run_config(run_dir, **overrides), service, logger)
    if isinstance(section, RLTraining):
        reward_fn = None
        if section.reward.type == "reward_model":
            if judge is None:
                raise ConfigError(
                    f"stage {section.name}: reward type reward_model needs an earlier "
                    "`algorithm: rm` stage (or use `algorithm: rlhf`)"
                )
            reward_fn = await judge.reward(service)
        config = section.to_run_config(run_dir, **overrides)
        return await rl.main(config, service, logger, reward_fn=reward_fn)
    if isinstance(section, RMTraining):
        rm_config = section.to_run_config(run_dir)
        if rm_config.head == "bradley_terry":
            return await bradley_terry.train_bradley_terry(rm_config, service, logger)
        return await reward_model.train_reward_model(rm_config, service, logger)
    assert_never(section)
