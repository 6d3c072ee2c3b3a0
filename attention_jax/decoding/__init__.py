"""Turning a trained model into text: beam search, greedy decoding, sampling and loading a run."""
