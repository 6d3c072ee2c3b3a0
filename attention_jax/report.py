# `python -m attention_jax.report` (a README command) runs attention_jax/commands/report.py.
from absl import app

from attention_jax.commands import report

__doc__ = report.__doc__  # What --help prints.

if __name__ == "__main__":
    app.run(report.main)
