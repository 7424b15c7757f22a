"""Typed configs: one frozen dataclass per command, its fields the single source of the
checks, of what ranks must share, and (fastsample/cli.py) of the command line.

    @dataclass(frozen=True)
    class TrainConfig:
        batch_size: int = option(1000, "seeds per rank per step", check=(lambda v: v > 0, "must be positive"))

A failed check is one ``ConfigError`` naming the field (a command line says the flag
instead: cli.flag_message). Fields marked ``shared`` must be equal on every rank of a job;
fields marked ``resume`` must equal a checkpoint's to continue from it. This module is the
schema only: it imports no command-line code, so the library can build configs too.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Callable

__all__ = ["ConfigError", "option", "validate", "to_dict", "from_dict", "marked", "field_types", "base_type",
           "type_name"]


class ConfigError(ValueError):
    """A setting out of range; ``field`` names it, ``rule`` says what it must be."""

    def __init__(self, field: str, rule: str):
        super().__init__(_join(field, rule))
        self.field, self.rule = field, rule

    def __reduce__(self):  # crosses ranks in the start-up agreement (comm/agree.py)
        return ConfigError, (self.field, self.rule)

    def worded(self, name: str) -> str:
        """The message with ``name`` (e.g. the field's flag) in place of the field."""
        return _join(name, self.rule)


def _join(name: str, rule: str) -> str:
    """'batch_size must be ...', or 'fanouts: expected ...' for a rule that starts with a colon."""
    return f"{name}{'' if rule.startswith(':') else ' '}{rule}"


def option(default: Any = dataclasses.MISSING, help: str = "", *, positional: bool = False, shared: bool = True,
           resume: bool = False,
           choices: tuple | None = None, metavar: str | None = None, expect: str | None = None,
           check: tuple[Callable[[Any], bool], str] | None = None) -> Any:
    """A config field with its command-line help and checks.

    Args:
        default: the value when the flag is absent (MISSING: a required flag).
        help: the flag's help text.
        positional: a positional argument (named by the field) instead of a flag.
        shared: every rank of a job must have the same value (checked at start-up).
        resume: a checkpoint must have been saved with the same value to resume from it.
        choices: the allowed values.
        metavar: the placeholder --help shows.
        expect: what a value looks like, for the error when one does not parse.
        check: (predicate, rule): ``predicate(value)`` must hold, else ConfigError(field, rule).
    """
    meta = dict(help=help, positional=positional, shared=shared, resume=resume, choices=choices, metavar=metavar, expect=expect, check=check)
    return dataclasses.field(default=default, metadata=meta)


def field_types(cls) -> dict[str, Any]:
    """Each field's annotation, resolved."""
    return typing.get_type_hints(cls)


def base_type(tp) -> Any:
    """The type under an optional annotation: int | None -> int; tuple[int, ...] as it is."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if type(None) in typing.get_args(tp) and len(args) == 1 else tp


def type_name(tp) -> str:
    """int for int | None, tuple for tuple[int, ...]: what a message calls the type."""
    tp = base_type(tp)
    return getattr(tp, "__name__", str(tp))


def validate(config) -> None:
    """Run every field's check (the dataclass's __post_init__ calls this)."""
    for f in dataclasses.fields(config):
        check = f.metadata.get("check")
        v = getattr(config, f.name)
        if isinstance(v, float) and not math.isfinite(v):  # nan passes every comparison's negation; inf most
            raise ConfigError(f.name, f"must be a finite number (got {v})")
        if check and v is not None and not check[0](v):
            raise ConfigError(f.name, f"{check[1]} (got {_show(v)})")
        choices = f.metadata.get("choices")
        if choices and v not in choices and not (v is None and f.default is None):  # None: "the default"
            raise ConfigError(f.name, f"must be one of {', '.join(map(str, choices))} (got {v!r})")


def _show(v) -> str:
    return ",".join(map(str, v)) if isinstance(v, tuple) else repr(v)


def marked(cls_or_config, key: str) -> tuple[str, ...]:
    """Names of the fields marked ``key`` ("shared" or "resume")."""
    return tuple(f.name for f in dataclasses.fields(cls_or_config) if f.metadata.get(key))


def to_dict(config) -> dict:
    """Plain values only (a checkpoint stores this; torch's weights-only loader reads it)."""
    return dataclasses.asdict(config)


def from_dict(cls, d: dict) -> Any:
    """The config a to_dict() came from; unknown keys (an older version's) are dropped, tuples
    restored from lists, missing fields take their defaults."""
    types, names = field_types(cls), {f.name for f in dataclasses.fields(cls)}
    values = {}
    for k, v in d.items():
        if k in names:
            values[k] = tuple(v) if isinstance(v, list) and typing.get_origin(base_type(types[k])) is tuple else v
    return cls(**values)
