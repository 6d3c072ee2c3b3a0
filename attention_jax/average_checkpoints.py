# `python -m attention_jax.average_checkpoints` (a README command) runs attention_jax/commands/average_checkpoints.py.
from absl import app, flags

from attention_jax.commands import average_checkpoints

__doc__ = average_checkpoints.__doc__  # What --help prints, with the command's flags:

if __name__ == "__main__":
    flags.adopt_module_key_flags(average_checkpoints)
    app.run(average_checkpoints.main)
