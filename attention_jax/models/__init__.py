"""The networks: attention functions and layers, the encoder-decoder Transformer, the decoder-only language
model, their configuration (``TransformerConfig``) and their FLOP counts."""
