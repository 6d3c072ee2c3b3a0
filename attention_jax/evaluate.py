# `python -m attention_jax.evaluate` (a README command) runs attention_jax/commands/evaluate.py.
from absl import app, flags

from attention_jax.commands import evaluate

__doc__ = evaluate.__doc__  # What --help prints, with the command's flags:

if __name__ == "__main__":
    flags.adopt_module_key_flags(evaluate)
    app.run(evaluate.main)
