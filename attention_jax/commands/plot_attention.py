r"""Draw a trained model's attention weights for one sentence, like the paper's Figures 3-5.

Usage::

    python -m attention_jax.plot_attention --workdir=runs/tiny --text="The house is small." \
        --out=attention.png [--target="Das Haus ist klein."] [--layer=-1] [--head=all] [--kind=cross]

One heat map per head of the layer, queries as rows; without ``--target`` the model's own translation.
"""

from __future__ import annotations

from absl import app, flags

from attention_jax.foundation.user_errors import UserInputError, exit_with_error

_WORKDIR = flags.DEFINE_string("workdir", None, "Training work directory.", required=True)
_CHECKPOINT = flags.DEFINE_string("checkpoint", "latest",
                                  "'latest', 'averaged', 'best' (early stopping) or a step number.")
_TEXT = flags.DEFINE_string("text", None, "Source sentence.", required=True)
_TARGET = flags.DEFINE_string("target", None, "Target sentence (default: the model's translation).")
_OUT = flags.DEFINE_string("out", None, "PNG file to write.", required=True)
_LAYER = flags.DEFINE_integer("layer", -1, "Layer index (negative counts from the last).")
_HEAD = flags.DEFINE_string("head", "all", "'all' or a head index.")
_KIND = flags.DEFINE_enum("kind", "cross", ["cross", "encoder", "decoder"], "Which attention to draw.")


def main(argv: list[str]) -> None:
    """Compute and draw the attention maps for ``--text``.

    Parameters
    ----------
    argv : list[str]
        What absl leaves of the command line.
    """
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from attention_jax.commands import output_files
    from attention_jax.decoding import inference  # Imported here so --help is fast.
    from attention_jax.evaluation import attention_maps, attention_plots

    try:
        output_files._check_output_file(_OUT.value, "--out", (_WORKDIR.value,))  # Never over the run's own files.
        run = inference.load_run(_WORKDIR.value, _CHECKPOINT.value)
        maps = attention_maps.attention_maps(
            run.model_config, run.params, run.tokenizer, _TEXT.value, _TARGET.value,
            settings=run.config.decoding)
        heads = attention_plots.select_heads(maps[_KIND.value].shape[1], _HEAD.value)
        attention_plots.draw_attention(maps, _KIND.value, _LAYER.value, heads, _OUT.value)
    except UserInputError as error:  # E.g. a run without its tokenizer.model: one line, exit 2.
        exit_with_error("attention_jax.plot_attention", str(error))
    except (FileNotFoundError, ValueError) as error:
        exit_with_error("attention_jax.plot_attention", str(error))
    except OSError as error:  # A full disk while drawing.
        message = output_files._write_error_message(error, _OUT.value, "--out")
        if message is None:
            raise
        exit_with_error("attention_jax.plot_attention", message)
    print(f"{maps['source']} -> {maps['target']}")
    print(f"wrote {_OUT.value}")


if __name__ == "__main__":
    app.run(main)
