"""A run's checkpoints on disk: the Orbax train-state checkpoints written during training (resume, keep the
newest and the best) and reading their parameters back for inference, averaged over the last k."""
