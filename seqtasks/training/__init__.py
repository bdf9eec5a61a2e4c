"""Training machinery used by the tasks and the CLI: callbacks, checkpoint writing, learning
rate schedules, precision, random state."""
