"""Training algorithms, each one flat async loop against `thinker.ServiceClient`."""
