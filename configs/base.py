"""Transformer base model of Vaswani et al. (2017), Table 3 row "base" / Table 2 row "base".

Reproduces: EN->DE on WMT 2014 (newstest2013 dev, newstest2014 test), N=6, d_model=512, d_ff=2048,
h=8, d_k=d_v=64, P_drop=0.1, eps_ls=0.1, 100k steps of ~25k source + ~25k target tokens.
Expected: dev PPL 4.92 / BLEU 25.8 (Table 2), test BLEU 27.3 (Table 3), 65M parameters.

Run::

    python -m attention_jax.main --config=configs/base.py --workdir=runs/base

(needs the WMT14 data prepared by TFDS first:
``python -c "import tensorflow_datasets as tfds; tfds.builder('wmt14_translate/de-en').download_and_prepare()"``).
"""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
    """Return the paper's base configuration.

    Returns
    -------
    ml_collections.ConfigDict
        Every setting the library reads: model, data, optimisation, checkpointing, evaluation and
        decoding. Other config files start from this one and override fields.

    Notes
    -----
    Field groups follow the paper's sections: 3 (model), 5.1-5.2 (data and batching), 5.3 (optimizer),
    5.4 (regularization), 6.1 (checkpoint averaging and beam search).
    """
    config = ml_collections.ConfigDict()
    config.name = "base"
    # The paper's dev figures for this config (Table 2), shown beside ours in reports.
    config.paper = ml_collections.ConfigDict(dict(dev_ppl=4.92, dev_bleu=25.8, params_millions=65))
    config.seed = 0

    # --- Model (Section 3, Table 3 "base") -------------------------------------------------------
    config.model_kind = "encoder_decoder"  # or "decoder_only": a Transformer language model (lm_*.py).
    config.num_layers = 6  # N, for encoder and decoder alike.
    config.d_model = 512
    config.d_ff = 2048
    config.num_heads = 8  # h
    config.key_dim = 64  # d_k, per head (Table 2 row B varies it alone).
    config.value_dim = 64  # d_v, per head.
    config.dropout_rate = 0.1  # P_drop, Section 5.4.
    config.attention_dropout_rate = 0.0  # Not in the paper; tensor2tensor later added it.
    config.positional_encoding = "sinusoidal"  # or "learned" (Table 2 row E).
    config.layer_norm_position = "post"  # Paper: LayerNorm(x + Dropout(Sublayer(x))); or "pre".
    config.share_embeddings = True  # One matrix: encoder input, decoder input, pre-softmax (3.4).
    config.attention_implementation = "einsum"  # or "fused" (jax.nn.dot_product_attention).
    config.attention_window = 0  # 0: full attention; r > 0: restricted self-attention (Table 1).
    config.attention_function = "scaled_dot_product"  # or "dot_product", "additive", "linear" (3.2.1).
    config.dtype = "float32"  # Compute dtype; "bfloat16" keeps params in float32.
    # CPU-only speed-ups (attention_jax/cpu_kernels: Dense backward pass, dropout masks, accuracy argmax).
    # Takes effect only when jax.default_backend() == "cpu"; False gives the plain Flax/JAX path everywhere.
    config.cpu_kernels = True

    # --- Data (Section 5.1) ------------------------------------------------------------------------
    config.dataset = "wmt14_translate/de-en"  # TFDS name, "synthetic_en_de", or "tsv:/path/to/dir".
    config.source_lang = "en"
    config.target_lang = "de"
    config.train_split = "train"
    config.eval_split = "validation"  # newstest2013 in TFDS wmt14_translate.
    config.test_split = "test"  # newstest2014.
    config.data_dir = ""  # TFDS data directory; "" means TFDS's default (~/tensorflow_datasets).
    config.vocab_size = 37000  # Shared source/target BPE vocabulary.
    config.max_len = 256  # Longest example (tokens, EOS included) kept for training; also PE length.
    config.tokens_per_batch = 25000  # Per side, batches grouped by length (Section 5.1).
    config.tokens_per_batch_unit = "real"  # The paper counts real tokens: each bucket's rows are sized by
    # its pairs' mean length. "slots": rows x padded length, padding included (fairseq's --max-tokens).
    # metrics.jsonl logs the padding fraction trained on either way.
    config.packing = False  # True: several pairs per training row with segment ids (attention stays
    # within a pair; one batch shape per row length; needs attention_window=0).
    config.packing_row_lengths = ()  # Row lengths of packed training, ending in max_len; () means
    # (3 * max_len // 8, 3 * max_len // 4, max_len): short rows attend over fewer positions.
    config.tokenizer_max_sentences = 2_000_000  # Sentences (both sides) used to train the BPE model.
    # Fine-tuning (docs/faults.md#fine-tuning-on-new-data): a NEW work directory starts from this run's
    # parameters and tokenizer.model, on config.dataset; fresh optimizer at step 0, same model fields.
    config.fine_tune_from = ""  # The source run's work directory; "" trains from scratch.
    config.fine_tune_checkpoint = "latest"  # Its parameters: "latest", "best", "averaged" or a step number.
    config.data_threads = 2  # Grain reader threads.
    config.label_smoothing = 0.1  # eps_ls, Section 5.4.

    # --- Optimizer (Section 5.3) -------------------------------------------------------------------
    config.num_train_steps = 100_000
    config.warmup_steps = 4000
    config.learning_rate_scale = 1.0  # Multiplies d_model^-0.5 * min(step^-0.5, step*warmup^-1.5).
    config.adam_b1 = 0.9
    config.adam_b2 = 0.98
    config.adam_eps = 1e-9
    config.grad_accum_steps = 1  # Micro-batches per optimizer step (reach 25k tokens on small devices).
    config.dropout_rng = "threefry"  # or "rbg" (XLA RngBitGenerator): masks then depend on the mesh.
    # Persistent XLA compilation cache: "default" (~/.cache/attention_jax/...), "" (off), or a directory.
    # Resumed runs, sweep rows and repeated seeds then load their compiled steps instead of compiling.
    config.compilation_cache_dir = "default"

    # --- Parallelism -------------------------------------------------------------------------------
    config.mesh_shape = (-1,)  # Sizes of the mesh axes; -1 takes the remaining devices.
    config.mesh_axes = ("data",)
    config.param_sharding = "replicated"  # or "fsdp": params and optimizer state sharded on "data".

    # --- Checkpoints, logging, evaluation (Section 6.1) ---------------------------------------------
    config.checkpoint_every_steps = 0  # 0: only the time-based schedule below.
    config.checkpoint_every_minutes = 10.0
    config.keep_checkpoints = 5  # The paper averages the last 5 (base) / 20 (big).
    config.log_every_steps = 100
    config.peak_tflops_per_device = 0.0  # MFU's peak; 0: a datasheet's for the device and dtype, else measured
    # once (a CPU); see attention_jax/training/device_peaks.py. The log names the peak used.
    config.profile_steps = 0  # > 0: trace this many train steps into WORKDIR/tensorboard (TensorBoard's
    config.profile_start_step = 10  # profiler) after this many; see attention_jax/training/profiling.py.
    config.eval_every_steps = 1000
    config.num_eval_batches = 0  # 0: the whole dev split.
    config.num_bleu_examples = 500  # Dev sentences decoded for sampled BLEU at each evaluation (0: none):
    # a progress signal. The figures that count are final_bleu's, on whole splits.
    config.num_sample_translations = 3  # Dev sentences shown as text in TensorBoard at each evaluation (0: none):
    # the sampled-BLEU translations when there are any, else greedy ones of the first dev sentences.
    config.final_bleu = True  # When training ends: beam-search BLEU of the whole dev and test splits.
    config.final_bleu_splits = ("dev", "test")  # Which of them (Table 2 sweeps: dev only).
    config.early_stopping_patience = 0  # Stop after this many evaluations without a better dev
    # perplexity (0: train all num_train_steps); the best checkpoints are kept in WORKDIR/best/.
    config.early_stopping_min_improvement = 0.0  # A dev perplexity lower than the best by less than this
    # fraction is kept as the best but counts toward patience (0.01: improvements under 1% count as none).
    config.early_stopping_min_steps = 0  # Evaluations before this step never count toward patience.

    # --- Decoding (Section 6.1) -------------------------------------------------------------------
    config.beam_size = 4
    config.length_penalty_alpha = 0.6
    config.max_decode_extra_len = 50  # Output length limit: input length + 50.
    config.cache_stages = 2  # The key/value cache grows in 2 stages (faster decoding, 2 loop compilations).
    config.average_last_checkpoints = 5
    return config
