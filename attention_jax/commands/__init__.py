"""The commands: every absl flag of the package, each command's ``main`` and ``--help`` text.

They run through :mod:`.entry_points`.
"""
