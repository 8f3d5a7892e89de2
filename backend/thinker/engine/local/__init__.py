"""The local backend: transformers + PEFT in this process (CUDA bf16, optional QLoRA; CPU fp32)."""

import warnings

# PEFT calls a transformers method that transformers 5.x deprecates; nothing a user can act on.
warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
