"""One YAML config for every entry point: train.py, evaluate.py and the ``graphctx`` subcommands.

It reads the YAML into the sections' settings and modules and hands them on as a
:class:`~graphctx.pipeline.run_config.RunConfig`.

Sections: ``seed_everything``, ``trainer`` (Lightning Trainer arguments), ``model`` (``InstructionTuner``),
``data`` (``InstructionDataModule``), ``retrieval`` (``RetrievalSettings``), ``knowledge``
(``KnowledgeSettings``), ``generation`` (``GenerationSettings``) and ``evaluation``
(``EvaluationSettings``). jsonargparse checks every key and type
against those signatures, so a typo or a wrong type fails with the key's dotted name.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import yaml
from jsonargparse import ActionConfigFile, ArgumentParser, Namespace, get_loader, set_loader

from graphctx.checks import fields_of, problems
from graphctx.data.build import split_ranges
from graphctx.data.datamodule import InstructionDataModule
from graphctx.data.settings import DatasetSettings, SplitSettings
from graphctx.errors import ConfigError
from graphctx.evaluation_settings import EvaluationSettings
from graphctx.generation.settings import GenerationSettings
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.model import InstructionTuner
from graphctx.pipeline.run_config import RunConfig
from graphctx.prompts import BASELINE_VARIANTS, VARIANTS
from graphctx.retrieval.settings import RetrievalSettings
from graphctx.settings_docs import field_docstrings, settings_text

STAGE_SECTIONS: dict[str, type] = {
    "retrieval": RetrievalSettings,
    "knowledge": KnowledgeSettings,
    "generation": GenerationSettings,
    "evaluation": EvaluationSettings,
}


SETTINGS_SECTIONS: dict[str, type] = {
    "model": InstructionTuner,
    "data": InstructionDataModule,
    **STAGE_SECTIONS,
}
"""The sections whose values :func:`check_settings` range-checks (nested settings included)."""


def check_settings(config: Namespace) -> None:
    """Raise one :class:`ConfigError` naming every out-of-range or inconsistent setting of ``config`` (the
    parsed namespace, before any class is built; see :mod:`graphctx.checks`), each by its dotted key."""
    found = [
        problem
        for name, owner in SETTINGS_SECTIONS.items()
        if config.get(name) is not None
        for problem in problems(owner, config[name], f"{name}.")
    ]
    data = config.get("data")
    if data is not None:
        dataset = fields_of(DatasetSettings, fields_of(InstructionDataModule, data).dataset or {})
        try:
            split_ranges(fields_of(SplitSettings, dataset.split))
        except ConfigError as error:
            found.append(str(error))
    if config.get("evaluation") is not None:
        found += variant_problems(fields_of(EvaluationSettings, config.evaluation))
    if found:
        raise ConfigError(f"{len(found)} invalid setting(s): " + "; ".join(found))


def variant_problems(evaluation: Any) -> list[str]:
    """``evaluation.variants`` and ``evaluation.callback_variant`` name variants of
    :data:`graphctx.prompts.VARIANTS` or :data:`~graphctx.prompts.BASELINE_VARIANTS` (``variants``: at least
    one, or null for all of ``VARIANTS``; the callback decodes an LLM variant)."""
    found = []
    names = evaluation.variants
    known = VARIANTS | BASELINE_VARIANTS
    if names is not None:
        unknown = [name for name in names if name not in known]
        if unknown:
            choices = f"choose from {', '.join(known)}"
            found.append(f"evaluation.variants: unknown variant(s) {', '.join(unknown)}; {choices}")
        elif not names:
            found.append("evaluation.variants: empty; list variants, or null for all of them")
    if evaluation.callback_variant not in VARIANTS:
        choices = f"choose from {', '.join(VARIANTS)}"
        found.append(f"evaluation.callback_variant: unknown variant {evaluation.callback_variant}; {choices}")
    return found


def add_stage_sections(parser: ArgumentParser) -> None:
    """Add the ``retrieval``, ``knowledge``, ``generation`` and ``evaluation`` sections (train.py uses it as
    well)."""
    for name, settings_class in STAGE_SECTIONS.items():
        parser.add_class_arguments(settings_class, name)


class DuplicateKeyError(yaml.YAMLError):
    """A mapping of a YAML document gives one key twice (YAML's last copy would silently win)."""


def _refuse_duplicate_keys(node: yaml.Node | None, where: str = "", seen: set[int] | None = None) -> None:
    """Raise :class:`DuplicateKeyError` naming the first key given twice in a mapping of ``node`` (a
    composed document), by its dotted path and both lines; merge keys (``<<``) are YAML's own override."""
    seen = set() if seen is None else seen
    if node is None or id(node) in seen:  # an alias repeats a node already walked
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        lines: dict[str, int] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                name = f"{where}{key.value}"
                line = key.start_mark.line + 1
                if key.value in lines:
                    raise DuplicateKeyError(
                        f"key {name} is given twice (lines {lines[key.value]} and {line}); "
                        "YAML keeps the last silently: give it once"
                    )
                lines[key.value] = line
                _refuse_duplicate_keys(value, f"{name}.", seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _refuse_duplicate_keys(item, f"{where.removesuffix('.')}[{index}].", seen)


_JSONARGPARSE_YAML = get_loader("yaml")


def load_unique_yaml(text: str) -> Any:
    """jsonargparse's YAML loader (dates stay strings), refusing a key given twice in a mapping."""
    _refuse_duplicate_keys(yaml.compose(text, Loader=yaml.SafeLoader))
    return _JSONARGPARSE_YAML(text)


def use_unique_yaml() -> None:
    """Make every YAML jsonargparse reads (``--config`` files, YAML values on the command line) refuse a
    key given twice."""
    set_loader("yaml", load_unique_yaml, exceptions=(yaml.YAMLError,))


def check_mapping(path: Path) -> None:
    """Fail clearly when ``path`` is missing, is not a YAML mapping or gives a key twice."""
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        content = load_unique_yaml(path.read_text())
    except DuplicateKeyError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(content, dict):
        raise ConfigError(
            f"{path}: a config must be a YAML mapping of sections, got {type(content).__name__}"
        )


def check_devices(config: dict[str, Any], prefix: str = "", present: int | None = None) -> None:
    """Fail, naming the setting, when ``config`` asks for a CUDA device this machine lacks: any
    ``device`` or ``*_device`` that is ``cuda`` or ``cuda:N``, or ``accelerator: gpu``/``cuda``, with no
    CUDA device, or a ``cuda:N`` with N at or beyond the ``present`` devices (default: torch's count)."""
    if present is None:
        present = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            check_devices(value, f"{name}.", present)
            continue
        if not isinstance(value, str):
            continue
        is_device = key == "device" or key.endswith("_device")
        wants_cuda = (key == "accelerator" and value in ("gpu", "cuda")) or (
            is_device and (value == "cuda" or value.startswith("cuda:"))
        )
        if not wants_cuda:
            continue
        if present == 0:
            raise ConfigError(
                f"{name}: {value!r} asks for a GPU, but torch finds no CUDA device on this machine; "
                "use cpu (or auto)"
            )
        number = value.partition(":")[2]
        if number and (not number.isdigit() or int(number) >= present):
            raise ConfigError(
                f"{name}: {value!r} asks for a GPU this machine lacks: torch finds {present} CUDA "
                f"device(s), cuda:0 to cuda:{present - 1}"
            )


def config_parser() -> ArgumentParser:
    """The parser of a whole config: ``--config`` plus every section's keys, checked against the classes."""
    use_unique_yaml()
    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument("--config", action=ActionConfigFile)
    parser.add_argument("--seed_everything", type=int | bool, default=0)
    parser.add_argument("--trainer", type=dict[str, Any], default={})
    parser.add_class_arguments(InstructionTuner, "model")
    parser.add_class_arguments(InstructionDataModule, "data")
    add_stage_sections(parser)
    return parser


def settings_help() -> str:
    """Every config setting (``section.key``) with its type, default and docstring, as ``--help`` lists
    them: the sections of :func:`config_parser`."""
    with field_docstrings():
        sections = settings_text(config_parser())
    return "Config settings (YAML keys; train.py also takes them as --section.key VALUE):\n\n" + sections


def load_config(
    path: str | Path,
    overrides: Sequence[str] = (),
    devices: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
) -> RunConfig:
    """Parse and validate ``path`` (plus dotted ``--section.key value`` overrides) into a RunConfig.

    ``cache_dir``: a cache folder given on the command line, which wins over the config's.

    ``devices``: refuse CUDA settings on a machine without CUDA (off for ``graphctx plan``, which describes
    a GPU config from a login node)."""
    path = Path(path)
    check_mapping(path)
    parser = config_parser()
    try:
        parsed = parser.parse_args(["--config", str(path), *overrides])
        check_settings(parsed)
        if devices:
            check_devices(parsed.as_dict())
        objects = parser.instantiate_classes(parsed)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except Exception as exc:  # jsonargparse raises ArgumentError / ValueError / TypeError
        raise ConfigError(f"{path}: {exc}") from exc
    return RunConfig(
        path=path,
        **{
            name: objects[name]
            for name in (
                "seed_everything",
                "trainer",
                "model",
                "data",
                "retrieval",
                "knowledge",
                "generation",
                "evaluation",
            )
        },
        cache_override=cache_dir,
    )
