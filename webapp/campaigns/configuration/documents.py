"""The format's shape, YAML read with the line of every field, and the canonical text.

The shapes below are the format (version 1): their keys, in the order export writes them,
are all a file may hold. docs/configuration-as-code.md describes each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from webapp.campaigns.models import AXES, CAMPAIGN_PARAMETER_FIELDS

FORMAT_VERSION = 1

# Kinds of value a field holds. TEXT and SCALAR take a text or a number (a name such as 2026
# is read as a number by YAML: it is meant as text); the forms then parse and bound them.
TEXT, SCALAR, BOOL, LIST, MAP = "text", "scalar", "bool", "list", "map"


@dataclass(frozen=True)
class Shape:
    """One kind of mapping of the format: its fields (kinds, in canonical order) and those
    it must have."""

    what: str
    fields: dict[str, str]
    required: tuple[str, ...] = ("name",)


FILE = Shape(
    "the file",
    {"version": SCALAR, "vantage_points": LIST, "sites": LIST, "campaigns": LIST},
    required=("version",),
)
VANTAGE_POINT = Shape(
    "a vantage point",
    {"name": TEXT, "location": TEXT, "description": TEXT, "max_parallel_runs": SCALAR},
)
SITE = Shape(
    "a site",
    {"name": TEXT, "tier": TEXT, "storage_system": TEXT, "location": TEXT, "endpoints": LIST},
)
ENDPOINT = Shape(
    "an endpoint",
    {
        "name": TEXT,
        "protocol": TEXT,
        "base_url": TEXT,
        "role": TEXT,
        "enabled": BOOL,
        "credential_hosts": LIST,
        "scratch_path": TEXT,
        "test_files": LIST,
    },
    required=("name", "protocol", "base_url"),
)
TEST_FILE = Shape(
    "a test file",
    {"path": TEXT, "size": SCALAR, "adler32": TEXT, "is_default": BOOL},
    required=("path", "size"),
)
CAMPAIGN = Shape(
    "a campaign",
    {
        "name": TEXT,
        "description": TEXT,
        "endpoints": LIST,
        "test_files": LIST,
        "vantage_points": LIST,
        "destination_endpoint": TEXT,
        "trace": TEXT,
        "parameters": MAP,
        "schedule": TEXT,
        "schedule_tz": TEXT,
        "schedule_slip_s": SCALAR,
    },
    required=("name", "endpoints", "parameters"),
)
PARAMETERS = Shape(
    "a campaign's parameters",
    {
        name: LIST if name in {p.campaign_field for p in AXES} else SCALAR
        for name in CAMPAIGN_PARAMETER_FIELDS
    },
    # Files written before operations existed name no operations: they read.
    required=tuple(p.campaign_field for p in AXES if p.campaign_field != "operations"),
)
# A campaign's endpoints given by what they are rather than by name (resolved on import).
ENDPOINT_SELECTOR = Shape(
    "an endpoint selector", {"site": TEXT, "protocol": TEXT, "role": TEXT}, required=()
)
TEST_FILE_REFERENCE = Shape(
    "a test file of the campaign", {"endpoint": TEXT, "path": TEXT}, required=("endpoint", "path")
)

_KIND_WORDS = {
    TEXT: "a text",
    SCALAR: "a text or a number",
    BOOL: "true or false",
    LIST: "a list",
    MAP: "a mapping",
}

# The canonical style: block lists and mappings, keys in the order written (the shapes'),
# unicode as it is, lines folded at a fixed width. The same values always give the same bytes.
_STYLE: dict[str, Any] = {
    "sort_keys": False,
    "default_flow_style": False,
    "allow_unicode": True,
    "width": 100,
}


def canonical_yaml(document: dict[str, Any]) -> str:
    text: str = yaml.safe_dump(document, **_STYLE)
    return text


@dataclass(frozen=True)
class ConfigError:
    """What is wrong at one place of a file: its line (from 1), the field's path
    (campaigns[0].parameters.read_sizes[1]) and why. `forbidden`: the file is valid but the
    user may not make this change."""

    line: int
    path: str
    message: str
    forbidden: bool = False

    def text(self, source: str) -> str:
        where = f" {self.path}:" if self.path else ""
        return f"{source}:{self.line}:{where} {self.message}"

    def as_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "path": self.path,
            "message": self.message,
            "forbidden": self.forbidden,
        }


@dataclass(frozen=True)
class Located:
    """A file's values, with the line of each field (or list item) by its path."""

    value: Any
    lines: dict[str, int]

    def line(self, path: str) -> int:
        """The line of `path`, else of its nearest enclosing field (a missing key: its
        mapping's)."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = _parent(path)
        return self.lines.get("", 1)


def _parent(path: str) -> str:
    cut = max(path.rfind("."), path.rfind("["))
    return path[:cut] if cut > 0 else ""


def child(path: str, key: str | int) -> str:
    """The path of a mapping's field or a list's item."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


# libyaml's parser where PyYAML has it (ten times faster), else PyYAML's own: the same nodes
# with the same marks.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# A file expanding to more values than this is refused: aliases (&a, *a) nest exponentially.
MAX_VALUES = 200_000


class _Reader:
    """Turns composed YAML nodes into plain values, noting each one's line."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.lines: dict[str, int] = {}
        self.errors: list[ConfigError] = []
        self.count = 0

    def value(self, node: yaml.Node, path: str) -> Any:
        self.count += 1
        if self.count > MAX_VALUES:
            raise _TooLarge
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.value(item, child(path, i)) for i, item in enumerate(node.value)]
        return self.loader.construct_object(node)

    def _mapping(self, node: yaml.MappingNode, path: str) -> dict[str, Any]:
        self.loader.flatten_mapping(node)  # merge keys (<<: *defaults)
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self.loader.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                self.errors.append(ConfigError(line, path, f"field names are texts, not {key!r}"))
                continue
            at = child(path, key)
            if key in mapping:
                self.errors.append(ConfigError(line, at, "given twice in one mapping"))
                continue
            self.lines[at] = line
            mapping[key] = self.value(value_node, at)
        return mapping


class _TooLarge(Exception):
    pass


def read_yaml(text: str) -> tuple[Located | None, list[ConfigError]]:
    """The file's one YAML document with its lines, or the errors that stop it being read."""
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, [
                ConfigError(1, "", f"empty: a file starts with version: {FORMAT_VERSION}")
            ]
        reader = _Reader(loader)
        value = reader.value(node, "")
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        return None, [ConfigError(line, "", f"not valid YAML: {exc.problem or exc.context}")]
    except yaml.YAMLError as exc:
        return None, [ConfigError(1, "", f"not valid YAML: {exc}")]
    except (_TooLarge, RecursionError):
        return None, [ConfigError(1, "", f"too large: more than {MAX_VALUES} values once expanded")]
    finally:
        loader.dispose()
    return Located(value, reader.lines), reader.errors


def shape_errors(
    value: Any, path: str, shape: Shape, located: Located
) -> tuple[list[ConfigError], bool]:
    """What is wrong with a mapping's form (not its values: the forms judge those): unknown
    or missing fields, and values of the wrong kind; and whether its values can still be
    judged (only unknown fields are wrong)."""
    if not isinstance(value, dict):
        return [ConfigError(located.line(path), path, f"{shape.what} must be a mapping")], False
    errors = []
    for key in value:
        if key not in shape.fields:
            known = ", ".join(shape.fields)
            at = child(path, key)
            errors.append(ConfigError(located.line(at), at, f"unknown field (known: {known})"))
    judged = len(errors)
    for key in shape.required:
        if value.get(key) is None:
            at = child(path, key)
            errors.append(ConfigError(located.line(at), at, f"{shape.what} needs it"))
    for key, kind in shape.fields.items():
        item = value.get(key)
        if item is not None and not is_kind(item, kind):
            at = child(path, key)
            errors.append(ConfigError(located.line(at), at, f"must be {_KIND_WORDS[kind]}"))
    return errors, len(errors) == judged


def is_kind(value: Any, kind: str) -> bool:
    if kind == BOOL:
        return isinstance(value, bool)
    if kind == LIST:
        return isinstance(value, list)
    if kind == MAP:
        return isinstance(value, dict)
    scalar = isinstance(value, int | float | str) and not isinstance(value, bool)
    return scalar and (kind == SCALAR or isinstance(value, str | int))


def as_text(value: Any) -> str:
    """A TEXT or SCALAR field's value as a form reads it ("" for none)."""
    return "" if value is None else str(value)
