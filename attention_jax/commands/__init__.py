"""The commands: every absl flag of the package, each command's ``main`` and its ``--help`` text.

``python -m attention_jax.<command>`` and the ``attention-jax-<command>`` console scripts run them through
short modules at the package's top level (:mod:`.entry_points`); ``docs/design.md`` lists them.
"""
