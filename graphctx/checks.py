"""Range checks of settings, every problem of a whole config reported at once.

A settings class declares ``RANGES: ClassVar[dict[str, Range]]`` (field -> allowed interval) and, for
checks across fields, a static ``consistency(value) -> list[tuple[str, str]]`` of ``(field, problem)``.
:func:`problems` walks a class and its nested settings (dataclass fields, or ``__init__`` parameters typed
with a dataclass) over either built objects or the jsonargparse namespace they will be built from, so the
entry points can check the whole config before anything is instantiated, let alone loaded
(``graphctx.pipeline.config_file.check_settings``). A settings dataclass also checks its own fields when
built in code: its ``__post_init__`` calls :func:`check_own_fields` (a mix-in base class would hide the field
types from jsonargparse, which then validates nothing).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import typing
from dataclasses import dataclass
from functools import cache
from types import SimpleNamespace
from typing import Any

from graphctx.errors import ConfigError


@dataclass(frozen=True)
class Range:
    """The interval a number must lie in; ``None`` bounds are open-ended."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    """Exclude ``low`` itself."""
    high_open: bool = False
    """Exclude ``high`` itself."""

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.low is None:
            return f"{'<' if self.high_open else '<='} {self.high:g}"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"in {left}{self.low:g}, {self.high:g}{right}"

    def contains(self, value: float) -> bool:
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return above and below


POSITIVE = Range(0, low_open=True)
NON_NEGATIVE = Range(0)
AT_LEAST_ONE = Range(1)
OPEN_UNIT = Range(0, 1, low_open=True, high_open=True)
"""(0, 1)"""


def check_own_fields(settings: Any) -> None:
    """Raise one :class:`ConfigError` listing every field of ``settings`` (not of its nested settings)
    that is out of range or inconsistent."""
    found = problems(type(settings), settings, "", nested=False)
    if found:
        raise ConfigError(f"{type(settings).__name__}: " + "; ".join(found))


@cache
def nested_settings(owner: type) -> dict[str, type]:
    """``name -> settings class`` of the fields (dataclasses) or ``__init__`` parameters (other classes)
    of ``owner`` whose type is a settings dataclass (``X`` or ``X | None``)."""
    target = owner if dataclasses.is_dataclass(owner) else owner.__init__
    hints = typing.get_type_hints(target)
    names = (
        [f.name for f in dataclasses.fields(owner)]
        if dataclasses.is_dataclass(owner)
        else list(inspect.signature(owner.__init__).parameters)
    )
    found = {}
    for name in names:
        candidates = typing.get_args(hints.get(name)) or (hints.get(name),)
        classes = [c for c in candidates if isinstance(c, type) and dataclasses.is_dataclass(c)]
        if classes:
            found[name] = classes[0]
    return found


def settings_of(value: Any) -> Any:
    """The fields of a settings value: jsonargparse keeps a class-typed value as ``class_path`` plus
    ``init_args``; a built object or a plain namespace is returned as it is."""
    init_args = getattr(value, "init_args", None)
    return init_args if init_args is not None and hasattr(value, "class_path") else value


@cache
def field_defaults(owner: type) -> dict[str, Any]:
    """Field (or ``__init__`` parameter) name -> default value of ``owner``; ``None`` where there is none."""
    if dataclasses.is_dataclass(owner):
        return {
            f.name: f.default
            if f.default is not dataclasses.MISSING
            else f.default_factory()
            if f.default_factory is not dataclasses.MISSING
            else None
            for f in dataclasses.fields(owner)
        }
    parameters = list(inspect.signature(owner.__init__).parameters.values())[1:]
    return {p.name: None if p.default is inspect.Parameter.empty else p.default for p in parameters}


def fields_of(owner: type, value: Any) -> Any:
    """``value`` with every field of ``owner`` readable as an attribute: a built ``owner`` as it is; a
    namespace or a partial dict (how jsonargparse holds settings nested in settings) with the fields it
    lacks filled in from ``owner``'s defaults."""
    value = settings_of(value)
    if isinstance(value, owner):
        return value
    if isinstance(value, dict):
        return SimpleNamespace(**{n: value.get(n, d) for n, d in field_defaults(owner).items()})
    return SimpleNamespace(**{n: getattr(value, n, d) for n, d in field_defaults(owner).items()})


def problems(owner: type, value: Any, prefix: str, nested: bool = True) -> list[str]:
    """``"<prefix><field>: problem"`` for every float field of ``value`` (an ``owner`` object or its
    namespace, see :func:`fields_of`) that is nan or ±inf, every out-of-range field and, with ``nested``,
    the same of its nested settings; ``None`` values are not checked."""
    found = []
    value = fields_of(owner, value)
    for name in field_defaults(owner):
        number = getattr(value, name, None)
        if isinstance(number, float) and not math.isfinite(number):
            found.append(f"{prefix}{name}: must be a finite number, got {number!r}")
    for name, allowed in getattr(owner, "RANGES", {}).items():
        number = getattr(value, name, None)
        if isinstance(number, bool) or not isinstance(number, int | float) or not math.isfinite(number):
            continue  # None (a default that means "off"/"auto"), a wrong type jsonargparse reports, nan/inf
        if not allowed.contains(number):
            found.append(f"{prefix}{name}: must be {allowed}, got {number!r}")
    consistency = getattr(owner, "consistency", None)
    if consistency is not None:
        found += [f"{prefix}{name}: {problem}" for name, problem in consistency(value)]
    if nested:
        for name, settings in nested_settings(owner).items():
            inner = getattr(value, name, None)
            if inner is not None:
                found += problems(settings, inner, f"{prefix}{name}.")
    return found
