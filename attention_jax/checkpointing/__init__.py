"""A run's checkpoints on disk: Orbax train states, parameters for inference and their averages."""
