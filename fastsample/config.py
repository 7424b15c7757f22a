"""Typed configs: one frozen dataclass per command, its fields the single source of the
command line, the checks, and what ranks must share.

    @dataclass(frozen=True)
    class TrainConfig:
        batch_size: int = option(1000, "seeds per rank per step", check=(lambda v: v > 0, "must be positive"))

``parser(TrainConfig, prog)`` makes an argparse parser with one flag per field
(``--batch-size``; bools are switches, tuples comma-separated), ``from_namespace`` builds
and checks the config, and a failed check is one ``ConfigError`` naming the field, which
the command line reports under the flag's name (``flag_message``). Fields marked
``shared`` must be equal on every rank of a job; fields marked ``resume`` must equal a
checkpoint's to continue from it.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Callable

from fastsample.cli import Parser

__all__ = ["ConfigError", "option", "parser", "parse", "from_namespace", "validate", "to_dict", "from_dict", "marked",
           "flag_message"]


class ConfigError(ValueError):
    """A setting out of range; ``field`` names it, ``rule`` says what it must be."""

    def __init__(self, field: str, rule: str):
        super().__init__(_join(field, rule))
        self.field, self.rule = field, rule


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


def _types(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _base(tp) -> Any:
    """The type under an optional annotation: int | None -> int; tuple[int, ...] as it is."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if type(None) in typing.get_args(tp) and len(args) == 1 else tp


def _parse_value(tp, text: str):
    tp = _base(tp)
    if typing.get_origin(tp) is tuple:
        return tuple(typing.get_args(tp)[0](v) for v in text.split(","))
    return tp(text)


def parser(cls, prog: str, description: str | None = None, epilog: str | None = None) -> Parser:
    """An argparse parser with one flag per field of ``cls`` (its help, choices, default)."""
    p = Parser(prog=prog, description=description, epilog=epilog)
    types = _types(cls)
    for f in dataclasses.fields(cls):
        m, flag = f.metadata, "--" + f.name.replace("_", "-")
        tp = _base(types[f.name])
        kw = dict(help=m.get("help", ""), dest=f.name)
        if tp is bool:
            p.add_argument(flag, action="store_true", **kw)
            continue
        if m.get("positional"):
            p.add_argument(f.name, help=kw["help"], type=str)
            continue
        if f.default is dataclasses.MISSING:
            kw["required"] = True
        else:
            kw["default"] = f.default
            if typing.get_origin(tp) is tuple and f.default is not None:
                kw["default"] = ",".join(str(v) for v in f.default)
        if m.get("choices"):
            kw["choices"] = m["choices"]
        if m.get("metavar"):
            kw["metavar"] = m["metavar"]
        kw["type"] = str  # converted by from_namespace, so a bad value is one ConfigError naming the field
        p.add_argument(flag, **kw)
    return p


def from_namespace(cls, ns) -> Any:
    """Build ``cls`` from a parsed namespace (strings converted by the field types) and check it."""
    types, values = _types(cls), {}
    for f in dataclasses.fields(cls):
        v = getattr(ns, f.name)
        if isinstance(v, str) and types[f.name] is not str:
            try:
                v = _parse_value(types[f.name], v)
            except ValueError:
                expect = f.metadata.get("expect") or f"a{'n' if _name(types[f.name])[0] in 'aeiou' else ''} " \
                    f"{_name(types[f.name])}"
                raise ConfigError(f.name, f": expected {expect} (got {v!r})") from None
        values[f.name] = v
    return cls(**values)


def parse(cls, parser, argv=None) -> Any:
    """Parse ``argv`` with ``parser`` (made by parser(cls, ...)) into a checked ``cls``; a bad
    setting exits 2 with one line naming its flag (Parser.error)."""
    try:
        return from_namespace(cls, parser.parse_args(argv))
    except ConfigError as e:
        parser.error(flag_message(e))


def _name(tp) -> str:
    tp = _base(tp)
    return getattr(tp, "__name__", str(tp))


def validate(config) -> None:
    """Run every field's check (the dataclass's __post_init__ calls this)."""
    for f in dataclasses.fields(config):
        check = f.metadata.get("check")
        v = getattr(config, f.name)
        if check and v is not None and not check[0](v):
            raise ConfigError(f.name, f"{check[1]} (got {_show(v)})")
        choices = f.metadata.get("choices")
        if choices and v not in choices:
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
    types, names = _types(cls), {f.name for f in dataclasses.fields(cls)}
    values = {}
    for k, v in d.items():
        if k in names:
            values[k] = tuple(v) if isinstance(v, list) and typing.get_origin(_base(types[k])) is tuple else v
    return cls(**values)


def flag_message(error: ConfigError) -> str:
    """A ConfigError in a command line's words: the field's flag in place of its name."""
    return _join("--" + error.field.replace("_", "-"), error.rule)
