"""Data: sources, the tokenizer, token caches, batching and the input pipeline of global batches."""
