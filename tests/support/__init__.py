"""What the tests share: fake data and a fake entry point, the NumPy reference implementations, decoding
and training helpers, launcher helpers, and the scripts some tests run in a subprocess."""

import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
"""The repository's root: configs/, launch/ and the package live there."""
