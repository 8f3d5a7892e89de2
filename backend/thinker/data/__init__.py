"""Datasets: loading JSONL conversations, validating them, splitting and fingerprinting."""

from thinker.data.kinds import DatasetKind
from thinker.data.loading import dataset_sha256, load_conversations, split_train_eval
from thinker.data.validation import (
    FieldType,
    RowError,
    SchemaField,
    ValidationResult,
    schema_for_kind,
    validate_jsonl,
)

__all__ = [
    "DatasetKind",
    "FieldType",
    "RowError",
    "SchemaField",
    "ValidationResult",
    "dataset_sha256",
    "load_conversations",
    "schema_for_kind",
    "split_train_eval",
    "validate_jsonl",
]
