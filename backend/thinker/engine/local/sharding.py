"""Sharded data parallelism for a base model too large for one device: PyTorch's FSDP2
(`fully_shard`) over the ranks of a data-parallel run (data_parallel.py).

Each decoder layer becomes one FSDP unit: a rank keeps 1/N of the layer's weights (the frozen
base weights and its LoRA tensors alike) and gathers the whole layer just before its forward
and backward pass, and the layer's LoRA gradients are reduce-scattered after its backward, so
each rank ends the call holding its 1/N of the summed gradient, and takes the AdamW step on its
1/N. What lies outside the layers (the embedding, the final norm, the output layer and its
adapter, a few percent of a large model) stays whole on every rank, as in plain data
parallelism, and its adapter's gradient is summed over the ranks at the step. The batch is
shared out as in data parallelism (datum i on rank i % N), so losses, logprobs and gradients
are those of one process on the whole batch.

Loading: every rank builds the model's modules with their weights on the meta device (no
memory), shards them and allocates its shards on its device. Rank 0 alone builds the whole
model with its adapter (a built-in's seeded random weights, or `from_pretrained`), on its
device where it has room for it twice (a built-in then has the weights it has on one GPU),
else in host memory, and every rank receives its shards from it
(`torch.distributed.checkpoint.state_dict.set_model_state_dict` with `broadcast_from_rank0`).
A built-in too large for that (the 70B shape) is drawn at random on each rank instead, its
shards in place: drawing 70 billion numbers on the host would take minutes.

Every rank must run the same sequence of layer passes, since each gathers from all ranks: the
training client gives a rank with fewer datums (or none) empty passes (training.py), and the
ranks agree on the passes' count and gradient checkpointing. Sampling and scoring (RL, DPO's
reference) run their passes in lockstep over the ranks (data_parallel.Lockstep), eagerly, the
adapter unmerged. Not sharded (yet): compiled layers (the layers run eagerly, with the other
fast-path kernels), 4-bit bases, more than one adapter on a model.

`THINKER_SHARDING` chooses: `auto` (default) shards a data-parallel run's model when its
weights take more than SHARD_FRACTION of one GPU's memory, `fsdp` always (on the CPU too, over
gloo: the tests), `off` never.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Sequence
from typing import Any, cast

import torch
import torch.distributed as dist
from peft import PeftModel
from torch import Tensor
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor
from transformers import PretrainedConfig, PreTrainedModel

from thinker.engine.local import memory
from thinker.engine.local.data_parallel import Group
from thinker.engine.local.models import (
    BUILTIN_PREFIX,
    BUILTIN_SEED,
    Placement,
    attach_lora,
    load_base_model,
    lora_target_modules,
    prepare,
    skeleton,
)
from thinker.errors import ConfigError

SHARD_FRACTION = 0.6  # of one GPU's memory: base weights past it leave too little to train in
SHARDED_ATTR = "thinker_sharded"  # on a sharded model: its decoder layers (FSDP units)
MODES = ("auto", "fsdp", "off")
GiB = 2**30


def mode() -> str:
    chosen = os.environ.get("THINKER_SHARDING", "auto")
    if chosen not in MODES:
        raise ConfigError(f"THINKER_SHARDING must be one of {', '.join(MODES)}, got {chosen!r}")
    return chosen


def decide(base_model: str, placement: Placement, group: Group | None) -> str | None:
    """Why `base_model` is to be sharded over `group`'s ranks, or None when it is not."""
    chosen = mode()
    if group is None or chosen == "off":
        return None
    if placement.quantization is not None:
        if chosen == "fsdp":
            raise ConfigError("THINKER_SHARDING=fsdp: a 4-bit base model cannot be sharded")
        return None
    if chosen == "fsdp":
        return "THINKER_SHARDING=fsdp"
    if placement.device.type != "cuda":
        return None
    weights = weight_bytes(skeleton(base_model, placement.dtype))
    card = torch.cuda.get_device_properties(placement.device).total_memory
    if weights <= SHARD_FRACTION * card:
        return None
    return (
        f"its weights take {weights / GiB:.1f} GiB, more than {SHARD_FRACTION:.0%} of one "
        f"GPU's {card / GiB:.1f} GiB (THINKER_SHARDING=auto)"
    )


def weight_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def load(  # noqa: PLR0913
    base_model: str,
    placement: Placement,
    group: Group,
    rank: int,
    seed: int | None,
    flags: tuple[bool, bool, bool],
    why: str,
) -> PeftModel:
    """`base_model` with a fresh adapter (`rank`, `seed`; `flags`: train_attn, train_mlp,
    train_unembed), its decoder layers sharded over `group`'s ranks on `placement`."""
    device = placement.device
    shell = prepare(skeleton(base_model, placement.dtype), placement, compile=False)
    weights = weight_bytes(shell)
    # Where rank 0 can hold the whole model: its device if it has room for it twice, else
    # the host; a built-in too large for the device draws each rank's shards there instead.
    room = group.min(memory.free_memory(device)) >= 2 * weights
    drawn = base_model.startswith(BUILTIN_PREFIX) and not room
    source: PeftModel | None = None
    if group.rank == 0 and not drawn:
        where = device if room else torch.device("cpu")
        whole = load_base_model(base_model, Placement(where, placement.dtype))
        source = attach_lora(whole, rank, seed, lora_target_modules(whole, *flags))
    model = attach_lora(shell, rank, seed, lora_target_modules(shell, *flags), device=device)
    layers = decoder_layers(model)
    mesh = init_device_mesh(device.type, (group.world,))
    for layer in layers:
        fully_shard(layer, mesh=mesh)
    # The decoder (the layers' parent, which forward.py calls) as the root unit that runs them
    # all, its own weights (the embedding, the final norm) left whole: the output layer, run
    # apart from the decoder, may share the embedding's weight.
    root = decoder(model)
    inside = {id(p) for layer in layers for p in layer.parameters()}
    own = {p for p in root.parameters() if id(p) not in inside}
    fully_shard(root, mesh=mesh, ignored_params=own)
    units = [cast(FSDPModule, layer) for layer in layers]
    for before, after in zip(units, units[1:], strict=False):  # gather the next layer early
        before.set_modules_to_forward_prefetch([after])
        after.set_modules_to_backward_prefetch([before])
    buffers = {name: b.to(device) for name, b in model.named_buffers()}  # from the config
    model.to_empty(device=device)
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            buffer.copy_(buffers[name])
    if drawn:
        _draw(model, shell.config, group)
    else:
        full = source.state_dict() if source is not None else {}
        options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
        set_model_state_dict(model, full, options=options)
        del full
    del source
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    setattr(model, SHARDED_ATTR, layers)
    print(
        f"[thinker] sharded (FSDP2) over {group.world} ranks because {why}: each rank holds "
        f"1/{group.world} of the {len(layers)} decoder layers' weights and gathers one layer at "
        f"a time; {weights / GiB:.1f} GiB of base weights in all"
        + (", drawn at random on each rank (a built-in too large to build whole)" if drawn else ""),
        flush=True,
    )
    return model


def _draw(model: PeftModel, config: PretrainedConfig, group: Group) -> None:
    """A built-in's random weights drawn where they live, as transformers draws them (normal,
    std `initializer_range`; norms 1) and the adapter as PEFT does (A uniform in
    +-1/sqrt(fan-in), B 0): whole tensors alike on every rank, each rank's shards its own."""
    std = float(getattr(config, "initializer_range", 0.02))
    device = group.device
    alike = torch.Generator(device).manual_seed(BUILTIN_SEED)
    own = torch.Generator(device).manual_seed(BUILTIN_SEED + 1 + group.rank)
    with torch.no_grad():
        for name, p in model.named_parameters():
            sharded = isinstance(p, DTensor)
            local = p.to_local() if isinstance(p, DTensor) else p
            gen = own if sharded else alike
            if "lora_B" in name:
                local.zero_()
            elif "lora_A" in name:
                bound = p.shape[1] ** -0.5
                local.uniform_(-bound, bound, generator=gen)
            elif p.dim() == 1:  # norms' weights
                local.fill_(1.0)
            else:
                local.normal_(0.0, std, generator=gen)


def decoder_layers(model: PreTrainedModel | PeftModel) -> list[torch.nn.Module]:
    """The model's repeated blocks: the modules transformers never splits across devices
    (`_no_split_modules`, such as LlamaDecoderLayer)."""
    base = model.get_base_model() if isinstance(model, PeftModel) else model
    names = set(getattr(base, "_no_split_modules", None) or [])
    layers = [m for m in base.modules() if type(m).__name__ in names]
    if not layers:
        raise ConfigError(f"{type(base).__name__} names no decoder layer class to shard by")
    return layers


def is_sharded(model: torch.nn.Module) -> bool:
    return getattr(model, SHARDED_ATTR, None) is not None


def decoder(model: PeftModel) -> torch.nn.Module:
    """The layers' parent (the root FSDP unit), which every forward pass runs."""
    root: torch.nn.Module = cast(PreTrainedModel, model.get_base_model()).get_decoder()
    return root


def sharded_layer_bytes(model: torch.nn.Module) -> int:
    """Device memory a pass needs beyond the shards: two whole layers gathered at once (the
    one running and the next, prefetched) and the gradient of one for its reduce-scatter."""
    layers: list[torch.nn.Module] = getattr(model, SHARDED_ATTR)
    layer = max(weight_bytes(m) for m in layers)
    return 3 * layer


def finish_gradients(params: Sequence[torch.nn.Parameter], group: Group) -> None:
    """The batch's gradient in every parameter: FSDP's reduce-scatter averaged the sharded
    ones over the ranks (the losses are sums: times the ranks' count again), and the whole
    ones (outside the layers) are summed here."""
    whole = []
    for p in params:
        if not isinstance(p, DTensor):
            whole.append(p)
        elif p.grad is not None:
            p.grad.mul_(group.world)
    if whole:
        group.sum_gradients(whole)


def total_norm(tensors: Iterable[Tensor], group: Group) -> Tensor:
    """The 2-norm of all of `tensors` together, sharded ones (DTensor) and whole ones alike:
    each rank adds the squares of its shards, the ranks' sums are added, and the whole
    tensors (the same on every rank) count once."""
    sharded = torch.zeros((), dtype=torch.float64, device=group.device)
    whole = torch.zeros((), dtype=torch.float64, device=group.device)
    for t in tensors:
        if isinstance(t, DTensor):
            sharded += t.to_local().double().square().sum().to(group.device)
        else:
            whole += t.double().square().sum().to(group.device)
    dist.all_reduce(sharded)
    return (sharded + whole).sqrt()


def clip_gradients(params: Sequence[torch.nn.Parameter], max_norm: float, group: Group) -> float:
    """`torch.nn.utils.clip_grad_norm_` for sharded and whole parameters together: the total
    norm before clipping."""
    grads = [p.grad for p in params if p.grad is not None]
    norm = float(total_norm(grads, group))
    scale = max_norm / (norm + 1e-6)
    if scale < 1.0:
        for g in grads:
            g.mul_(scale)
    return norm


def full(tensor: Tensor) -> Tensor:
    """A sharded tensor's whole value on every rank (a collective: every rank calls it, in the
    same order); a whole tensor as it is."""
    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def like(value: Tensor, param: Tensor) -> Tensor:
    """`value` (a whole tensor, the same on every rank) sharded as `param` is, when it is."""
    if not isinstance(param, DTensor):
        return value
    return distribute_tensor(
        value.to(param.device_mesh.device_type), param.device_mesh, param.placements,
        src_data_rank=None,  # every rank has the value: no rank sends it
    )  # fmt: skip


def full_optimizer_state(state: dict[str, Any]) -> dict[str, Any]:
    """An optimizer's `state_dict()` with its sharded moments whole, as one process's are (a
    checkpoint that resumes on any number of ranks)."""
    # New dicts: `state_dict()`'s per-parameter dicts are the optimizer's own.
    moments = {
        index: {k: full(v).cpu() if isinstance(v, Tensor) else v for k, v in values.items()}
        for index, values in state["state"].items()
    }
    return {**state, "state": moments}


def shard_optimizer_state(
    state: dict[str, Any], params: Sequence[torch.nn.Parameter]
) -> dict[str, Any]:
    """A whole optimizer state (`full_optimizer_state`'s, or one process's) sharded as the
    parameters it belongs to are."""
    moments = {
        index: {
            k: like(v, params[int(index)]) if isinstance(v, Tensor) and v.dim() > 0 else v
            for k, v in values.items()
        }
        for index, values in state["state"].items()
    }
    return {**state, "state": moments}
