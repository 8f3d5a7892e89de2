"""The declarative pipeline behind the `thinker` CLI: config -> validate -> train -> eval.

`config` loads and checks the YAML file, `validate` runs the test suite and the dataset
check, `runner` runs a command's stages, `stages` the training (one algorithm, or stages each
from the one before), `train` one algorithm, `evaluate` scores a checkpoint, `report` judges
a job's model, `proposal` proposes a job's settings, and `metadata` keeps
`runs/<run>/metadata.json`. Nothing is imported here: the training modules import torch.
"""
