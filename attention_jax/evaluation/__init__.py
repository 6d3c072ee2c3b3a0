"""Measuring and looking inside a model: BLEU, perplexity, bits per byte, attention maps and plots."""
