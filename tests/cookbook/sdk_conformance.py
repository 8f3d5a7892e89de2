"""The installed `tinker` SDK's client methods against a Thinker server, one call each.

Runs in an environment with only the SDK (and torch, for custom losses), against a running
`thinker serve` whose base models include MODEL (run_recipes.py runs it in the cookbook's
environment, on the offline cache it builds, so `get_tokenizer` works offline too). Each
method is called as a user would and its result checked; it is then one of:

- `ok`: it ran and its result was right;
- `refused`: the server answered with its reason, as documented for what only the hosted
  service offers (accounts, audit logs, projects);
- `absent`: this SDK version has no such method;
- `FAILED`: anything else (the run then exits 1).

It prints a Markdown table (method, result, detail) and `N passed, N failed`. Usage:

    python tests/cookbook/sdk_conformance.py http://127.0.0.1:8000 [--markdown out.md]
"""

from __future__ import annotations

import argparse
import inspect
import sys
import traceback
import warnings
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import tinker
import torch
from tinker import types

MODEL = "meta-llama/Llama-3.2-1B"
KEY = "tml-conformance"
TOKENS = [5, 6, 7, 8, 9, 10, 11, 12]
HOSTED_ONLY = ("hosted service",)  # the server's words for what it does not offer
warnings.simplefilter("ignore", FutureWarning)  # the SDK's own deprecation notes


def got(value: Any) -> Any:
    """A client, from an SDK that returns it (< 0.38) or a future of it (0.38)."""
    return value.result() if hasattr(value, "result") else value


def datum(tokens: list[int]) -> types.Datum:
    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
    )


class Run:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str]] = []

    def check(
        self, name: str, call: Callable[[], str | None], obj: Any = None, needs: str = ""
    ) -> None:
        """Call `call` (it returns a detail, or raises); `obj` lacking the method, or the
        method lacking the keyword `needs`: absent."""
        method = name.rsplit(".", 1)[-1].split("[")[0]
        found = getattr(obj, method, None) if obj is not None else None
        if obj is not None and (
            found is None or (needs and needs not in inspect.signature(found).parameters)
        ):
            self.rows.append((name, "absent", f"not in tinker {version('tinker')}"))
            return
        try:
            detail = call() or ""
            self.rows.append((name, "ok", detail))
        except Exception as e:  # noqa: BLE001 - every outcome is a row
            text = f"{type(e).__name__}: {e}".replace("\n", " ")[:160]
            hosted = any(word in str(e) for word in HOSTED_ONLY)
            self.rows.append((name, "refused" if hosted else "FAILED", text))
            if not hosted:
                traceback.print_exc()

    def table(self) -> str:
        lines = [f"| method (tinker {version('tinker')}) | result | detail |", "|---|---|---|"]
        lines += [f"| `{n}` | {r} | {d.replace('|', '/')} |" for n, r, d in self.rows]
        return "\n".join(lines)


def check_sample_options(run: Run, client: Any) -> None:
    """`sample`'s top-k, target-id, alternative-token and last-n options, each checked
    against the plain prompt logprobs the same server returns."""
    prompt = types.ModelInput.from_ints(TOKENS)
    greedy = types.SamplingParams(max_tokens=4, temperature=0.0, stop=[])
    rows = len(TOKENS) - 1

    def sample(**options: Any) -> Any:
        return client.sample(prompt, 1, greedy, **options).result()

    def topk_sample() -> str:
        seq = sample(topk_sample_logprobs=3).sequences[0]
        assert len(seq.topk_logprobs) == len(seq.tokens), seq
        for token, logprob, top in zip(seq.tokens, seq.logprobs, seq.topk_logprobs, strict=True):
            assert top[0][0] == token and abs(top[0][1] - logprob) < 1e-5, (token, top)
            assert [v for _, v in top] == sorted((v for _, v in top), reverse=True), top
        return f"top-3 at {len(seq.tokens)} tokens, the first the greedy token"

    def topk_prompt() -> str:
        out = sample(include_prompt_logprobs=True, topk_prompt_logprobs=2)
        top = out.topk_prompt_logprobs
        assert top[0] is None and len(top) == len(TOKENS), top
        for position in range(1, len(TOKENS)):
            assert top[position][0][1] >= out.prompt_logprobs[position] - 1e-5, position
        return f"top-2 at {len(TOKENS) - 1} prompt positions"

    def targets() -> str:
        ids = torch.full((rows, 2), -1, dtype=torch.long)
        ids[rows - 1, 1] = TOKENS[-1]  # the last prompt token: its prompt logprob
        out = sample(
            include_prompt_logprobs=True,
            target_prompt_logprobs=types.TensorData.from_torch_sparse(ids, pad_value=-1),
        )
        got = out.target_prompt_logprobs.to_torch()
        assert list(got.shape) == [rows, 2] and got[rows - 1, 0] == 0.0, got
        assert abs(got[rows - 1, 1].item() - out.prompt_logprobs[-1]) < 1e-5, got
        return f"{got[rows - 1, 1].item():.3f} = the prompt logprob"

    def alternatives() -> str:
        alt = sample(prompt_alt_tokens_k=2).prompt_alt_tokens
        tokens, logprobs = alt.tokens.to_torch(), alt.logprobs.to_torch()
        assert list(tokens.shape) == list(logprobs.shape) == [rows, 2], tokens.shape
        assert (tokens[:, 0] == tokens[:, 1]).all() and (logprobs < 0).all()  # greedy draws
        return f"{rows} x 2 draws"

    def last_n() -> str:
        whole = sample(include_prompt_logprobs=True).prompt_logprobs
        cut = sample(include_prompt_logprobs=True, prompt_logprobs_last_n=3).prompt_logprobs
        scored = client.compute_logprobs(prompt, prompt_logprobs_last_n=3).result()
        for got in (cut, scored):
            assert got[:-3] == [None] * (len(TOKENS) - 3), got
            assert all(abs(a - b) < 1e-5 for a, b in zip(got[-3:], whole[-3:], strict=True))
        return "the last 3 scored, the rest None (compute_logprobs too)"

    for option, call in (
        ("topk_sample_logprobs", topk_sample),
        ("topk_prompt_logprobs", topk_prompt),
        ("target_prompt_logprobs", targets),
        ("prompt_alt_tokens_k", alternatives),
        ("prompt_logprobs_last_n", last_n),
    ):
        run.check(f"SamplingClient.sample[{option}]", call, client, needs=option)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_url")
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    run = Run()
    check = run.check
    service = tinker.ServiceClient(base_url=args.base_url, api_key=KEY)
    state: dict[str, Any] = {}

    def create() -> str:
        state["tc"] = got(service.create_lora_training_client(MODEL, rank=4, seed=1))
        return state["tc"].get_info().model_id

    check("ServiceClient.create_lora_training_client", create, service)
    tc = state["tc"]

    def info() -> str:
        got = tc.get_info()
        assert got.model_data.model_name == MODEL and got.lora_rank == 4, got
        return f"rank {got.lora_rank}"

    check("TrainingClient.get_info", info, tc)

    def forward_backward() -> str:
        first = tc.forward_backward([datum(TOKENS)], "cross_entropy").result()
        tc.optim_step(types.AdamParams(learning_rate=5e-2)).result()
        after = tc.forward([datum(TOKENS)], "cross_entropy").result()
        assert after.metrics["loss:sum"] < first.metrics["loss:sum"], (first, after)
        return f"loss {first.metrics['loss:sum']:.3f} -> {after.metrics['loss:sum']:.3f}"

    check("TrainingClient.forward_backward", forward_backward, tc)

    def forward() -> str:
        out = tc.forward([datum(TOKENS)], "cross_entropy").result()
        logprobs = out.loss_fn_outputs[0]["logprobs"].tolist()
        assert len(logprobs) == len(TOKENS) - 1 and all(v < 0 for v in logprobs)
        return f"{len(logprobs)} logprobs"

    check("TrainingClient.forward", forward, tc)

    def optim_step() -> str:
        tc.forward_backward([datum(TOKENS)], "cross_entropy").result()
        metrics = tc.optim_step(types.AdamParams(learning_rate=1e-3)).result().metrics or {}
        assert metrics.get("grad_norm", 0) > 0, metrics
        return f"grad_norm {metrics['grad_norm']:.3f}"

    check("TrainingClient.optim_step", optim_step, tc)

    for loss, inputs in (
        ("importance_sampling", {"logprobs": [-1.0] * 7, "advantages": [1.0] * 7}),
        ("ppo", {"logprobs": [-1.0] * 7, "advantages": [1.0] * 7}),
        ("cispo", {"logprobs": [-1.0] * 7, "advantages": [1.0] * 7}),
        ("dro", {"logprobs": [-1.0] * 7, "advantages": [1.0] * 7}),
    ):

        def rl_loss(loss: str = loss, inputs: dict = inputs) -> str:
            d = types.Datum(
                model_input=types.ModelInput.from_ints(TOKENS[:-1]),
                loss_fn_inputs={"target_tokens": TOKENS[1:], **inputs},
            )
            config = {"beta": 0.1} if loss == "dro" else None
            out = tc.forward_backward([d], loss, config).result()
            return f"loss:sum {out.metrics['loss:sum']:.3f}"

        check(f"TrainingClient.forward_backward[{loss}]", rl_loss, tc)

    def custom() -> str:
        def loss_fn(data: list, logprobs: list) -> tuple[torch.Tensor, dict[str, float]]:
            loss = -torch.cat(logprobs).mean()
            return loss, {"neg_mean_logprob": float(loss.detach())}

        out = tc.forward_backward_custom([datum(TOKENS)], loss_fn).result()
        return f"metrics {sorted(out.metrics)}"

    check("TrainingClient.forward_backward_custom", custom, tc)

    def save_state() -> str:
        state["state"] = tc.save_state("conformance", 3600).result().path
        return state["state"]

    check("TrainingClient.save_state", save_state, tc)

    def load_state() -> str:
        tc.load_state(state["state"]).result()
        return "loaded"

    check("TrainingClient.load_state", load_state, tc)

    def load_with_optimizer() -> str:
        tc.load_state_with_optimizer(state["state"]).result()
        return "loaded"

    check("TrainingClient.load_state_with_optimizer", load_with_optimizer, tc)

    def for_sampler() -> str:
        state["sampler"] = tc.save_weights_for_sampler("conformance-s").result().path
        return state["sampler"]

    check("TrainingClient.save_weights_for_sampler", for_sampler, tc)

    def sampler_of_training() -> str:
        sampler = got(tc.save_weights_and_get_sampling_client())
        params = types.SamplingParams(max_tokens=6, temperature=1.0, seed=3)
        out = sampler.sample(types.ModelInput.from_ints(TOKENS), 3, params).result()
        assert len(out.sequences) == 3 and all(len(s.tokens) == 6 for s in out.sequences)
        ids = [getattr(s, "sequence_id", None) for s in out.sequences]
        return f"3 samples, ids {ids[0]}..."

    check("TrainingClient.save_weights_and_get_sampling_client", sampler_of_training, tc)

    def external() -> str:
        state["external"] = tc.save_weights_external("conformance-e").result().path
        return state["external"]

    check("TrainingClient.save_weights_external", external, tc)

    def tokenizer() -> str:
        return f"{type(tc.get_tokenizer()).__name__}"

    check("TrainingClient.get_tokenizer", tokenizer, tc)

    def from_state(with_optimizer: bool) -> str:
        create_from = (
            service.create_training_client_from_state_with_optimizer
            if with_optimizer
            else service.create_training_client_from_state
        )
        loaded = got(create_from(state["state"]))
        return loaded.get_info().model_id

    check("ServiceClient.create_training_client_from_state",
          lambda: from_state(False), service)  # fmt: skip
    check("ServiceClient.create_training_client_from_state_with_optimizer",
          lambda: from_state(True), service)  # fmt: skip

    def sampling_client(by_path: bool) -> str:
        kwargs = {"model_path": state["sampler"]} if by_path else {"base_model": MODEL}
        client = got(service.create_sampling_client(**kwargs))
        greedy = types.SamplingParams(max_tokens=4, temperature=0.0, stop=[])
        out = client.sample(types.ModelInput.from_ints(TOKENS), 1, greedy).result()
        logprobs = client.compute_logprobs(types.ModelInput.from_ints(TOKENS)).result()
        assert len(out.sequences[0].tokens) == 4 and logprobs[0] is None
        state["sampling"] = client
        return f"sampled {list(out.sequences[0].tokens)}"

    check("ServiceClient.create_sampling_client[base_model]",
          lambda: sampling_client(False), service)  # fmt: skip
    check("ServiceClient.create_sampling_client[model_path]",
          lambda: sampling_client(True), service)  # fmt: skip
    check("SamplingClient.get_tokenizer",
          lambda: type(state["sampling"].get_tokenizer()).__name__,
          state.get("sampling"))  # fmt: skip
    check_sample_options(run, state.get("sampling"))

    rest = service.create_rest_client()
    run_id = types.ParsedCheckpointTinkerPath.from_tinker_path(state["state"]).training_run_id

    def runs() -> str:
        listed = rest.list_training_runs(limit=100).result().training_runs
        assert run_id in [r.training_run_id for r in listed]
        return f"{len(listed)} runs"

    check("RestClient.list_training_runs", runs, rest)
    check("RestClient.get_training_run",
          lambda: rest.get_training_run(run_id).result().base_model, rest)  # fmt: skip
    check("RestClient.get_training_run_by_tinker_path",
          lambda: rest.get_training_run_by_tinker_path(state["state"]).result().training_run_id,
          rest)  # fmt: skip
    check("RestClient.get_weights_info_by_tinker_path",
          lambda: str(rest.get_weights_info_by_tinker_path(state["state"]).result().lora_rank),
          rest)  # fmt: skip

    def checkpoints() -> str:
        listed = rest.list_checkpoints(run_id).result().checkpoints
        mine = next(c for c in listed if c.tinker_path == state["state"])
        assert mine.expires_at is not None  # saved with a TTL
        return f"{len(listed)} checkpoints"

    check("RestClient.list_checkpoints", checkpoints, rest)
    check("RestClient.list_user_checkpoints",
          lambda: f"{len(rest.list_user_checkpoints().result().checkpoints)} checkpoints",
          rest)  # fmt: skip
    check("RestClient.set_checkpoint_ttl_from_tinker_path",
          lambda: str(rest.set_checkpoint_ttl_from_tinker_path(state["state"], None).result()),
          rest)  # fmt: skip
    check("RestClient.get_server_capabilities",
          lambda: str(len(rest.get_server_capabilities().result().supported_models)),
          rest)  # fmt: skip

    def public(path: str) -> bool:
        run = types.ParsedCheckpointTinkerPath.from_tinker_path(path).training_run_id
        (found,) = [
            c for c in rest.list_checkpoints(run).result().checkpoints if c.tinker_path == path
        ]
        return bool(found.public)

    def publish() -> str:
        rest.publish_checkpoint_from_tinker_path(state["sampler"]).result()
        assert public(state["sampler"]), "not listed as public"
        return "listed as public"

    def unpublish() -> str:
        rest.unpublish_checkpoint_from_tinker_path(state["sampler"]).result()
        assert not public(state["sampler"]), "still listed as public"
        return "listed as private"

    check("RestClient.publish_checkpoint_from_tinker_path", publish, rest)
    check("RestClient.unpublish_checkpoint_from_tinker_path", unpublish, rest)

    def external_links() -> str:
        links = rest.get_external_weights_urls(state["external"]).result().urls
        read = httpx.get(links["config.json"])  # a signed link: no API key
        read.raise_for_status()
        assert "model_type" in read.json(), "config.json is not a model config"
        return f"{len(links)} links, config.json read"

    check("RestClient.get_external_weights_urls", external_links, rest)
    check("RestClient.delete_checkpoint_from_tinker_path",
          lambda: str(rest.delete_checkpoint_from_tinker_path(state["sampler"]).result()),
          rest)  # fmt: skip

    def deleted() -> str:
        rest.delete_checkpoint(run_id, "weights/conformance").result()
        paths = [c.tinker_path for c in rest.list_checkpoints(run_id).result().checkpoints]
        assert state["state"] not in paths and state["sampler"] not in paths, paths
        return "gone from the listing"

    check("RestClient.delete_checkpoint", deleted, rest)

    def close() -> str:
        closing = service.close("success")
        if hasattr(closing, "result"):
            closing.result()
        return "closed"

    check("ServiceClient.close", close, service)

    print(run.table())
    if args.markdown:
        args.markdown.write_text(run.table() + "\n")
    failed = sum(r == "FAILED" for _, r, _ in run.rows)
    print(f"{len(run.rows) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
