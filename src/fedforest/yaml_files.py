"""Reading fedforest's YAML files (``job.yaml``, a site's YAML, ``local/fedforest.yaml``).

PyYAML's safe loader keeps the last of two equal keys in a mapping, so a
second ``forest:`` block, or a ``job:`` pasted twice, silently replaces the
first and the mistake surfaces later as a wrong value of some other key.
:func:`load_yaml` uses the safe loader (no Python objects are ever built)
and refuses, naming the file, the line and the key's path:

* a key that appears twice in one mapping (both lines);
* a merge key (``<<: *defaults``): it copies keys from another block, which
  hides where a value comes from and which of two copies wins; write the keys
  out in full;
* nesting deeper than :data:`MAX_DEPTH` blocks (no fedforest file needs more
  than a few; a deeper one is a mistake or an attack on the parser);
* an integer of more than :data:`MAX_INT_DIGITS` digits or outside
  [:data:`INT_MIN`, :data:`INT_MAX`] (the keys that take integers have their
  own, smaller ranges, checked after), and a base-60 number (``1:30``, which
  YAML 1.1 reads as 90);
* aliases (``*name``) that expand the document to more than
  :data:`MAX_VALUES` values or nest it deeper than :data:`MAX_DEPTH` (an
  "alias bomb" of a few lines stands for billions of values), or that refer
  to the block holding them;
* a tab where YAML takes only spaces (indentation, before a value), named as
  such with its line and column.

:func:`read_yaml_file` reads a file for it: UTF-8 text (a byte-order mark is
fine) of at most :data:`MAX_BYTES` bytes; a UTF-16 or UTF-32 file, other
bytes that are not UTF-8 (Latin-1, a spreadsheet's export) and NUL bytes are
refused naming the encoding expected.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError
from .validation import shown

#: The deepest nesting of blocks (mappings and lists) a YAML file may have.
MAX_DEPTH = 64
#: The most digits an integer in a YAML file may have.
MAX_INT_DIGITS = 30
#: The range of an integer in a YAML file (int64).
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
#: The largest YAML file read (configuration files are a few kilobytes).
MAX_BYTES = 1_000_000
#: The most values (mappings, lists and scalars) a document may stand for, its aliases
#: expanded (a file of :data:`MAX_BYTES` without aliases holds fewer).
MAX_VALUES = 1_000_000
_UTF8_BOM = b"\xef\xbb\xbf"
#: Byte-order marks of encodings other than UTF-8 (longest first: UTF-32 LE starts as UTF-16 LE).
_OTHER_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)
_SAVE_AS = "UTF-8 text: save the file as UTF-8 (in an editor: 'UTF-8', not 'Unicode' or 'ANSI')"
_DIGITS = re.compile(r"[0-9a-fA-F]")


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses repeated keys, merge keys, deep nesting and huge integers."""

    source = "<yaml>"

    def compose_node(self, parent, index):
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise ConfigError(
                    f"{self.source}: line {mark.line + 1}: the blocks are nested more than "
                    f"{MAX_DEPTH} deep; allowed: at most {MAX_DEPTH} levels of nested "
                    "mappings and lists (fedforest's files need a few)"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise ConfigError(
                    f"{self.source}: line {line}: key {shown(_path(self, node, '<<'))} is a merge key "
                    "(<<), which copies the keys of another block; allowed: every key written "
                    "out in its own block (merge keys are not supported: they hide where a "
                    "value comes from)"
                )
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the safe loader reports it itself
                continue
            if first is not None:
                raise ConfigError(
                    f"{self.source}: key {shown(_path(self, node, key))} appears twice (lines {first} "
                    f"and {line}); allowed: each key once in its block (YAML would keep only the "
                    "second and silently drop the first): merge the two or remove one"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def _refuse_base_60(self, node) -> None:
        if ":" in str(node.value):
            where = _node_path(self, node)
            raise ConfigError(
                f"{self.source}: line {node.start_mark.line + 1}: "
                + (f"key {where!r} is " if where else "")
                + f"{shown(node.value)}, which YAML 1.1 reads as a base-60 number; allowed: a "
                "number written in decimal, or text in quotes ('1:30')"
            )

    def construct_yaml_float(self, node):
        self._refuse_base_60(node)
        return super().construct_yaml_float(node)

    def construct_yaml_int(self, node):
        self._refuse_base_60(node)
        digits = len(_DIGITS.findall(str(node.value)))
        value = None if digits > MAX_INT_DIGITS else super().construct_yaml_int(node)
        if value is None or not INT_MIN <= value <= INT_MAX:
            where = _node_path(self, node)
            shown = f"an integer of {digits} digits" if value is None else f"{value}"
            raise ConfigError(
                f"{self.source}: line {node.start_mark.line + 1}: "
                + (f"key {where!r} is " if where else "")
                + f"{shown}; allowed: integers in [{INT_MIN}, {INT_MAX}] (each key has its "
                "own range within it)"
            )
        return value


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float", _UniqueKeyLoader.construct_yaml_float)


def _children(node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expansion(root, source: str) -> None:
    """Refuse aliases that make the document stand for more than :data:`MAX_VALUES` values,
    nest it deeper than :data:`MAX_DEPTH`, or refer to the block that holds them.

    The nodes an alias shares are counted once per use, without building anything: each
    node's expanded size and depth are computed once (an iterative walk, no recursion).
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            line = node.start_mark.line + 1
            if size[key] > MAX_VALUES:
                raise ConfigError(
                    f"{source}: line {line}: its aliases (*name) make the document stand for "
                    f"more than {MAX_VALUES} values; allowed: at most {MAX_VALUES} (write the "
                    "values out, or use fewer aliases)"
                )
            if depth[key] > MAX_DEPTH:
                raise ConfigError(
                    f"{source}: line {line}: its aliases (*name) nest the blocks more than "
                    f"{MAX_DEPTH} deep; allowed: at most {MAX_DEPTH} levels of nested mappings "
                    "and lists"
                )
            continue
        if key in size:
            continue
        if key in open_:
            raise ConfigError(
                f"{source}: line {node.start_mark.line + 1}: an alias (*name) refers to the "
                "block that holds it, which would make the block contain itself; allowed: "
                "aliases of blocks written before and outside them"
            )
        open_.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in size)


def _path(loader: _UniqueKeyLoader, node, key) -> str:
    """The dotted path of ``key`` in the document (``forest.max_depth``)."""
    parts = [str(key)]
    target = node
    root = loader._root
    chain = _find(root, target) if root is not None else None
    if chain:
        parts = [*chain, str(key)]
    return ".".join(parts)


def _node_path(loader: _UniqueKeyLoader, node) -> str:
    """The dotted path of a value node in the document ('' at the top level)."""
    root = getattr(loader, "_root", None)
    chain = _find(root, node) if root is not None else None
    return ".".join(chain or ())


def _find(node, target, prefix=(), depth=0) -> list[str] | None:
    """The keys leading from ``node`` to the node ``target``, or None."""
    if node is target:
        return list(prefix)
    if depth > MAX_DEPTH:
        return None
    if isinstance(node, yaml.MappingNode):
        for key_node, value in node.value:
            step = (*prefix, str(getattr(key_node, "value", key_node)))
            found = _find(value, target, step, depth + 1)
            if found is not None:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for i, value in enumerate(node.value):
            found = _find(value, target, (*prefix, str(i)), depth + 1)
            if found is not None:
                return found
    return None


def load_yaml(text: str, source: str) -> Any:
    """Parse ``text`` (the file ``source``) with the safe loader and the rules of the module.

    Parameters
    ----------
    text : str
    source : str
        The file's name, for the messages.

    Returns
    -------
    object
        The document (``None`` for an empty one).

    Raises
    ------
    ConfigError
        For a key that appears twice in one mapping (naming its path and
        lines), a merge key, nesting deeper than :data:`MAX_DEPTH` and an
        integer outside int64; and for text that is not YAML (naming the
        file, the line and PyYAML's reason).

    Examples
    --------
    >>> load_yaml("forest: {max_depth: 3}", "job.yaml")
    {'forest': {'max_depth': 3}}
    >>> load_yaml("job: {seed: 1}\\njob: {seed: 2}\\n", "job.yaml")
    Traceback (most recent call last):
    ...
    fedforest.errors.ConfigError: job.yaml: key 'job' appears twice (lines 1 and 2); ...
    """
    loader = _UniqueKeyLoader(text)
    loader.source = source
    loader.name = source  # PyYAML's own messages name the file too
    loader._root = None
    try:
        loader._root = loader.get_single_node()
        if loader._root is None:
            return None
        _check_expansion(loader._root, source)
        return loader.construct_document(loader._root)
    except yaml.YAMLError as err:
        raise ConfigError(_yaml_error(source, err)) from None
    except RecursionError:  # a guard above should stop it first; never a raw traceback
        raise ConfigError(
            f"{source}: nested too deep to read; allowed: at most {MAX_DEPTH} levels of nested "
            "mappings and lists"
        ) from None
    finally:
        loader.dispose()


def _yaml_error(source: str, err: yaml.YAMLError) -> str:
    """PyYAML's refusal on one line: the file, the line and column, and the reason (a tab
    named as such)."""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    if "'\\t'" in str(problem) or "\t" in str(problem):
        return (
            f"{source}: {where}not valid YAML: a tab character, where YAML takes only spaces "
            "(to indent a block, or before a value); allowed: spaces (replace each tab with "
            "spaces)"
        )
    context = getattr(err, "context", None)
    reason = f"{context}, {problem}" if context else str(problem)
    reason = shown(reason)[1:-1] if len(reason) > 200 else reason
    return (
        f"{source}: {where}not valid YAML: {reason}; allowed: YAML text (check that line and "
        "the one before it: brackets, quotes, indentation)"
    )


def decode_yaml_bytes(raw: bytes, source: str) -> str:
    """The text of a YAML file's bytes: UTF-8 (a byte-order mark is dropped), else refused.

    Raises
    ------
    ConfigError
        Naming the file, the encoding found (UTF-16 or UTF-32 by its byte-order
        mark) or the line and bytes that are not UTF-8, and that UTF-8 is expected.
    """
    for bom, encoding in _OTHER_BOMS:
        if raw.startswith(bom):
            raise ConfigError(
                f"{source}: the file is {encoding} text (it starts with the {encoding} "
                f"byte-order mark); allowed: {_SAVE_AS}"
            )
    if raw.startswith(_UTF8_BOM):
        raw = raw[len(_UTF8_BOM) :]
    if b"\x00" in raw:
        line = raw.count(b"\n", 0, raw.index(b"\x00")) + 1
        raise ConfigError(
            f"{source}: line {line} holds a NUL byte (UTF-16 text without a byte-order mark, "
            f"or a binary file); allowed: {_SAVE_AS}"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise ConfigError(
            f"{source}: line {line} holds the byte(s) {raw[err.start : err.end]!r}, which are "
            f"not UTF-8 (a Latin-1 or Windows-1252 file?); allowed: {_SAVE_AS}"
        ) from None


def read_yaml_file(path) -> Any:
    """Read and parse a YAML file with :func:`load_yaml`, refusing what is not UTF-8 YAML.

    Raises
    ------
    ConfigError
        For a missing or unreadable file, one larger than :data:`MAX_BYTES`,
        bytes that are not UTF-8 (:func:`decode_yaml_bytes`) and every rule
        of :func:`load_yaml`; each names the file.
    """
    path = Path(path)
    source = os.fspath(path)
    if not path.is_file():
        raise ConfigError(f"{source}: file not found; allowed: an existing YAML file")
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ConfigError(
                f"{source}: the file has {size} bytes; allowed: a YAML file of at most "
                f"{MAX_BYTES} bytes (a configuration file is a few kilobytes)"
            )
        raw = path.read_bytes()
    except OSError as err:
        raise ConfigError(
            f"{source}: cannot be read ({err.strerror or err}); allowed: a readable YAML file"
        ) from None
    return load_yaml(decode_yaml_bytes(raw, source), source)
