"""The ``python -m`` entry points: each parses flags and calls the library.

The README's commands (``python -m attention_jax.translate``, ``.evaluate``, ``.plot_attention``,
``.average_checkpoints``, ``.count_params``, ``.report``) run these modules through short modules of the
same names at the package's top level, whose ``run()`` functions are also the console scripts
``attention-jax-translate``, ``attention-jax-evaluate``, ... (:mod:`.entry_points`); the training command,
``python -m attention_jax.main`` (``attention-jax-train``), runs :mod:`.train`. Every absl flag of the
package is defined in this subpackage; the commands run under a library module's name
(``python -m attention_jax.data.length_buckets``, ...) are here too, and that module's ``__main__`` block
hands over to them.
"""
