# `python -m attention_jax.report` (a README command) runs attention_jax/commands/report.py.
from absl import app, flags

from attention_jax.commands import report

__doc__ = report.__doc__  # What --help prints, with the command's flags:

if __name__ == "__main__":
    flags.adopt_module_key_flags(report)
    app.run(report.main)
