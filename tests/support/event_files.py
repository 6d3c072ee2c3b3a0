"""A run's TensorBoard event files read back with TensorBoard's own reader (``pip install -e ".[tensorboard]"``).

Tests that use these helpers skip where TensorBoard is not installed (``pytest.importorskip``).
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest


def accumulator(directory: pathlib.Path) -> Any:
    """TensorBoard's ``EventAccumulator`` over every event file in ``directory``, loaded, nothing sampled away."""
    pytest.importorskip("tensorboard", reason='TensorBoard is the optional extra: pip install -e ".[tensorboard]"')
    from tensorboard.backend.event_processing import event_accumulator

    loaded = event_accumulator.EventAccumulator(str(directory), size_guidance={event_accumulator.SCALARS: 0,
                                                                               event_accumulator.TENSORS: 0})
    loaded.Reload()
    return loaded


def scalars(directory: pathlib.Path, prefix: str = "") -> dict[str, list[tuple[int, float]]]:
    """Every scalar series whose tag starts with ``prefix``: tag -> ``[(step, value), ...]``."""
    loaded = accumulator(directory)
    return {tag: [(event.step, event.value) for event in loaded.Scalars(tag)]
            for tag in loaded.Tags()["scalars"] if tag.startswith(prefix)}


def session_end_status(directory: pathlib.Path) -> str | None:
    """The HParams status TensorBoard shows for the run (``"STATUS_SUCCESS"``, ...), ``None`` without an end record."""
    from tensorboard.plugins.hparams import api_pb2
    from tensorboard.plugins.hparams import metadata as hparams_metadata

    try:
        records = accumulator(directory).PluginTagToContent("hparams")
    except KeyError:  # No hparams record at all.
        return None
    if hparams_metadata.SESSION_END_INFO_TAG not in records:
        return None
    end = hparams_metadata.parse_session_end_info_plugin_data(records[hparams_metadata.SESSION_END_INFO_TAG])
    assert end.end_time_secs > 0
    return api_pb2.Status.Name(end.status)
