"""Training: the train loop and step, optimizer, loss and metrics, checkpoints, metric logs, sharding and
multi-process setup."""
