"""The declarative pipeline behind the `thinker` CLI: config -> validate -> train -> eval.

`config` loads and checks the YAML file, `validate` runs the test suite and the dataset
check, `train` runs the algorithm or each stage in turn, `evaluate` scores a checkpoint,
and `metadata` keeps `runs/<run>/metadata.json`. (`train` imports the training loops, so it
is not imported here.)
"""

from thinker.pipeline.config import (
    DataValidationConfig,
    DPOTraining,
    EvaluationConfig,
    PipelineConfig,
    RLTraining,
    SLTraining,
    TestsConfig,
    TrainingConfig,
    TrainingSection,
    check_backend_environment,
    load_pipeline_config,
)
from thinker.pipeline.metadata import RunMetadata, config_fingerprint
from thinker.pipeline.validate import ValidationReport, validate

__all__ = [
    "DPOTraining",
    "DataValidationConfig",
    "EvaluationConfig",
    "PipelineConfig",
    "RLTraining",
    "RunMetadata",
    "SLTraining",
    "TestsConfig",
    "TrainingConfig",
    "TrainingSection",
    "ValidationReport",
    "check_backend_environment",
    "config_fingerprint",
    "load_pipeline_config",
    "validate",
]
