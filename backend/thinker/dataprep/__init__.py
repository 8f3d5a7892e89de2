"""Datasets as a whole: what a file holds (detection), how training will see it (statistics),
and importing one from the Hugging Face hub. Above `algorithms` (statistics render rows the
way training does); the row-level formats and checks are in `thinker.data`, below."""
