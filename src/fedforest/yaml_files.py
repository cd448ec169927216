"""Reading fedforest's YAML files (``job.yaml``, a site's YAML, ``local/fedforest.yaml``).

PyYAML's safe loader keeps the last of two equal keys in a mapping, so a
second ``forest:`` block, or a ``job:`` pasted twice, silently replaces the
first and the mistake surfaces later as a wrong value of some other key.
:func:`load_yaml` uses the safe loader (no Python objects are ever built)
and refuses a key that appears twice in one mapping, naming the file, the
key's path and both lines.
"""

from __future__ import annotations

from typing import Any

import yaml

from .errors import ConfigError


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that records the first line of every key of every mapping."""

    source = "<yaml>"

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the safe loader reports it itself
                continue
            line = key_node.start_mark.line + 1
            if first is not None:
                raise ConfigError(
                    f"{self.source}: key {_path(self, node, key)!r} appears twice (lines {first} "
                    f"and {line}); allowed: each key once in its block (YAML would keep only the "
                    "second and silently drop the first): merge the two or remove one"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _path(loader: _UniqueKeyLoader, node, key) -> str:
    """The dotted path of ``key`` in the document (``forest.max_depth``)."""
    parts = [str(key)]
    target = node
    root = loader._root
    chain = _find(root, target) if root is not None else None
    if chain:
        parts = [*chain, str(key)]
    return ".".join(parts)


def _find(node, target, prefix=()) -> list[str] | None:
    """The keys leading from ``node`` to the mapping ``target``, or None."""
    if node is target:
        return list(prefix)
    if isinstance(node, yaml.MappingNode):
        for key_node, value in node.value:
            found = _find(value, target, (*prefix, str(getattr(key_node, "value", key_node))))
            if found is not None:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for i, value in enumerate(node.value):
            found = _find(value, target, (*prefix, str(i)))
            if found is not None:
                return found
    return None


def load_yaml(text: str, source: str) -> Any:
    """Parse ``text`` (the file ``source``) with the safe loader, refusing duplicate keys.

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
        For a key that appears twice in one mapping (naming its path and lines).
    yaml.YAMLError
        For text that is not YAML.

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
    try:
        loader._root = loader.get_single_node()
        return None if loader._root is None else loader.construct_document(loader._root)
    finally:
        loader.dispose()
