"""What a base model is, read from its config alone (no weights): a built-in, a directory on
this machine, or a Hugging Face hub id (from the local cache, or fetched: config.json only).

Jobs check their base model with `inspect_model` when they are created, so a model that
cannot be had (offline and not cached, not on the hub, gated, a directory without a config)
is refused with the reason at once, instead of failing inside the worker minutes later.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tinker import types
from transformers import AutoConfig, PretrainedConfig

from thinker.engine.local.models import BUILTIN_CONFIGS, BUILTIN_PREFIX, trust_remote_code
from thinker.errors import ConfigError


@dataclass(frozen=True)
class ModelFacts:
    """What the hyperparameter proposal and the job check need to know of a base model."""

    name: str
    source: str  # builtin | directory | hub
    from_scratch: bool  # random weights (the built-ins): it knows nothing yet
    model_type: str  # llama, qwen3, ... (config.model_type)
    hidden_size: int
    num_parameters: int | None  # estimated from the config; None if it cannot be


def inspect_model(name: str) -> ModelFacts:
    """Read `name`'s config and say what the model is.

    Raises:
        ConfigError: The model cannot be had, with the reason and what to do.
    """
    if name.startswith(BUILTIN_PREFIX):
        if name not in BUILTIN_CONFIGS:
            raise ConfigError(
                f"unknown built-in model {name!r}; built-ins: {', '.join(sorted(BUILTIN_CONFIGS))}"
            )
        return _facts(name, "builtin", BUILTIN_CONFIGS[name]())
    path = Path(name).expanduser()
    if path.is_absolute() or name.startswith((".", "~")):
        return _facts(name, "directory", _directory_config(path))
    return _facts(name, "hub", _hub_config(name))


def capabilities() -> types.GetServerCapabilitiesResponse:
    """The base models the local engine can load without the network, as the tinker SDK's
    `get_server_capabilities` answers: the built-ins and the models in the local Hugging Face
    cache (a hub id or a directory works too), each with its context length."""
    models = []
    for name in [*sorted(BUILTIN_CONFIGS), *cached_hub_models()]:
        try:
            context = inspect_context(name)
        except ConfigError:  # a cache entry that cannot be read: not offered
            continue
        models.append(
            types.SupportedModel(
                model_name=name, max_context_length=context, trainable=True, sampleable=True
            )
        )
    return types.GetServerCapabilitiesResponse(supported_models=models)


def inspect_context(name: str) -> int | None:
    """`name`'s longest context (its config's max_position_embeddings), where it says."""
    if name.startswith(BUILTIN_PREFIX):
        config = BUILTIN_CONFIGS[name]()
    else:
        path = Path(name).expanduser()
        is_dir = path.is_absolute() or name.startswith((".", "~"))
        config = _directory_config(path) if is_dir else _hub_config(name)
    context = getattr(config, "max_position_embeddings", None)
    return int(context) if context else None


def cached_hub_models() -> list[str]:
    """Hub models in the local Hugging Face cache that have a config.json."""
    try:
        from huggingface_hub import scan_cache_dir  # deferred: only the model list needs it

        info = scan_cache_dir()
    except Exception:  # noqa: BLE001 - no cache directory yet, or one we cannot read
        return []
    found = []
    for repo in info.repos:
        if repo.repo_type != "model":
            continue
        files = {f.file_name for rev in repo.revisions for f in rev.files}
        if "config.json" in files:
            found.append(repo.repo_id)
    return sorted(found)


def _directory_config(path: Path) -> PretrainedConfig:
    if not path.is_dir():
        raise ConfigError(f"base_model: no directory {str(path)!r} on the server")
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"base_model: {str(path)!r} has no config.json; give a directory written by "
            "transformers' save_pretrained (config.json, tokenizer files, *.safetensors)"
        )
    try:
        config: PretrainedConfig = AutoConfig.from_pretrained(
            str(path), trust_remote_code=trust_remote_code()
        )
    except (OSError, ValueError) as e:
        raise ConfigError(f"base_model: cannot read the config in {str(path)!r}: {e}") from e
    return config


def _hub_config(name: str) -> PretrainedConfig:
    # Deferred: the hub client's errors, only when a hub id is looked up.
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
    )

    try:
        config: PretrainedConfig = AutoConfig.from_pretrained(
            name, trust_remote_code=trust_remote_code()
        )
    except GatedRepoError:
        raise ConfigError(
            f"base_model: {name!r} is gated on the Hugging Face hub: accept its licence on its "
            "page, then set HF_TOKEN for the server (it is never stored in a job)"
        ) from None
    except RepositoryNotFoundError:
        raise ConfigError(
            f"base_model: no model {name!r} on the Hugging Face hub (check the spelling, "
            "owner/name; a private model needs HF_TOKEN), nor a built-in or a directory"
        ) from None
    except (OfflineModeIsEnabled, LocalEntryNotFoundError) as e:
        raise ConfigError(_unreachable(name, e)) from None
    except OSError as e:  # transformers wraps most hub failures in OSError
        raise ConfigError(_unreachable(name, e)) from None
    except ValueError as e:  # an architecture this transformers does not know
        raise ConfigError(f"base_model: {name!r}: {e}") from None
    return config


def _unreachable(name: str, error: BaseException) -> str:
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return (
            f"base_model: {name!r} is not in the local Hugging Face cache and the server runs "
            "offline (HF_HUB_OFFLINE=1): start it without HF_HUB_OFFLINE to download the "
            "model, or give a directory on the server that holds it"
        )
    first = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
    return (
        f"base_model: cannot fetch {name!r} from the Hugging Face hub ({first}); check the "
        "name and the server's network, or give a directory on the server that holds it"
    )


def _facts(name: str, source: str, config: PretrainedConfig) -> ModelFacts:
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    hidden = int(getattr(text, "hidden_size", 0) or getattr(text, "n_embd", 0) or 0)
    return ModelFacts(
        name=name,
        source=source,
        from_scratch=source == "builtin",
        model_type=str(getattr(config, "model_type", "") or ""),
        hidden_size=hidden,
        num_parameters=_parameters(text, hidden),
    )


def _parameters(config: PretrainedConfig, hidden: int) -> int | None:
    """A decoder's parameter count from its config: embeddings + per layer attention + MLP."""
    layers = getattr(config, "num_hidden_layers", None)
    vocab = getattr(config, "vocab_size", None)
    if not (hidden and layers and vocab):
        return None
    heads = getattr(config, "num_attention_heads", None) or 1
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    kv = (getattr(config, "num_key_value_heads", None) or heads) * head_dim
    inter = getattr(config, "intermediate_size", None) or 4 * hidden
    attention = hidden * heads * head_dim * 2 + hidden * kv * 2
    per_layer = attention + 3 * hidden * inter
    tied = getattr(config, "tie_word_embeddings", False)
    return int(vocab * hidden * (1 if tied else 2) + layers * per_layer)
