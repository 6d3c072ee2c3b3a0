"""Training: the loop and the step, the optimizer and schedule, metric logs, sharding and multi-process setup."""
