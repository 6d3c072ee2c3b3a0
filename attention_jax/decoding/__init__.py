"""Turning a trained model into text: beam search and greedy decoding with a key/value cache, sampling
for language models, decode settings, and loading a run's parameters and tokenizer for inference."""
