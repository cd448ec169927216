"""Checks across a configuration folder, made when the job is built.

* :func:`unlisted_yaml_files`: the YAML files of ``site_configs/`` that the
  job does not read (a site that ``job.sites`` does not list, a ``.yml``
  file), each with the reason, for a warning;
* :func:`check_target_codings`: the sites' class labels (their targets read
  from the data files, ``label_map`` applied) must be one coding: of two
  sites, one's labels contain the other's (a site may lack a class). Two
  codings of one target (``M``/``B`` at one hospital, ``1``/``0`` at another)
  are refused naming both sites, their labels and the ``label_map`` that
  maps one onto the other. The job's schema refuses the same when it runs;
  here it is refused before anything starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError

#: The job's own file in the configuration folder.
JOB_FILE_NAME = "job.yaml"


def unlisted_yaml_files(config_dir, sites: Sequence[str]) -> list[tuple[Path, str]]:
    """The YAML files of ``config_dir`` the job does not read, each with why.

    ``<name>.yaml`` is read when ``job.sites`` lists ``name``; ``job.yaml`` is
    the job's. Any other ``*.yaml`` or ``*.yml`` file is named.
    """
    folder = Path(config_dir)
    listed = ", ".join(sites)
    found = []
    for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
        if not path.is_file() or path.name == JOB_FILE_NAME:
            continue
        if path.suffix == ".yml" and (folder / f"{path.stem}.yaml").is_file():
            why = f"only <site>.yaml files are read: {path.stem}.yaml is read, not this file"
        elif path.suffix == ".yml":
            listed_or_not = "" if path.stem in sites else f" and list {path.stem!r} in job.sites"
            why = (
                f"only <site>.yaml files are read; rename it to {path.stem}.yaml"
                f"{listed_or_not} to make it a site of the job"
            )
        elif path.stem in sites:
            continue
        else:
            why = (
                f"key 'job.sites' in {folder / JOB_FILE_NAME} lists {listed}, not "
                f"{path.stem!r}; add {path.stem!r} to job.sites to make it a site of the job"
            )
        found.append((path, why))
    return found


def _labels_text(labels: Iterable) -> str:
    return "[" + ", ".join(map(repr, labels)) + "]"


def _sorted_labels(labels: Iterable) -> list:
    """Numbers in numeric order, then text alphabetically."""
    return sorted(
        labels, key=lambda v: (isinstance(v, str), v if not isinstance(v, str) else 0, str(v))
    )


def _flow(mapping: Mapping) -> str:
    """A mapping as one YAML flow line, quoted where YAML would misread it."""
    return yaml.safe_dump(dict(mapping), default_flow_style=True, sort_keys=False).strip()


def _suggested_map(labels: list, reference: list, label_map: Mapping) -> dict | None:
    """``label_map`` mapping ``labels`` onto ``reference`` in order (as an example to check);
    composed with the site's own ``label_map``. None when the site has more labels."""
    if len(labels) > len(reference):
        return None
    pairs = dict(zip(labels, reference, strict=False))
    out: dict[Any, Any] = {}
    mapped = set()
    for local, global_label in label_map.items():
        if global_label in pairs:
            out[local] = pairs[global_label]
            mapped.add(global_label)
    for label in labels:
        if label not in mapped:
            out[label] = pairs[label]
    return out


def check_target_codings(
    sites: Mapping[str, Any], labels: Mapping[str, Iterable], order: Sequence[str]
) -> None:
    """Refuse sites whose class labels are two codings of the target (module docstring).

    Parameters
    ----------
    sites : mapping of site name to SiteConfig
    labels : mapping of site name to its class labels
        As the site reads them (``label_map`` applied, labels normalised); the
        sites whose data file was not read are left out.
    order : sequence of str
        The sites in the job's order (``job.sites``).

    Raises
    ------
    ConfigError
        Naming both sites' files, their target columns and labels, and a
        ``label_map`` that maps one site's labels onto the other's.
    """
    by_site = {s: set(labels[s]) for s in order if s in labels}
    if len(by_site) < 2:
        return

    def nested(a: str, b: str) -> bool:
        return by_site[a] <= by_site[b] or by_site[b] <= by_site[a]

    clashes = [(a, b) for a, b in combinations(by_site, 2) if not nested(a, b)]
    if not clashes:
        return
    # the coding most sites agree with (then the one with more labels, then the job's order)
    ranked = sorted(
        by_site,
        key=lambda s: (-sum(nested(s, t) for t in by_site), -len(by_site[s]), order.index(s)),
    )
    reference = ranked[0]
    a, b = clashes[0]
    if b == reference:
        a, b = b, a
    elif a != reference and nested(b, reference) and not nested(a, reference):
        a, b = b, a  # b is the odd one: it gets the fix
    site_a, site_b = sites[a], sites[b]
    la, lb = _sorted_labels(by_site[a]), _sorted_labels(by_site[b])
    per_site = "; ".join(f"{s}: {_labels_text(_sorted_labels(v))}" for s, v in by_site.items())
    fix = _suggested_map(lb, la, getattr(site_b, "label_map", {}) or {})
    if reference not in (a, b) and nested(a, reference) and nested(b, reference):
        fix = None  # two sites each lacking other classes of the reference's: no mapping fits
    example = (
        f"e.g. {b}: label_map: {_flow(fix)} in {site_b.source} (check which label means which)"
        if fix
        else f"label_map: {{local label: global label}} in {site_b.source}"
    )
    if not by_site[a] & by_site[b]:
        problem = "have no class label in common: the target is coded differently"
    else:
        problem = (
            f"have class labels that differ while neither set contains the other ({a!r} lacks "
            f"{_labels_text(_sorted_labels(by_site[b] - by_site[a]))}, {b!r} lacks "
            f"{_labels_text(_sorted_labels(by_site[a] - by_site[b]))}): a coding difference"
        )
    raise ConfigError(
        f"{site_b.source}: key 'target' ({site_b.target!r}) of site {b!r} is coded "
        f"{_labels_text(lb)}, but site {a!r} ({site_a.source}, target {site_a.target!r}) codes "
        f"its target {_labels_text(la)}: sites {a!r} and {b!r} {problem} (labels per site: "
        f"{per_site}); allowed: one coding of the target at every site (a site may lack a "
        f"class): map {b}'s labels onto {a}'s with {example}, or name the right target column"
    )
