"""Data: sources (TFDS, TSV, the synthetic EN-DE corpus), the tokenizer, token caches, batching and the
input pipeline that turns them into global training batches."""
