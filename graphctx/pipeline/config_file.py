"""One YAML config for every entry point: train.py, evaluate.py and the ``graphctx`` subcommands.

It reads the YAML into the sections' settings dataclasses and hands them on as a
:class:`~graphctx.pipeline.run_config.RunConfig`; the Lightning modules are built from those settings
where they are needed (train.py), so reading and checking a config imports neither Lightning nor torch.

Keys: ``seed_everything``, ``cache_dir`` (the one graphctx cache folder), ``trainer`` (Lightning Trainer
arguments), ``model`` (``TunerSettings``), ``data`` (``DataModuleSettings``), ``retrieval``
(``RetrievalSettings``), ``knowledge`` (``KnowledgeSettings``), ``generation`` (``GenerationSettings``) and
``evaluation`` (``EvaluationSettings``). jsonargparse checks every key and type against those dataclasses,
so a typo or a wrong type fails with the key's dotted name.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from jsonargparse import ActionConfigFile, ArgumentParser, Namespace, get_loader, set_loader

from graphctx.checks import fields_of, nested_settings, problems
from graphctx.data.settings import DataModuleSettings, DatasetSettings, SplitSettings
from graphctx.data.splits import split_ranges
from graphctx.errors import ConfigError
from graphctx.evaluation_settings import EvaluationSettings
from graphctx.generation.settings import GenerationSettings
from graphctx.knowledge.backends import knowledge_source
from graphctx.knowledge.extractors import selected_extractors
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.metrics.registry import entries_named
from graphctx.model.settings import TunerSettings
from graphctx.pipeline.run_config import RunConfig
from graphctx.prompts import BASELINE_VARIANTS, VARIANTS, get_variants, retriever_variant
from graphctx.retrieval.registry import entry_named
from graphctx.retrieval.settings import RetrievalSettings

STAGE_SECTIONS: dict[str, type] = {
    "retrieval": RetrievalSettings,
    "knowledge": KnowledgeSettings,
    "generation": GenerationSettings,
    "evaluation": EvaluationSettings,
}


SETTINGS_SECTIONS: dict[str, type] = {
    "model": TunerSettings,
    "data": DataModuleSettings,
    **STAGE_SECTIONS,
}
"""Every section of settings dataclasses; :func:`check_settings` range-checks them (nested ones included)."""

SET_BY_RUN_CONFIG: frozenset[str] = frozenset({"model.spec.cache_dir", "knowledge.cache_dir"})
"""Fields that carry the resolved cache folder to the builders: the run config sets them from the top-level
``cache_dir``, so they are not config keys."""

MOVED_KEYS: dict[str, str] = {
    "data.cache_dir": "cache_dir",
    "model.spec.cache_dir": "cache_dir",
    "knowledge.cache_dir": "cache_dir",
    **{
        f"retrieval.{name}": f"retrieval.scale.{name}"
        for name in ("graph_build", "knn_k", "knn_nprobe", "knn_recall_sample", "ppr", "ppr_eps")
    },
}
"""Keys of older configs -> the key that replaced them."""


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
        dataset = fields_of(DatasetSettings, fields_of(DataModuleSettings, data).dataset or {})
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
        unknown = [name for name in names if name not in known and "@" not in name]
        for name in names:
            if "@" in name:
                try:
                    retriever_variant(name)
                except ValueError as error:
                    found.append(f"evaluation.variants: {error}")
        if unknown:
            choices = f"choose from {', '.join(known)}"
            found.append(f"evaluation.variants: unknown variant(s) {', '.join(unknown)}; {choices}")
        elif not names:
            found.append("evaluation.variants: empty; list variants, or null for all of them")
    if evaluation.callback_variant not in VARIANTS:
        choices = f"choose from {', '.join(VARIANTS)}"
        found.append(f"evaluation.callback_variant: unknown variant {evaluation.callback_variant}; {choices}")
    return found


def add_settings(parser: ArgumentParser, settings_class: type, key: str, hidden: set[str]) -> None:
    """Add the fields of ``settings_class`` under ``key``, all but the dotted names in ``hidden`` (relative
    to ``key``). jsonargparse's ``skip`` does not reach into nested dataclasses, so a class with a hidden
    field further down gets its nested settings added one by one, in field order."""
    deeper = {name.partition(".")[0] for name in hidden if "." in name}
    skip = {name for name in hidden if "." not in name}
    nested = nested_settings(settings_class) if deeper else {}
    parser.add_class_arguments(settings_class, key, skip=skip | set(nested) or None)
    for name, inner in nested.items():
        below = {hide.partition(".")[2] for hide in hidden if hide.startswith(f"{name}.")}
        add_settings(parser, inner, f"{key}.{name}", below)


def add_sections(parser: ArgumentParser) -> None:
    """Add ``cache_dir`` and every section of settings dataclasses (train.py's parser too)."""
    group = parser.add_argument_group("The graphctx cache folder, shared by every stage")
    group.add_argument(
        "--cache_dir",
        type=str | None,
        default=None,
        help="Converted and random models, datasets, embeddings and indexes, the KG store and caches, "
        "enhanced contexts; null = $GRAPHCTX_CACHE, else .cache/graphctx.",
    )
    group.add_argument(
        "--cache_max_bytes",
        type=int | None,
        default=None,
        help="Size cap of the cache folder: each new model, dataset, index or KG store entry first removes "
        "the least recently used entries until the cache fits; null = no cap.",
    )
    for name, settings_class in SETTINGS_SECTIONS.items():
        hidden = {key.partition(".")[2] for key in SET_BY_RUN_CONFIG if key.startswith(f"{name}.")}
        add_settings(parser, settings_class, name, hidden)


def check_moved_keys(content: dict[str, Any], overrides: Sequence[str] = ()) -> None:
    """Refuse a key of an older config (in the YAML ``content`` or a ``--key`` override), naming its new
    key."""
    for old, new in MOVED_KEYS.items():
        given = _holds(content, old) or any(
            arg == f"--{old}" or arg.startswith(f"--{old}=") for arg in overrides
        )
        if given:
            where = new if "." in new else f"the top-level {new} (one cache folder for every stage)"
            raise ConfigError(f"{old}: moved to {where}")


def _holds(content: Any, dotted: str) -> bool:
    """Whether the nested mapping ``content`` has the key ``dotted`` (``a.b.c``)."""
    for part in dotted.split("."):
        if not isinstance(content, dict) or part not in content:
            return False
        content = content[part]
    return True


class DuplicateKeyError(yaml.YAMLError):
    """A mapping of a YAML document gives one key twice (YAML's last copy would silently win)."""


MERGE_TAG = "tag:yaml.org,2002:merge"


def _refuse_duplicate_keys(node: yaml.Node | None, where: str = "", seen: set[int] | None = None) -> None:
    """Raise :class:`DuplicateKeyError` naming the first key given twice in a mapping of ``node`` (a
    composed document), by its dotted path and both lines. Mappings merged in with ``<<`` are walked too
    (a key twice inside one of them is refused), and so is a second ``<<`` in one mapping; a key given
    explicitly beside a merged one is YAML's own override, and allowed."""
    seen = set() if seen is None else seen
    if node is None or id(node) in seen:  # an alias repeats a node already walked
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        lines: dict[str, int] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            merge = key.tag == MERGE_TAG
            name = f"{where}{key.value}"
            line = key.start_mark.line + 1
            if key.value in lines:
                raise DuplicateKeyError(
                    f"key {name} is given twice (lines {lines[key.value]} and {line}); "
                    "YAML keeps the last silently: give it once"
                )
            lines[key.value] = line
            _refuse_duplicate_keys(value, where if merge else f"{name}.", seen)
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


def check_mapping(path: Path) -> dict[str, Any]:
    """The YAML mapping of ``path``; fail clearly when it is missing, is not a mapping, gives a key twice or
    an older config's key."""
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        content = load_unique_yaml(path.read_text())
    except DuplicateKeyError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {yaml_problem(exc)}") from exc
    if not isinstance(content, dict):
        raise ConfigError(
            f"{path}: a config must be a YAML mapping of sections, got {type(content).__name__}"
        )
    try:
        check_moved_keys(content)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return content


def yaml_problem(error: yaml.YAMLError) -> str:
    """One line for a YAML syntax error: where it is and what is wrong (PyYAML's own message spans five
    lines, with a copy of the text and a caret); two documents and a tab are named as such."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    if mark is None:
        return f"not valid YAML: {problem}"
    where = f"line {mark.line + 1}, column {mark.column + 1}"
    if "another document" in problem:
        return (
            f"holds a second YAML document ('---' at line {mark.line + 1}); a config is one document: "
            "remove the '---' line or split the file"
        )
    if "'\\t'" in problem:
        return f"not valid YAML: a tab at {where}; YAML indents with spaces only"
    return f"not valid YAML at {where}: {problem}"


def check_devices(config: dict[str, Any], prefix: str = "", present: int | None = None) -> None:
    """Fail, naming the setting, when ``config`` asks for a CUDA device this machine lacks: any
    ``device`` or ``*_device`` that is ``cuda`` or ``cuda:N``, or ``accelerator: gpu``/``cuda``, with no
    CUDA device, or a ``cuda:N`` with N at or beyond the ``present`` devices (default: torch's count, asked
    only when a setting names CUDA: torch is imported then, not before)."""
    wanted = cuda_settings(config, prefix)
    if wanted and present is None:
        import torch

        present = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for name, value in wanted:
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


def cuda_settings(config: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """``(dotted key, value)`` of every setting of ``config`` that asks for CUDA: a ``device`` or
    ``*_device`` that is ``cuda`` or ``cuda:N``, or ``accelerator: gpu``/``cuda``."""
    found = []
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            found += cuda_settings(value, f"{name}.")
            continue
        if not isinstance(value, str):
            continue
        is_device = key == "device" or key.endswith("_device")
        if (key == "accelerator" and value in ("gpu", "cuda")) or (
            is_device and (value == "cuda" or value.startswith("cuda:"))
        ):
            found.append((name, value))
    return found


TrainerValue = int | float | bool | str | list | dict | None
"""A ``trainer`` value as YAML types it: Lightning's Trainer checks the arguments themselves."""


CONFIG_KEYS: tuple[str, ...] = (
    "seed_everything",
    "trainer",
    "cache_dir",
    "cache_max_bytes",
    *SETTINGS_SECTIONS,
)
"""The top-level keys of a config."""


class ConfigFile(ActionConfigFile):
    """``--config PATH``: read the YAML config into the namespace. A missing file, a list or scalar YAML, a
    key given twice or moved, a key that is not a config key (a command's own option) and every problem
    jsonargparse finds in it are one :class:`ConfigError` named by the file."""

    def __call__(
        self, parser: ArgumentParser, cfg: Namespace, values: Any, option_string: Any = None
    ) -> None:
        path = Path(values)
        content = check_mapping(path)
        options = {action.dest for action in parser._actions}
        foreign = [key for key in content if key not in CONFIG_KEYS and key in options]
        if foreign:
            raise ConfigError(f"{path}: {foreign[0]} is a command-line option, not a config key")
        try:
            super().__call__(parser, cfg, values, option_string)
            parser.validate(cfg, skip_required=True)  # a key or value the file got wrong, named by it
        except Exception as exc:  # jsonargparse raises ArgumentError / ValueError / TypeError / KeyError
            raise ConfigError(f"{path}: {exc}") from exc


def add_config_arguments(parser: ArgumentParser, required: bool = True, what: str = "YAML config") -> None:
    """``--config`` (:class:`ConfigFile`, ``what`` its help) and every key of a config, each also a
    ``--section.key VALUE`` override: the parser of a config is this one, for every entry point."""
    use_unique_yaml()
    parser.add_argument("--config", action=ConfigFile, required=required, help=what)
    parser.add_argument("--seed_everything", type=int | bool, default=0)
    # plain values: loggers and callbacks stay class_path / init_args mappings, not imported (train.py's
    # LightningCLI checks them), while a dotted override (--trainer.num_nodes 2) is typed as YAML types it
    parser.add_argument("--trainer", type=dict[str, TrainerValue], default={})
    add_sections(parser)


def config_parser() -> ArgumentParser:
    """The parser of a whole config: ``--config`` plus every section's keys, checked against the classes."""
    parser = ArgumentParser(exit_on_error=False)
    add_config_arguments(parser)
    return parser


COMMAND_LINE = Path("(command line)")
"""The run config's ``path`` when no ``--config`` file was given."""


def load_config(
    path: str | Path, overrides: Sequence[str] = (), devices: bool | Sequence[str] = True
) -> RunConfig:
    """Parse and validate ``path`` (plus dotted ``--section.key value`` overrides) into a RunConfig, as the
    command line ``--config PATH --section.key value ...`` of any entry point gives it."""
    path = Path(path)
    check_moved_keys({}, overrides)
    parser = config_parser()
    try:
        parsed = parser.parse_args(["--config", str(path), *overrides])
    except ConfigError:
        raise
    except Exception as exc:  # jsonargparse raises ArgumentError / ValueError / TypeError
        raise ConfigError(f"{path}: {exc}") from exc
    return run_config(parsed, devices, parser)


def run_config(
    parsed: Namespace, devices: bool | Sequence[str] = True, parser: ArgumentParser | None = None
) -> RunConfig:
    """The RunConfig of a command line parsed with :func:`add_config_arguments` (the command's own options
    are left aside): its settings range-checked, its devices checked, its plug-ins imported; a problem is
    one :class:`ConfigError` named by the config file.

    ``devices``: refuse CUDA settings on a machine without CUDA (off for ``graphctx plan``, which describes
    a GPU config from a login node); a list of sections checks only theirs (a CPU command such as
    ``graphctx data`` runs a GPU config on a CPU node: ``trainer.accelerator: gpu`` is not its concern).
    ``parser``: the config parser that parsed it, reused to instantiate the settings (default: a new one)."""
    files = parsed.get("config") or []
    path = Path(str(files[-1])) if files else COMMAND_LINE
    given = parsed
    parsed = Namespace(config=files or None)
    for key in CONFIG_KEYS:
        parsed[key] = given[key]
    try:
        check_settings(parsed)
        if devices is True:
            check_devices(parsed.as_dict())
        elif devices:
            plain = parsed.as_dict()
            for section in devices:
                check_devices(plain.get(section) or {}, f"{section}.")
        settings = (parser or config_parser()).instantiate_classes(parsed)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except Exception as exc:  # jsonargparse raises ArgumentError / ValueError / TypeError
        raise ConfigError(f"{path}: {exc}") from exc
    config = RunConfig(
        path=path,
        seed_everything=settings.seed_everything,
        trainer=settings.trainer,
        cache=settings.cache_dir,
        cache_max_bytes=settings.cache_max_bytes,
        **{name: settings[name] for name in SETTINGS_SECTIONS},
    )
    try:  # plug-ins are imported and checked here, named by the file
        entries_named(
            config.metric_entries, config.evaluation.callback_metrics, "evaluation.callback_metrics"
        )
        knowledge_source(config.knowledge)
        selected_extractors(config.knowledge)
        for variant in get_variants(config.evaluation.variants):
            if variant.retrieval != "none":
                entry_named(config.retriever_entries, variant.retrieval, "evaluation.variants")
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return config
