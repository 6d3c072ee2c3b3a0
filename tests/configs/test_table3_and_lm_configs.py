"""configs/table3.py (the paper's EN-DE and EN-FR models) and the language-model configs."""

from __future__ import annotations

import pytest

from attention_jax.experiment import sections
from configs import base, big, lm_base, lm_tiny, table3


def _without_labels(config) -> dict:
    fields = config.to_dict()
    fields.pop("name"), fields.pop("paper")
    return fields


def test_en_de_rows_are_the_base_and_big_configs() -> None:
    assert _without_labels(table3.get_config("base_en_de")) == _without_labels(base.get_config())
    assert _without_labels(table3.get_config("big_en_de")) == _without_labels(big.get_config())


def test_en_fr_rows_use_wmt14_fr_en_with_32k_word_pieces_and_big_dropout_0_1() -> None:
    for row, dropout, d_model in (("base_en_fr", 0.1, 512), ("big_en_fr", 0.1, 1024)):
        config = table3.get_config(row)
        assert (config.dataset, config.source_lang, config.target_lang) == ("wmt14_translate/fr-en", "en", "fr")
        assert config.vocab_size == 32000 and config.dropout_rate == dropout and config.d_model == d_model
    assert [table3.get_config(row).paper.test_bleu for row in table3.ROW_NAMES] == [27.3, 28.4, 38.1, 41.8]
    with pytest.raises(ValueError, match="choose one of base_en_de"):
        table3.get_config("base_en_es")


def test_lm_configs_are_decoder_only_overrides_of_base() -> None:
    tiny, paper_width = lm_tiny.get_config(), lm_base.get_config()
    for config in (tiny, paper_width):
        assert sections.build_experiment(config, config.name).model_kind == "decoder_only"
        assert config.num_bleu_examples == 0 and not config.final_bleu
    changed = {key for key, value in tiny.to_dict().items() if paper_width.to_dict()[key] != value}
    assert changed == set(lm_tiny.TINY_LM_OVERRIDES) | {"name"}
    assert (paper_width.d_model, paper_width.num_layers, paper_width.d_ff) == (512, 6, 2048)
