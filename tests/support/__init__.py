"""What the tests share: fake data and a fake entry point, the NumPy reference implementations, decoding
and training helpers, launcher helpers, and the scripts some tests run in a subprocess."""
