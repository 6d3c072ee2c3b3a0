"""The suite's pytest-xdist work units (tests/conftest.py): one per file, one shared by the quickstart's readers."""

from __future__ import annotations

import collections

import pytest


def _group(item: pytest.Item) -> str:
    markers = list(item.iter_markers("xdist_group"))
    assert len(markers) == 1, f"{item.nodeid} has {len(markers)} xdist_group marks"
    return markers[0].args[0]


def test_every_collected_test_has_one_work_unit_and_the_quickstart_unit_comes_first(
        request: pytest.FixtureRequest) -> None:
    items = request.session.items
    groups = [_group(item) for item in items]
    files_of_group = collections.defaultdict(set)
    for item, group in zip(items, groups):
        reads_quickstart = "tiny_workdir" in item.fixturenames or "02_" in item.nodeid
        assert (group == "quickstart") == reads_quickstart, (item.nodeid, group)
        files_of_group[group].add(item.nodeid.split("::")[0])
        if group != "quickstart":
            assert group == item.nodeid.split("::")[0], (item.nodeid, group)
    assert all(len(files) == 1 for group, files in files_of_group.items() if group != "quickstart")
    if "quickstart" in groups:  # Queued first: a stable sort puts the longest unit ahead of the rest.
        first_other = next((index for index, group in enumerate(groups) if group != "quickstart"), len(groups))
        assert set(groups[:first_other]) == {"quickstart"} and "quickstart" not in groups[first_other:]
