"""The networks: attention, the encoder-decoder Transformer, the language model, their config and FLOP counts."""
