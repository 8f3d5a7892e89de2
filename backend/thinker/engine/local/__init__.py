"""The local backend: transformers + PEFT in this process (CUDA bf16, optional QLoRA; CPU fp32)."""
