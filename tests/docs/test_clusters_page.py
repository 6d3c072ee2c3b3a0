"""docs/clusters.md against the launcher: its commands' flags exist, its cluster flags are all there, its
generated examples are what ``--dry_run`` prints today.

``python tests/docs/test_clusters_page.py`` rewrites the generated examples in place (after a change to the
launcher's scripts), from the commands above them.
"""

from __future__ import annotations

import pathlib
import re
import shlex
import sys

import pytest

if __name__ == "__main__":  # Run as a script: the repository root on sys.path, as pytest's pythonpath does.
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from attention_jax.experiment import schema  # noqa: E402
from tests.support.sweep_cli import REPO_ROOT, run_module, sweep_help, sweep_in_process  # noqa: E402

PAGE = REPO_ROOT / "docs" / "clusters.md"
LAUNCHER_COMMANDS = (("attention-jax-sweep",), ("python", "-m", "attention_jax.sweep"),
                     ("python", "-m", "launch.sweep"))
GENERATED = re.compile(r"<!-- generated: [^\n]*-->\n```bash\n(?P<command>.*?)```\n\n```text\n(?P<output>.*?)```", re.S)
# Flags whose help names a cluster executor, and those that say where and how rows run there.
CLUSTER_HELP = re.compile(r"^(slurm|tpu|slurm/tpu)( --wait)?:")
WHERE_ROWS_RUN = {"root", "repo_dir", "python", "dry_run", "force"}


def _shell_blocks(text: str) -> list[str]:
    """The bodies of the page's ```bash (and unlabelled) fenced blocks."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", text, flags=re.S | re.M)
    return [body for language, body in blocks if language in ("", "bash")]


def launcher_commands(text: str) -> list[list[str]]:
    """Every launcher command in the page's code blocks, as argument lists (continuation lines joined)."""
    commands = []
    for block in _shell_blocks(text):
        for line in block.replace("\\\n", " ").splitlines():
            for prefix in LAUNCHER_COMMANDS:
                if line.startswith(" ".join(prefix) + " "):
                    commands.append(shlex.split(line, comments=True)[len(prefix):])
    return commands


def table_flags(text: str) -> list[str]:
    """The flags in the first column of the page's ``| launcher flag |`` table."""
    table = text.split("| launcher flag |", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\| `--(\w+)", table, flags=re.M)


def help_flags() -> dict[str, str]:
    """The launcher's flags as ``--help`` lists them: name -> its help text."""
    listed = re.findall(r"^  --(?:\[no\])?(\w+): (.*?)(?=^  --|\Z)", sweep_help(), flags=re.S | re.M)
    return {name: " ".join(description.split()) for name, description in listed}


def _flag_name(argument: str, known: dict[str, str]) -> str:
    name = argument[2:].split("=", 1)[0]
    return name[2:] if name not in known and name.startswith("no") and name[2:] in known else name


def test_every_flag_of_a_launcher_command_on_the_page_is_in_its_help() -> None:
    text, known = PAGE.read_text(encoding="utf-8"), help_flags()
    commands = launcher_commands(text)
    assert len(commands) >= 5, "the page's launcher commands were not found"
    unknown = set()
    for command in commands:
        for argument in (word for word in command if word.startswith("--")):
            if argument.startswith("--config."):
                field = argument.removeprefix("--config.").split("=", 1)[0].split(".", 1)[0]
                if field not in schema.FIELDS_BY_NAME:
                    unknown.add(argument)
            elif _flag_name(argument, known) not in known:
                unknown.add(argument)
    assert not unknown, f"docs/clusters.md shows flags the launcher does not have: {sorted(unknown)}"


def test_the_cluster_flag_table_lists_every_cluster_flag_of_the_help_and_no_other() -> None:
    shown, known = table_flags(PAGE.read_text(encoding="utf-8")), help_flags()
    slurm_flags = {name for name, description in known.items()
                   if CLUSTER_HELP.match(description) and not description.startswith("tpu:")}
    assert set(shown) <= set(known), f"not launcher flags: {sorted(set(shown) - set(known))}"
    assert slurm_flags <= set(shown), f"missing from the SLURM table: {sorted(slurm_flags - set(shown))}"
    assert WHERE_ROWS_RUN <= set(shown)


def test_the_page_names_every_tpu_flag() -> None:
    text, known = PAGE.read_text(encoding="utf-8"), help_flags()
    tpu_section = text.split("## A Cloud TPU VM slice", 1)[1].split("\n## ", 1)[0]
    tpu_flags = {name for name, description in known.items() if re.match(r"^(tpu|slurm/tpu):", description)}
    assert len(tpu_flags) >= 4
    missing = [name for name in sorted(tpu_flags | {"repo_dir", "python"}) if f"--{name}" not in tpu_section]
    assert not missing, f"the TPU walk-through never names {missing}"


def regenerate(text: str) -> str:
    """``text`` with each generated example replaced by what its command's ``--dry_run`` prints now."""
    def run(match: re.Match) -> str:
        arguments = launcher_commands(f"```bash\n{match['command']}```\n")
        assert len(arguments) == 1, match["command"]
        result = sweep_in_process(*arguments[0])
        assert result.returncode == 0, result.stderr
        return match[0].replace(match["output"], result.stdout, 1)

    return GENERATED.sub(run, text)


def test_the_generated_examples_are_what_dry_run_prints() -> None:
    text = PAGE.read_text(encoding="utf-8")
    examples = GENERATED.findall(text)
    assert [("--executor=tpu" in command, "--executor=slurm" in command) for command, _ in examples] == [
        (True, False), (False, True)]
    assert regenerate(text) == text, "stale --dry_run examples: run python tests/docs/test_clusters_page.py"


def test_an_sbatch_example_holds_every_directive_its_flags_ask_for() -> None:
    script = GENERATED.findall(PAGE.read_text(encoding="utf-8"))[1][1]
    directives = re.findall(r"^#SBATCH (\S+)$", script, flags=re.M)
    for directive in ("--nodes=2", "--gpus-per-node=8", "--cpus-per-task=32", "--mem=200G", "--time=24:00:00",
                      "--partition=gpu", "--account=my-lab", "--requeue", "--signal=TERM@120", "--qos=high"):
        assert directive in directives
    assert "\ncd /shared/attention_jax\nmodule load cuda/12.4\n" in script


@pytest.mark.slow
def test_the_installed_launcher_help_lists_its_flags() -> None:
    """``python -m attention_jax.sweep --help`` (the console script's module) prints launch.sweep's usage and flags."""
    result = run_module("attention_jax.sweep", "--help", timeout=120)  # absl's --help exits with status 1.
    printed = set(re.findall(r"^  --(?:\[no\])?(\w+):", result.stdout, flags=re.M))
    assert printed == set(help_flags())
    assert "Launch a sweep (e.g. Table 2) locally, on SLURM, or on a Cloud TPU VM slice." in result.stdout


if __name__ == "__main__":
    PAGE.write_text(regenerate(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
