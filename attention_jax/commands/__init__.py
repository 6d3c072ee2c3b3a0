"""The ``python -m`` entry points: each parses flags and calls the library.

The README's commands (``python -m attention_jax.main``, ``.translate``, ``.evaluate``,
``.plot_attention``, ``.average_checkpoints``, ``.count_params``, ``.report``) run these modules through
short modules of the same names at the package's top level, whose ``run()`` functions are also the
console scripts ``attention-jax-train``, ``attention-jax-translate``, ... (:mod:`.entry_points`).
"""
