"""CPU-only speed-ups of the model's hot paths (XLA's CPU code generation leaves time on the table there).

Each one computes what the plain Flax/JAX path computes, only sooner on a CPU; on other backends the plain
path runs. See each module's docstring for its measured gain.

- :mod:`~attention_jax.cpu_kernels.projection`: dense layers with a custom backward pass of two 2-D
  products, the input's transpose materialised in row blocks on a single CPU device.
- :mod:`~attention_jax.cpu_kernels.dropout`: dropout masks from Threefry-2x32 unrolled into one fusion
  instead of JAX's CPU loop.
"""
