"""Measuring and looking inside a model: BLEU and perplexity of translations, language-model perplexity and
bits per byte, attention maps and their plots."""
