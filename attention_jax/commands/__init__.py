"""The ``python -m`` entry points: each parses flags and calls the library.

The README's commands (``python -m attention_jax.translate``, ``.evaluate``, ``.plot_attention``,
``.average_checkpoints``, ``.count_params``, ``.report``) run these modules through short modules of the
same names at the package's top level, whose ``run()`` functions are also the console scripts
``attention-jax-translate``, ``attention-jax-evaluate``, ... (:mod:`.entry_points`). The training command,
``python -m attention_jax.main`` (``attention-jax-train``), is ``attention_jax/main.py`` itself, so that
the path from it to an update is short (``docs/design.md``, "The files of one update").
"""
