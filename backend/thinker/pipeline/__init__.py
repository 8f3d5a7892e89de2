"""The declarative pipeline behind the `thinker` CLI: config -> validate -> train -> eval.

`config` loads and checks the YAML file, `validate` runs the test suite and the dataset
check, `evaluate` scores a checkpoint, and `metadata` keeps `runs/<run>/metadata.json`.
"""

from thinker.pipeline.config import (
    DataValidationConfig,
    EvaluationConfig,
    PipelineConfig,
    TestsConfig,
    TrainingConfig,
    check_backend_environment,
    load_pipeline_config,
)
from thinker.pipeline.metadata import RunMetadata, config_fingerprint
from thinker.pipeline.validate import ValidationReport, validate

__all__ = [
    "DataValidationConfig",
    "EvaluationConfig",
    "PipelineConfig",
    "RunMetadata",
    "TestsConfig",
    "TrainingConfig",
    "ValidationReport",
    "check_backend_environment",
    "config_fingerprint",
    "load_pipeline_config",
    "validate",
]
