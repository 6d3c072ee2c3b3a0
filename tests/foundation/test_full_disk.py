"""A full disk (issue 36): one line naming the path and the last good checkpoint, exit status 2, no
traceback beside it (orbax's writer threads and TensorStore's callbacks included); freeing space and
rerunning resumes from that checkpoint, so only the work since it is lost.

The disk is a small tmpfs mounted in a private user and mount namespace (``unshare -Urm``), sized from
a probe run so that the first checkpoint fits and the second does not; the test skips where user
namespaces are not allowed.
"""

from __future__ import annotations

import asyncio
import errno
import json
import pathlib
import shlex
import subprocess
import sys
import types

import pytest

from attention_jax.foundation import full_disk, quiet_libraries
from tests.support import sweep_cli, train_support
from tests.support.sweep_cli import REPO_ROOT, tiny_flags

tiny_data_dir = sweep_cli.tiny_data_dir  # The session's prepared synthetic corpus (a fixture).

# TensorStore's message for a checkpoint array it could not write (orbax raises it as a ValueError).
TENSORSTORE_FULL = ('RESOURCE_EXHAUSTED: Error writing "params.kernel/0.0" in OCDBT database at local file '
                    '"/runs/x/checkpoints/10.orbax-checkpoint-tmp/params/ocdbt.process_0/": Failed writing: '
                    '"/runs/x/checkpoints/10.orbax-checkpoint-tmp/params/ocdbt.process_0/d/5f": Failed to write '
                    "64743 bytes to file 17: No space left on device [os_error_code='28']")

# One tmpfs of the probe's size x 1.4: room for the first checkpoint (step 5), none for the second.
SCRIPT = r"""
set -e
mount -t tmpfs -o size=64m tmpfs "$MOUNT"
$TRAIN --workdir="$MOUNT/probe" --config.num_train_steps=5 > /dev/null 2> "$OUT/probe.err"
used_kb=$(du -sk "$MOUNT/probe" | cut -f1)
umount "$MOUNT"
mount -t tmpfs -o size=$((used_kb * 14 / 10))k tmpfs "$MOUNT"
set +e
$TRAIN --workdir="$MOUNT/run" > /dev/null 2> "$OUT/full.err"
echo $? > "$OUT/full.rc"
ls "$MOUNT/run/checkpoints" > "$OUT/full.checkpoints"
mount -o remount,size=64m "$MOUNT"
$TRAIN --workdir="$MOUNT/run" > /dev/null 2> "$OUT/resumed.err"
echo $? > "$OUT/resumed.rc"
cp "$MOUNT/run/results.json" "$OUT/results.json"
"""


# Seconds each training command may take (about 30 s alone, 65 s under a loaded suite).
COMMAND_TIMEOUT_S = 240


def _can_mount_a_tmpfs() -> bool:
    try:
        return subprocess.run(["unshare", "-Urm", "sh", "-c", "mount -t tmpfs tmpfs /mnt"],
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def test_tensorstores_full_disk_becomes_an_os_error_naming_the_path() -> None:
    with pytest.raises(OSError) as raised, full_disk.as_os_error():
        try:
            raise ValueError(TENSORSTORE_FULL)
        except ValueError as error:
            raise RuntimeError("Save Finalize thread failed") from error  # As orbax re-raises it.
    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename == "/runs/x/checkpoints/10.orbax-checkpoint-tmp/params/ocdbt.process_0/"
    with pytest.raises(ValueError, match="shapes differ"), full_disk.as_os_error():
        raise ValueError("shapes differ")  # Any other error passes unchanged.
    assert full_disk.no_space_errno(OSError(errno.EDQUOT, "Disk quota exceeded")) == errno.EDQUOT


def test_only_the_echoes_of_a_failed_save_are_dropped() -> None:
    closed_loop = types.SimpleNamespace(exc_value=RuntimeError("Event loop is closed"), object=None)
    assert quiet_libraries._is_failed_save_echo(closed_loop)
    assert not quiet_libraries._is_failed_save_echo(types.SimpleNamespace(exc_value=RuntimeError("Event loop is closed"),
                                                                         object=asyncio.sleep))
    assert not quiet_libraries._is_failed_save_echo(types.SimpleNamespace(exc_value=KeyError("ours"), object=None))


@pytest.mark.end_to_end
@pytest.mark.slow
def test_a_full_disk_is_one_line_and_a_rerun_resumes_from_the_last_good_checkpoint(
        tmp_path: pathlib.Path, tiny_data_dir: pathlib.Path) -> None:
    if not _can_mount_a_tmpfs():
        pytest.skip("needs `unshare -Urm` (user and mount namespaces) to mount a small tmpfs")
    mount, out = tmp_path / "disk", tmp_path / "out"
    mount.mkdir()
    out.mkdir()
    flags = tiny_flags(tiny_data_dir, 40, eval_every_steps=20, checkpoint_every_steps=5, keep_checkpoints=1)
    # Each command is bounded: a hang is killed with SIGABRT, whose faulthandler dump (every thread's
    # stack) lands in that command's .err file and so in the failure message.
    train = shlex.join(["timeout", "-s", "ABRT", str(COMMAND_TIMEOUT_S), sys.executable, "-m", "attention_jax.main",
                        "--config=configs/tiny.py", *flags])
    env = dict(train_support.subprocess_env(str(tmp_path / "cache")), MOUNT=str(mount), OUT=str(out), TRAIN=train,
               PYTHONFAULTHANDLER="1")
    completed = subprocess.run(["unshare", "-Urm", "sh", "-c", SCRIPT], cwd=REPO_ROOT, env=env,
                               capture_output=True, text=True, timeout=4 * COMMAND_TIMEOUT_S)
    assert completed.returncode == 0, completed.stderr[-3000:] + (out / "probe.err").read_text()[-3000:]

    stderr = (out / "full.err").read_text()
    assert (out / "full.rc").read_text().strip() == "2", stderr[-5000:]
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr[-5000:]
    errors = [line for line in stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, stderr[-5000:]
    assert errors[0].startswith("attention_jax.main: error: No space left on device writing ")
    assert f"{mount}/run/" in errors[0]  # The path that could not be written.
    assert f"The last good checkpoint is step 5 in {mount}/run/checkpoints" in errors[0]
    assert "5" in (out / "full.checkpoints").read_text().split()  # Step 5 finished; step 10 never did.

    resumed = (out / "resumed.err").read_text()
    assert (out / "resumed.rc").read_text().strip() == "0", resumed[-5000:]
    assert "Resumed from the checkpoint of step 5" in resumed
    assert json.loads((out / "results.json").read_text())["step"] == 40
