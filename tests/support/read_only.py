"""A directory that nobody can write for the length of a block, also when the tests run as root.

Permissions do not stop root, so as root the directory is bind-mounted read-only onto itself (the kernel
then answers ``EROFS`` to every write, as on a read-only share); as another user its permissions are
taken away. A test that needs it is skipped, with the reason, only where neither works (root without
the right to mount, e.g. in an unprivileged container).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
from typing import Iterator

import pytest


def _writable(directory: pathlib.Path) -> bool:
    probe = directory / ".write_probe"
    try:
        probe.write_text("")
    except OSError:
        return False
    probe.unlink()
    return True


@contextlib.contextmanager
def read_only(directory: pathlib.Path) -> Iterator[None]:
    """Make ``directory`` and everything under it unwritable inside the block, then writable again.

    Parameters
    ----------
    directory : pathlib.Path
        An existing directory (e.g. under ``tmp_path``).

    Notes
    -----
    Skips the calling test when the directory cannot be made read-only here.
    """
    if os.geteuid() != 0:
        directories = [directory, *(path for path in directory.rglob("*") if path.is_dir())]
        for path in directories:
            path.chmod(0o555)
        try:
            yield
        finally:
            for path in directories:
                path.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "--bind", str(directory), str(directory)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"running as root, where permissions do not stop writes, and cannot bind-mount {directory} "
                    f"read-only: {mounted.stderr.strip()}")
    try:
        remounted = subprocess.run(["mount", "-o", "remount,bind,ro", str(directory)], capture_output=True, text=True)
        if remounted.returncode != 0 or _writable(directory):
            pytest.skip(f"running as root and cannot remount {directory} read-only: {remounted.stderr.strip()}")
        yield
    finally:
        subprocess.run(["umount", str(directory)], check=True)
