"""Jobs: the queue and scheduler, worker processes, and the run directory's event log."""
