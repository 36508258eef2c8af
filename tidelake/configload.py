"""Turn parsed TOML into frozen dataclasses, strictly.

Every dataclass field is a key; anything else is rejected with the list of valid keys. Values are checked
against the field's type hint (str, int, float, bool, Literal choices, tuples, str→str tables, nested
dataclasses, `X | None`). Strings get `${ENV_VAR}` expansion (`$$` is a literal `$`); a variable that is
not set is an error, never an empty string. Each dataclass may validate itself in `__post_init__` by
raising `ValueError`; the loader re-raises it as a `ConfigError` naming the key.
"""

from __future__ import annotations

import dataclasses
import os
import re
import types
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from tidelake.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")

_ENV_REF = re.compile(r"\$(\$|\{([A-Za-z_][A-Za-z0-9_]*)\})")


class Secret(str):
    """A string (password, token) that never shows its value in repr, logs or reports."""

    def __repr__(self) -> str:
        return "Secret('***')" if self else "Secret('')"

    def reveal(self) -> str:
        return str.__str__(self)


def expand_env(text: str, where: str, environ: Mapping[str, str] | None = None) -> str:
    """Replace `${NAME}` with the environment variable; `$$` stands for `$`."""
    env = os.environ if environ is None else environ

    def substitute(match: re.Match[str]) -> str:
        if match.group(1) == "$":
            return "$"
        name = match.group(2)
        if name not in env:
            raise ConfigError(f"{where}: environment variable {name} is not set (referenced as ${{{name}}})")
        return env[name]

    return _ENV_REF.sub(substitute, text)


def load_dataclass(cls: type[T], data: Any, where: str, environ: Mapping[str, str] | None = None) -> T:
    """Build dataclass `cls` from a TOML table; `where` is its dotted key path ("" for the top level)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where or 'config'}: expected a table, got {_describe(data)}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        plural = "s" if len(unknown) > 1 else ""
        raise ConfigError(
            f"{where or 'top level'}: unknown key{plural} {', '.join(map(repr, unknown))}; "
            f"valid keys: {', '.join(sorted(fields))}"
        )
    values: dict[str, Any] = {}
    for name, field in fields.items():
        key = f"{where}.{name}" if where else name
        if name in data:
            values[name] = _convert(hints[name], data[name], key, environ)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            if dataclasses.is_dataclass(hints[name]):
                values[name] = _convert(hints[name], {}, key, environ)
            else:
                raise ConfigError(f"{key}: required key is missing")
    try:
        return cls(**values)
    except ValueError as exc:
        raise ConfigError(f"{where or 'config'}: {exc}") from None


def _convert(hint: Any, value: Any, key: str, environ: Mapping[str, str] | None) -> Any:
    origin = get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _convert_union(hint, value, key, environ)
    if origin is Literal:
        choices = get_args(hint)
        if value not in choices:
            raise ConfigError(
                f"{key}: {value!r} is not a valid choice; valid choices: {', '.join(map(str, choices))}"
            )
        return value
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return load_dataclass(hint, value, key, environ)
    if origin is tuple:
        (item,) = get_args(hint)[:1]
        if isinstance(value, str) or not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {_describe(value)}")
        return tuple(_convert(item, v, f"{key}[{i}]", environ) for i, v in enumerate(value))
    if origin in (Mapping, dict) or hint is Mapping:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a table, got {_describe(value)}")
        return types.MappingProxyType(
            {str(k): _convert(get_args(hint)[1], v, f"{key}.{k}", environ) for k, v in value.items()}
        )
    return _convert_scalar(hint, value, key, environ)


def _convert_union(hint: Any, value: Any, key: str, environ: Mapping[str, str] | None) -> Any:
    """`X | Y | None`: None where allowed, else the first option the value converts to."""
    options = [a for a in get_args(hint) if a is not type(None)]
    if value is None and len(options) < len(get_args(hint)):
        return None
    errors = []
    for option in options:
        try:
            return _convert(option, value, key, environ)
        except ConfigError as exc:
            errors.append(str(exc))
    raise ConfigError(
        errors[0] if len(errors) == 1 else f"{key}: {_describe(value)} matches none of its types"
    )


def _convert_scalar(hint: Any, value: Any, key: str, environ: Mapping[str, str] | None) -> Any:
    """bool, int, float (an int is a float too, a bool is neither a number) and strings (with `${ENV}`)."""
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {_describe(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {_describe(value)}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key}: expected a number, got {_describe(value)}")
        return float(value)
    if hint in (str, Secret):
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {_describe(value)}")
        return hint(expand_env(value, key, environ))
    raise TypeError(f"config field {key} has an unsupported type {hint!r}")  # a bug in our dataclasses


def _describe(value: Any) -> str:
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list"}
    if isinstance(value, Mapping):
        return "a table"
    return f"{kind.get(type(value), type(value).__name__)} ({value!r})"
