"""Loading base models and tokenizers for the local engine, and attaching LoRA adapters.

Besides any hub id or local directory, a few built-in models need no files at all:
`thinker/tiny` (a 2-layer Llama-style model with a byte-level tokenizer, initialised from a
fixed seed, for tests and the offline default) and random-initialised models of real shapes
(`thinker/random-qwen3-0.6b`, `thinker/random-llama3.1-8b`, `thinker/random-llama3.1-70b`)
for GPU benchmarks (the 70B shape, 141 GB in bf16, trains sharded over several GPUs).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FunctionType, MethodType
from typing import Any, Literal

import torch
from accelerate import init_empty_weights
from peft import LoraConfig, PeftModel, get_peft_model
from peft.tuners.lora import LoraLayer
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    ByT5Tokenizer,
    LlamaConfig,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen3Config,
)

from thinker.engine.local import attention, fast
from thinker.errors import BackendError, ConfigError

Quantization = Literal["4bit"] | None
BUILTIN_PREFIX = "thinker/"
BUILTIN_SEED = 0
LORA_ALPHA = 32  # fixed, so the adapter scale is alpha / rank (1.0 at the default rank 32)

ATTN_MODULES = {
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "qkv_proj",
    "query_key_value",
    "c_attn",
    "Wqkv",
    "out_proj",
}
MLP_MODULES = {
    "gate_proj",
    "up_proj",
    "down_proj",
    "gate_up_proj",
    "fc1",
    "fc2",
    "c_fc",
    "dense_h_to_4h",
    "dense_4h_to_h",
    "w1",
    "w2",
    "w3",
}


def _tiny_config() -> PretrainedConfig:
    return LlamaConfig(
        vocab_size=384,  # ByT5Tokenizer: 3 specials + 256 bytes + 125 extra ids
        hidden_size=64,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=1024,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
        tie_word_embeddings=False,
    )


def _qwen3_06b_config() -> PretrainedConfig:
    # rope_theta is a field in transformers 4.x; 5.x still takes it (folded into
    # rope_parameters) but no longer declares it, so only the type checker objects.
    return Qwen3Config(  # type: ignore[call-arg]
        vocab_size=151936,
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=40960,
        rms_norm_eps=1e-6,
        rope_theta=1_000_000,
        tie_word_embeddings=True,
        eos_token_id=151645,
        pad_token_id=151643,
        bos_token_id=None,
    )


def _llama31_config(hidden: int, intermediate: int, layers: int, heads: int) -> PretrainedConfig:
    """Llama 3.1's shape at a size (8 key-value heads, its vocabulary, RoPE and special ids)."""
    # rope_theta: as in _qwen3_06b_config.
    return LlamaConfig(  # type: ignore[call-arg]
        vocab_size=128256,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=8,
        max_position_embeddings=131072,
        rms_norm_eps=1e-5,
        rope_theta=500_000,
        tie_word_embeddings=False,
        eos_token_id=128009,
        pad_token_id=128004,
        bos_token_id=128000,
    )


def _llama31_8b_config() -> PretrainedConfig:
    return _llama31_config(hidden=4096, intermediate=14336, layers=32, heads=32)


def _llama31_70b_config() -> PretrainedConfig:
    return _llama31_config(hidden=8192, intermediate=28672, layers=80, heads=64)


BUILTIN_CONFIGS: dict[str, Callable[[], PretrainedConfig]] = {
    "thinker/tiny": _tiny_config,
    "thinker/random-qwen3-0.6b": _qwen3_06b_config,
    "thinker/random-llama3.1-8b": _llama31_8b_config,
    "thinker/random-llama3.1-70b": _llama31_70b_config,
}


@dataclass(frozen=True)
class Placement:
    """Where and how a model lives: device, dtype, quantization."""

    device: torch.device
    dtype: torch.dtype
    quantization: Quantization = None

    @classmethod
    def choose(cls, device: str | None, quantization: Quantization) -> Placement:
        cuda = torch.cuda.is_available()
        if quantization not in (None, "4bit"):
            raise ConfigError(f"quantization must be None or '4bit', got {quantization!r}")
        if quantization == "4bit" and not cuda:
            raise BackendError(
                "4-bit QLoRA needs a CUDA GPU (bitsandbytes 4-bit kernels); this machine has "
                "none. Drop quantization='4bit' to train in full precision on the CPU."
            )
        if device is None:
            device = "cuda" if cuda else "cpu"
        if device.startswith("cuda") and not cuda:
            raise BackendError(f"device {device!r} asked for, but CUDA is not available here")
        dev = torch.device(device)
        if dev.type == "cuda" and dev.index is None:
            # The GPU current now (a data-parallel rank's, set before the engine starts),
            # fixed: the engine's worker threads start on GPU 0 otherwise (on_thread_start).
            dev = torch.device("cuda", torch.cuda.current_device())
        return cls(dev, torch.bfloat16 if dev.type == "cuda" else torch.float32, quantization)


def on_thread_start(device: torch.device) -> Callable[[], None] | None:
    """What an engine worker thread runs first: make `device` its current GPU. CUDA's current
    device is per thread and a new thread's is GPU 0, so on the rank of GPU 1 a worker thread
    would otherwise launch its kernels, capture its CUDA graphs and read free memory on GPU 0."""
    if device.type != "cuda":
        return None
    # "cuda" without an index is the current device of the thread that made the client
    index = device.index if device.index is not None else torch.cuda.current_device()
    return lambda: torch.cuda.set_device(index)


class BuiltinTokenizer(ByT5Tokenizer):
    """The built-in models' byte-level tokenizer (ByT5's: 3 specials, 256 bytes, 125 extra
    ids). The random models of real shapes keep their real vocabulary (151,936 or 128,256
    ids) with no real tokenizer behind it, so their samples hold ids past its 384; such an id
    decodes as the byte it indexes modulo 256, so that a random model's completions are text
    (a reward can score them, the playground can show them) instead of a ValueError."""

    def _convert_id_to_token(self, index: int) -> str:
        return chr((index - self.offset) % self._utf_vocab_size)


# Saved (a merged export's tokenizer) under ByT5's name, so that any transformers loads it back.
BuiltinTokenizer.__name__ = "ByT5Tokenizer"


def load_tokenizer(base_model: str) -> PreTrainedTokenizerBase:
    if base_model.startswith(BUILTIN_PREFIX):
        _check_builtin(base_model)
        return BuiltinTokenizer()
    try:
        return AutoTokenizer.from_pretrained(base_model, trust_remote_code=trust_remote_code())
    except OSError as e:
        raise BackendError(f"cannot load the tokenizer of {base_model!r}: {e}") from e


def load_base_model(base_model: str, placement: Placement) -> PreTrainedModel:
    """The base model's weights on `placement`, in eval mode with every weight frozen."""
    if base_model.startswith(BUILTIN_PREFIX):
        model = _build_builtin(base_model, placement)
    else:
        model = _from_pretrained(base_model, placement)
    return prepare(model, placement)


def prepare(model: PreTrainedModel, placement: Placement, compile: bool = True) -> PreTrainedModel:
    """The fast path's changes for `placement` (attention, fused kernels, compiled layers
    unless `compile` is off), eval mode, every weight frozen; the weights may still be on the
    meta device (sharding.py fills them in later)."""
    device = placement.device
    flat_rows = fast.enabled("PACKING", device) and attention.use_varlen(model, device)
    if not flat_rows and attention.eligible(model):
        attention.install(model)  # for the shared-prompt decode's hook (prefix.py)
    if fast.enabled("FUSED_KERNELS", device):
        _apply_fused_kernels(model)
    if compile and fast.enabled("COMPILE", device) and placement.quantization is None:
        compile_layers(model)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def skeleton(base_model: str, dtype: torch.dtype) -> PreTrainedModel:
    """The base model's modules with every weight on the meta device (no memory, no values),
    its buffers (computed from the config, such as the rotary embedding's frequencies) on the
    host: its shape, for sizing it and for a sharded model to fill in (sharding.py)."""
    if base_model.startswith(BUILTIN_PREFIX):
        _check_builtin(base_model)
        config = BUILTIN_CONFIGS[base_model]()
    else:
        try:
            config = AutoConfig.from_pretrained(base_model, trust_remote_code=trust_remote_code())
        except OSError as e:
            raise BackendError(f"cannot load the config of {base_model!r}: {e}") from e
    with init_empty_weights(include_buffers=False):
        model: PreTrainedModel = AutoModelForCausalLM.from_config(
            config, dtype=dtype, trust_remote_code=trust_remote_code()
        )
    return model


# Variants a layer is compiled for: grad on/off, padding mask or packed position ids or
# neither, adapter on/off, batch of one (specialised) or more. Beyond the limit dynamo would
# quietly run the layer eagerly.
RECOMPILE_LIMIT = 64
COMPILED_ATTR = "thinker_compiled_layers"  # set on a model whose decoder layers are compiled


def compile_layers(model: PreTrainedModel) -> None:
    """Compile each decoder layer's forward (and through AOTAutograd its backward) with
    dynamic shapes, so sequence lengths and batch sizes do not recompile. All layers share one
    compiled graph per variant (parameters are graph inputs). Compiles lazily on the first
    forward (tens of seconds), then is reused; adapter layers attached later are traced in.
    Inside `fast.eager()` (sampling) the layers run their eager code.

    On CUDA the compiled code launches its kernels from C++ (Inductor's `cpp_wrapper`): a
    Qwen3-0.6B step at 8 x 1024 tokens launches about 4,000 kernels, mostly small LoRA
    matmuls, and from Python's wrapper its backward spent ~3 ms of host time per layer for
    ~2 ms of GPU work (H100 profile), so the GPU waited; the C++ wrapper costs ~15 s more
    compile time in the first step. Flat packed rows keep the Python wrapper: the C++ one
    cannot call the varlen attention op (an `int[]` argument, torch 2.11); so do passes that
    could run out of memory (see CPP_WRAPPER_MAX_TOKENS)."""
    layers = getattr(model.get_decoder(), "layers", None)
    if not isinstance(layers, torch.nn.ModuleList):
        return
    import torch._dynamo.config as dynamo_config  # deferred: loads dynamo, CUDA only

    dynamo_config.recompile_limit = max(dynamo_config.recompile_limit, RECOMPILE_LIMIT)
    dynamo_config.accumulated_recompile_limit = max(
        dynamo_config.accumulated_recompile_limit, 4 * RECOMPILE_LIMIT
    )
    # With dynamic shapes dynamo passes each Python float a layer reads (the LoRA scaling of
    # each adapted projection) as a 0-d float64 CPU tensor, which Inductor converts in a C++
    # kernel on every call: 7 CPU kernels a layer. Floats burned in as constants instead (an
    # adapter with another scaling compiles its own variant).
    dynamo_config.specialize_float = True
    on_cuda = next(model.parameters()).device.type == "cuda"
    if on_cuda:
        _skip_vector_isa_probe()
    for layer in layers:
        eager_forward = layer.forward
        compiled = torch.compile(eager_forward, dynamic=True)
        launched_from_cpp = (
            torch.compile(eager_forward, dynamic=True, options={"cpp_wrapper": True})
            if on_cuda
            else compiled
        )
        layer.forward = _compiled_unless_eager(
            compiled, launched_from_cpp, eager_forward, lambda: getattr(model, ROOMY_ATTR, False)
        )
    setattr(model, COMPILED_ATTR, True)


def _skip_vector_isa_probe() -> None:
    """Tell Inductor not to probe the host compiler's vector instructions.

    A CPU node in a decoder layer's graph (each LoRA scaling was one, before floats were
    specialised) is written as C++. Before Inductor writes or loads the first one, it finds the
    widest vector instructions the compiler can build by compiling test programs, once per
    process: 51 s of a job's first step with a warm compile cache and 64 s with a cold one on
    an H100 machine (py-spy, 2026-11-27). Such nodes are scalars, so scalar C++ costs nothing.
    A setting of the server's environment (TORCHINDUCTOR_VEC_ISA_OK) is left as it is.
    """
    import torch._inductor.config as inductor_config  # deferred: loads Inductor, CUDA only

    if inductor_config.cpp.vec_isa_ok is None:
        inductor_config.cpp.vec_isa_ok = False


# An out-of-memory error inside the C++ wrapper kills the process (a segmentation fault, torch
# 2.11) where the Python wrapper raises torch.OutOfMemoryError, which the engine recovers from.
# So the C++ wrapper runs only passes that cannot run out of memory: the training client marks
# a pass roomy (ROOMY_ATTR on the model) when it holds at most half the tokens its memory
# budget allows and the device never ran out; and no pass of more than this many tokens, which
# keeps the GPU busy from Python as well.
CPP_WRAPPER_MAX_TOKENS = 8192
ROOMY_ATTR = "thinker_roomy_pass"


def _compiled_unless_eager(
    compiled: Callable[..., Any],
    launched_from_cpp: Callable[..., Any],
    eager: Callable[..., Any],
    roomy: Callable[[], bool] = lambda: True,
) -> Callable[..., Any]:
    def forward(*args: Any, **kwargs: Any) -> Any:
        if fast.running_eager():
            return eager(*args, **kwargs)
        if (
            attention.FLAT_ROW_KWARG in kwargs
            or _tokens(args, kwargs) > CPP_WRAPPER_MAX_TOKENS
            or not roomy()
        ):
            return compiled(*args, **kwargs)
        return launched_from_cpp(*args, **kwargs)

    return forward


def _tokens(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """Tokens in a decoder layer's call: its hidden states are (batch, tokens, hidden)."""
    hidden = args[0] if args else kwargs.get("hidden_states")
    return hidden.shape[0] * hidden.shape[1] if isinstance(hidden, torch.Tensor) else 0


def _apply_fused_kernels(model: PreTrainedModel) -> bool:
    """On CUDA, Liger's Triton kernels for RMSNorm, RoPE and SwiGLU (less activation memory,
    fewer launches) for the code that runs eagerly: sampling's prefill and CUDA-graph decode,
    and training when layers are not compiled. Compiled layers trace the model's own code
    instead (dynamo cannot trace Liger's kernels, and Inductor fuses the same operations).
    Skipped where liger-kernel is not installed (`pip install -e ".[gpu]"`). The output layer
    is forward.py's (Liger's fused linear cross-entropy per token, when training)."""
    try:
        from liger_kernel.transformers.monkey_patch import _apply_liger_kernel_to_instance
    except ImportError:
        return False
    modeling = sys.modules[type(model).__module__]
    before = dict(vars(modeling))
    _apply_liger_kernel_to_instance(
        model=model,
        rope=True,
        rms_norm=True,
        swiglu=True,
        cross_entropy=False,
        fused_linear_cross_entropy=False,
    )
    # Liger also patches the modeling module (classes for models built later, and the rotary
    # function every layer calls): put the classes back, make the function choose by context.
    for name, value in list(vars(modeling).items()):
        original = before.get(name)
        if original is None or value is original:
            continue
        fused = isinstance(value, FunctionType) and isinstance(original, FunctionType)
        setattr(modeling, name, _eager_only(value, original) if fused else original)
    for module in model.modules():
        liger = module.__dict__.get("forward")  # Liger binds its forward on the instance
        if liger is not None:
            module.forward = _eager_only(liger, MethodType(type(module).forward, module))
    return True


def _eager_only(fused: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    """`fused` when run eagerly, `original` when dynamo traces (torch.compile)."""
    original = getattr(original, "thinker_original", original)  # a second model: unwrap

    def either(*args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():
            return original(*args, **kwargs)
        return fused(*args, **kwargs)

    # A function attribute, which mypy has no type for.
    either.thinker_original = original  # type: ignore[attr-defined]
    return either


def _check_builtin(name: str) -> None:
    if name not in BUILTIN_CONFIGS:
        raise ConfigError(f"unknown built-in model {name!r}; built-ins: {sorted(BUILTIN_CONFIGS)}")


def _build_builtin(name: str, placement: Placement) -> PreTrainedModel:
    _check_builtin(name)
    config = BUILTIN_CONFIGS[name]()
    if placement.quantization is not None:
        # bitsandbytes quantizes while loading: write the random weights once, then load them.
        with tempfile.TemporaryDirectory() as tmp:
            _random_model(config, Placement(placement.device, placement.dtype)).save_pretrained(tmp)
            return _from_pretrained(tmp, placement)
    return _random_model(config, placement)


def _random_model(config: PretrainedConfig, placement: Placement) -> PreTrainedModel:
    devices = [torch.cuda.current_device()] if placement.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), torch.device(placement.device):
        torch.manual_seed(BUILTIN_SEED)
        model: PreTrainedModel = AutoModelForCausalLM.from_config(config, dtype=placement.dtype)
    return model


def trust_remote_code() -> bool:
    """Whether a model's own Python code may run: off unless THINKER_TRUST_REMOTE_CODE=1."""
    return os.environ.get("THINKER_TRUST_REMOTE_CODE", "") == "1"


def _from_pretrained(name: str, placement: Placement) -> PreTrainedModel:
    # Weights only from safetensors (a pickle can run code), and no model code unless asked.
    kwargs: dict[str, object] = {
        "dtype": placement.dtype,
        "use_safetensors": True,
        "trust_remote_code": trust_remote_code(),
    }
    if placement.quantization == "4bit":
        from transformers import BitsAndBytesConfig  # deferred: loads bitsandbytes (QLoRA)

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16,
        )
        kwargs["device_map"] = {"": placement.device}
    try:
        model = AutoModelForCausalLM.from_pretrained(name, **kwargs)
    except OSError as e:
        where = "local directory" if Path(name).exists() else "hub id (or local path)"
        raise BackendError(f"cannot load base model {name!r} as a {where}: {e}") from e
    if placement.quantization:
        return model
    # transformers wraps `to` with functools.wraps, whose type (typeshed's functools._Wrapped)
    # does not bind `self`: the type checker takes the device for `self`.
    moved: PreTrainedModel = model.to(placement.device)  # type: ignore[arg-type]
    return moved


def lora_target_modules(
    model: PreTrainedModel, train_attn: bool, train_mlp: bool, train_unembed: bool
) -> list[str]:
    """Names (last path component) of the linear layers to adapt, chosen by the three flags."""
    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    wanted: set[str] = set()
    if train_attn:
        wanted |= ATTN_MODULES & present
    if train_mlp:
        wanted |= MLP_MODULES & present
    if train_unembed:
        head = model.get_output_embeddings()
        wanted |= {name.rsplit(".", 1)[-1] for name, m in model.named_modules() if m is head}
    if not wanted:
        raise ConfigError(
            "no LoRA target: set at least one of train_attn, train_mlp, train_unembed"
        )
    return sorted(wanted)


def attach_lora(
    model: PreTrainedModel,
    rank: int,
    seed: int | None,
    targets: list[str],
    device: torch.device | None = None,
) -> PeftModel:
    """Wrap `model` with a fresh LoRA adapter (B = 0, so it starts equal to the base model).
    `device`: where the model will train, if its weights are not there yet (the meta device)."""
    with _seeded(seed):
        # PEFT keeps adapter weights in fp32 even on a bf16 base (autocast_adapter_dtype).
        peft_model = get_peft_model(model, _lora_config(rank, targets))
    if model.dtype == torch.bfloat16 and fast.enabled("BF16_LORA", device or model.device):
        _adapter_in_bf16(peft_model)
    return peft_model


def add_lora(model: PeftModel, name: str, rank: int, seed: int | None, targets: list[str]) -> None:
    """Another fresh adapter `name` on `model`, beside its others (one copy of the base
    weights for all); the same seed gives the same weights as `attach_lora`'s. The active
    adapter stays as it was."""
    active = model.active_adapter
    with _seeded(seed):
        model.add_adapter(name, _lora_config(rank, targets))
    model.set_adapter(active)
    if getattr(model, fast.AUTOCAST_ATTR, None) is not None:
        _adapter_in_bf16(model)


def _lora_config(rank: int, targets: list[str]) -> LoraConfig:
    return LoraConfig(
        r=rank,
        lora_alpha=LORA_ALPHA,
        lora_dropout=0.0,
        target_modules=targets,
        bias="none",
        task_type="CAUSAL_LM",
    )


@contextlib.contextmanager
def _seeded(seed: int | None) -> Iterator[None]:
    """The adapter's initialisation drawn from its own seed, the caller's RNG untouched."""
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(BUILTIN_SEED if seed is None else seed)
        yield


def _adapter_in_bf16(model: PeftModel) -> None:
    """Adapter matmuls in bf16 under autocast instead of fp32: PEFT would otherwise cast each
    adapted layer's input to fp32 and keep that copy for backward (over half the activation
    memory of an 8B model) and add the adapter's output in fp32. The fp32 weights stay the
    optimizer's master copy. Not for 4-bit bases, whose layers manage their own dtypes."""
    if getattr(model, "is_loaded_in_4bit", False):
        return
    for module in model.modules():
        if isinstance(module, LoraLayer):  # every adapted layer: attach_lora adds LoRA only
            module.cast_input_dtype_enabled = False
    setattr(model, fast.AUTOCAST_ATTR, torch.bfloat16)
