"""Classes from a user's package, named in a config LightningCLI style: ``{class_path: pkg.mod.Class,
init_args: {...}}`` (metrics, retrievers, knowledge sources). One loader for every registry, so each
refuses the same mistakes with the same one-line messages, naming the setting."""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from graphctx.errors import ConfigError, GraphctxError

Entry = TypeVar("Entry")


def import_class(class_path: str, where: str) -> type:
    """The class at ``package.module.Class`` (or ``package.module:Class``)."""
    module_name, _, attribute = class_path.replace(":", ".").rpartition(".")
    if not module_name:
        raise ConfigError(f"{where}: class_path {class_path!r} is not a dotted module.Class path")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(f"{where}: cannot import {module_name!r} ({error})") from error
    except Exception as error:  # the module's own code failed (a SyntaxError, a NameError...)
        raise ConfigError(f"{where}: importing {module_name!r} raised {describe(error)}") from error
    found = getattr(module, attribute, None)
    if not isinstance(found, type):
        raise ConfigError(f"{where}: {module_name!r} has no class {attribute!r}")
    return found


def load_plugin(
    item: Any, base: type[Entry], where: str, *args: Any, aliases: Mapping[str, str] | None = None
) -> Entry:
    """The ``base`` subclass ``item`` names, built as ``cls(*args, **init_args)``, with ``class_path`` and
    ``init_args`` set on it; ``aliases`` maps short names to class paths."""
    if not isinstance(item, Mapping) or not isinstance(item.get("class_path"), str):
        raise ConfigError(f"{where}: expected {{class_path: package.module.Class, init_args: {{...}}}}")
    unknown = sorted(set(item) - {"class_path", "init_args"})
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown} (class_path, init_args)")
    init_args = item.get("init_args") or {}
    if not isinstance(init_args, Mapping):
        raise ConfigError(f"{where}.init_args: expected a mapping of keyword arguments")
    class_path = (aliases or {}).get(item["class_path"], item["class_path"])
    cls = import_class(class_path, where)
    if not issubclass(cls, base):
        raise ConfigError(f"{where}: {class_path} is not a {base.__module__}.{base.__name__} subclass")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise ConfigError(f"{where}: {class_path} sets no name (a Python identifier)")
    try:
        entry = cls(*args, **init_args)
    except TypeError as error:
        raise ConfigError(f"{where}: {class_path}: bad init_args ({error})") from error
    except GraphctxError:
        raise
    except Exception as error:
        raise ConfigError(f"{where}: {class_path}(...) raised {describe(error)}") from error
    entry.class_path = class_path  # type: ignore[attr-defined]
    entry.init_args = dict(init_args)  # type: ignore[attr-defined]
    return entry


def load_plugins(
    items: Sequence[Any],
    base: type[Entry],
    section: str,
    taken: Collection[str],
    *args: Any,
    aliases: Mapping[str, str] | None = None,
) -> list[Entry]:
    """Every plug-in of the config list ``section`` (``items``), in order, each a ``base`` subclass whose
    ``name`` is not in ``taken`` nor used by an earlier one (:func:`load_plugin`)."""
    loaded: list[Entry] = []
    names = set(taken)
    for position, item in enumerate(items):
        where = f"{section}[{position}]"
        entry = load_plugin(item, base, where, *args, aliases=aliases)
        name = entry.name  # type: ignore[attr-defined]
        if name in names:
            raise ConfigError(f"{where}: name {name!r} of {entry.class_path} is taken")  # type: ignore[attr-defined]
        names.add(name)
        loaded.append(entry)
    return loaded


def describe(error: BaseException) -> str:
    """``Type: message`` on one line (``GRAPHCTX_DEBUG=1`` shows the traceback)."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def plugin_name(entry: Any) -> str:
    """How a plug-in is named in its errors: ``<name> (<class path>)``."""
    return f"{entry.name} ({getattr(entry, 'class_path', type(entry).__qualname__)})"


@contextlib.contextmanager
def running(what: str) -> Iterator[None]:
    """Run a plug-in's code: an exception it raises becomes one ``ConfigError`` line starting with ``what``
    (a graphctx error passes as it is)."""
    try:
        yield
    except GraphctxError:
        raise
    except Exception as error:
        raise ConfigError(f"{what}: raised {describe(error)}") from error


def checked_method(method: Callable[..., Any], check: Callable[[Any, Any, tuple], Any], kind: str) -> Any:
    """``method`` of a plug-in class, run under :func:`running` (named ``<kind> <plug-in>``) with its
    result passed through ``check(entry, result, args)``; set by the plug-in bases' ``__init_subclass__``."""

    @functools.wraps(method)
    def run(entry: Any, *args: Any) -> Any:
        with running(f"{kind} {plugin_name(entry)}"):
            result = method(entry, *args)
        return check(entry, result, args)

    run.checked = True  # type: ignore[attr-defined]
    return run


def package_sources(class_path: str) -> dict[str, str]:
    """The SHA-256 of every module source a plug-in may load from its user's package, by path: every ``.py``
    file under the folder of ``class_path``'s top-level package (recursively; ``__pycache__`` and hidden
    folders left out), or, when the top-level name is a single module, that file and the ``.py`` files
    beside it. A rule on files, not on what happens to be imported, so it is the same in every process;
    found with :func:`importlib.util.find_spec` of the top-level name, which runs none of the package's code.
    """
    import hashlib
    import importlib.util
    from pathlib import Path

    top = class_path.replace(":", ".").split(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None or (spec.origin is None and not spec.submodule_search_locations):
        raise ConfigError(f"{class_path}: no module {top!r} to fingerprint")
    if spec.submodule_search_locations:  # a package: every module under its folder(s)
        roots = [Path(folder) for folder in spec.submodule_search_locations]
        files = [(root.parent, path) for root in roots for path in sorted(root.rglob("*.py"))]
    else:  # a module: it and its neighbours
        root = Path(spec.origin).parent
        files = [(root, path) for path in sorted(root.glob("*.py"))]
    sources = {}
    for base, path in files:
        relative = path.relative_to(base)
        if not any(part == "__pycache__" or part.startswith(".") for part in relative.parts):
            sources[str(relative)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return sources


def source_fingerprint(entry: Any) -> dict[str, Any]:
    """A plug-in's identity: its class path, its ``init_args`` and the SHA-256 of the sources of its user's
    package (:func:`package_sources`), so an edit of any module the plug-in may import re-scores."""
    import hashlib
    import json

    sources = package_sources(entry.class_path)
    return {
        "class_path": entry.class_path,
        "init_args": entry.init_args,
        "source_sha256": hashlib.sha256(json.dumps(sources, sort_keys=True).encode()).hexdigest(),
    }


def config_plugin_sources(sections: Sequence[Sequence[Any]]) -> dict[str, dict[str, str]]:
    """Each plug-in class path of the config lists ``sections`` (``{class_path, init_args}`` items) → its
    :func:`package_sources`; a short alias of a built-in extension (no dot) is graphctx's own code."""
    paths = sorted(
        {
            item["class_path"]
            for items in sections
            for item in items
            if set(str(item["class_path"])) & {".", ":"}
        }
    )
    return {path: package_sources(path) for path in paths}
