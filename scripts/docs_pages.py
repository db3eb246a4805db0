"""mkdocs hook: the parts of the documentation site that are generated when it is built, so they cannot drift.

mkdocs.yml names this module under ``hooks:``. A page asks for generated text with a marker line:

- ``<!-- usage: graphctx index -->`` (or ``python train.py``, ``python evaluate.py``): the command's real
  ``--help`` output, run as a fresh process at build time. A command that lists the config settings in its
  help is shown up to them; the settings themselves are the config reference's.
- ``<!-- config-reference -->``: every config setting (``section.key``), its type, default and
  documentation, parsed from the help of :func:`graphctx.pipeline.config_file.config_parser` (the text
  ``--help`` prints, built from the settings classes' attribute docstrings).

``python scripts/docs_pages.py`` prints the command pages' marker lines the site expects (one per command:
train.py, evaluate.py and every ``graphctx`` subcommand of :data:`graphctx.cli.COMMANDS`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
USAGE = re.compile(r"^<!-- usage: (.+?) -->$", re.M)
REFERENCE = "<!-- config-reference -->"
SETTINGS_HEAD = "The graphctx cache folder"
"""The group that starts the settings part of a config command's ``--help`` (config_file.add_sections)."""
WIDTH = "100"
"""``COLUMNS`` for every help text: the same wrapping on any terminal."""


def commands() -> list[str]:
    """Every command that has a page: the two scripts, then the ``graphctx`` subcommands in CLI order."""
    sys.path.insert(0, str(REPO))
    from graphctx.cli import COMMANDS

    return ["python train.py", "python evaluate.py", *(f"graphctx {name}" for name in COMMANDS)]


def page_name(command: str) -> str:
    """``commands/<name>.md`` of a command: ``train``, ``evaluate``, ``retrieval-eval``, ...
    (``graphctx index`` is ``index-command``: ``commands/index.md`` is the section's own page)."""
    name = command.split()[-1].removesuffix(".py")
    return "index-command" if name == "index" else name


SUBCOMMANDS = ("graphctx annotate export", "graphctx annotate import")
"""Commands of a command that have a usage of their own."""
SEPARATOR = "\n\x1e--graphctx-docs-help--\x1e\n"
"""Between two help texts in :func:`print_helps`' output."""


def print_helps(names: list[str]) -> None:
    """Print ``--help`` of each of ``evaluate.py`` and the ``graphctx`` subcommands ``names``, through
    their ``main()`` as the command line calls it, one process for all (they share its imports)."""
    import contextlib
    import io

    import evaluate
    from graphctx.cli import main

    sys.argv[0] = "evaluate.py"  # its parser's prog
    for name in names:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            evaluate.main(["--help"]) if name == "evaluate.py" else main([*name.split(), "--help"])
        sys.stdout.write(out.getvalue() + SEPARATOR)


def run_help(argv: list[str]) -> str:
    """stdout of ``argv`` run from the repository root (offline, fixed width)."""
    env = {**os.environ, "COLUMNS": WIDTH, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


@cache
def help_texts() -> dict[str, str]:
    """Every command's ``--help`` by command: train.py as its own process (LightningCLI), the others from
    one process running :func:`print_helps`; both at once."""
    others = [c for c in commands() if c != "python train.py"] + list(SUBCOMMANDS)
    names = [c.split(maxsplit=1)[1] for c in others]
    script = f"import sys; sys.path.insert(0, {str(REPO / 'scripts')!r}); import docs_pages; "
    script += f"docs_pages.print_helps({names!r})"
    with ThreadPoolExecutor(max_workers=2) as pool:
        train = pool.submit(run_help, [sys.executable, "train.py", "--help"])
        rest = pool.submit(run_help, [sys.executable, "-c", script])
        texts = dict(zip(others, rest.result().split(SEPARATOR), strict=False))
        texts["python train.py"] = train.result()
    return texts


def help_text(command: str) -> str:
    """``command --help`` as the command line prints it."""
    return help_texts()[command]


def usage_markdown(command: str) -> str:
    """The help as a code block; its config-settings part (every group from the cache folder's on) is
    replaced by a link to the reference when it lists every setting, else shown in a folded note."""
    text = help_text(command)
    head, found, rest = text.partition(f"\n{SETTINGS_HEAD}")
    text, settings = head, (SETTINGS_HEAD + rest if found else "")
    block = f"```text\n$ {command} --help\n{text.rstrip()}\n```\n"
    if not settings:
        return block
    if every_setting_listed(settings):
        return block + (
            "\nIts help then lists every config setting with its documentation: see the "
            "[config reference](../reference/config.md).\n"
        )
    fenced = f"```text\n{settings.rstrip()}\n```"
    return block + f'\n??? note "The config settings it reads"\n\n{indent(fenced)}\n'


def indent(text: str) -> str:
    """Four spaces before every non-empty line (a block inside an admonition)."""
    return "\n".join("    " + line if line else "" for line in text.splitlines())


def every_setting_listed(settings: str) -> bool:
    """Whether a help's settings part names every key of the config reference."""
    listed = set(re.findall(r"^\s+--(\S+)", settings, re.M))
    return {s.key for section in reference_sections() for s in section.settings} <= listed


@dataclass
class Setting:
    """One config key as ``--help`` documents it."""

    key: str
    doc: str
    type: str
    default: str


@dataclass
class Section:
    """A settings class under its dotted key (``""``: top-level keys)."""

    key: str
    title: str
    settings: list[Setting]


@cache
def reference_sections() -> list[Section]:
    """The config parser's help (every setting with its docstring, as each command's ``--help`` lists
    them), section by section, its first group (``-h``, ``--config``, ``--trainer``) left out (``COLUMNS``
    wide enough that nothing wraps)."""
    sys.path.insert(0, str(REPO))
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100000"
    try:
        from graphctx.pipeline.config_file import config_parser
        from graphctx.settings_docs import field_docstrings

        with field_docstrings():
            text = config_parser().format_help()
        text = text[text.index("\n\n", text.index("options:")) :]  # from the first settings group on
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    return [parse_section(block) for block in text.split("\n\n")[1:] if block.strip()]


def parse_section(block: str) -> Section:
    """``Title:`` then ``  --key METAVAR  doc (type: T, default: D)`` lines (continuations indented)."""
    title, *lines = block.splitlines()
    entries: list[list[str]] = []
    for line in lines:
        if line.startswith("  --"):
            entries.append([line.strip()])
        else:
            entries[-1].append(line.strip())
    settings, key = [], ""
    for entry in entries:
        match = re.match(r"--(\S+)(?: (\{[^}]*\}|[A-Z_]+))?\s*(.*)", " ".join(entry))
        name, choices, doc = match.groups()
        if choices == "CONFIG":  # the section's own "--model.spec CONFIG  Path to a configuration file."
            key = name
            continue
        doc, _, typed = doc.rpartition(" (type: ")
        kind, _, default = typed.removesuffix(")").rpartition(", default: ")
        settings.append(Setting(name, doc, kind, default))
    if not key and settings:
        key = settings[0].key.rpartition(".")[0]
    return Section(key, title.removesuffix(":"), settings)


def rst_to_markdown(text: str) -> str:
    """Docstring markup as Markdown: ``x`` is `x`; outside code, ``<``, ``*`` and ``_`` stay text."""
    parts = re.split(r"(``.+?``)", text)
    return "".join(
        f"`{part[2:-2]}`" if part.startswith("``") else re.sub(r"([*_])", r"\\\1", part).replace("<", "&lt;")
        for part in parts
    )


def reference_markdown() -> str:
    """Every section as a heading (its dotted key) and its keys as a list: key, type, default, doc."""
    out = []
    for section in reference_sections():
        out.append(f"## `{section.key}`\n" if section.key else "## Top-level keys\n")
        out.append(f"{rst_to_markdown(section.title)}.\n")
        for s in section.settings:
            out.append(f"- **`{s.key}`** (`{s.type}`; default `{s.default}`)<br>\n  {rst_to_markdown(s.doc)}")
        out.append("")
    return "\n".join(out)


def on_pre_build(config: Any) -> None:
    """Generate every help text and the reference once per build (``mkdocs serve`` rebuilds anew)."""
    help_texts.cache_clear()
    reference_sections.cache_clear()
    help_texts()
    reference_sections()


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace the markers of a page with their generated text."""
    markdown = USAGE.sub(lambda m: usage_markdown(m.group(1)), markdown)
    return markdown.replace(REFERENCE, reference_markdown())


if __name__ == "__main__":
    for command in commands():
        print(f"commands/{page_name(command)}.md: <!-- usage: {command} -->")
