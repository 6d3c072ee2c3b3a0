# `python -m attention_jax.generate` (a README command) runs attention_jax/commands/generate.py.
from absl import app, flags

from attention_jax.commands import generate

__doc__ = generate.__doc__  # What --help prints, with the command's flags:

if __name__ == "__main__":
    flags.adopt_module_key_flags(generate)
    app.run(generate.main)
