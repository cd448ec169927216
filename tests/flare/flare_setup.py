"""Demo data and small job configs in a temporary folder, for real FLARE runs."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "data_prep"))

from make_demo_data import make_demo_data  # noqa: E402


def write_configs(
    folder: Path, rows: int = 400, copies: dict[str, str] | None = None, **job_overrides
) -> Path:
    """Demo data for three sites and a small, fast job config; returns the config folder.

    ``copies`` adds sites: ``{new name: demo site}`` gives the new site a copy of that
    demo site's YAML and data file (the job's ``sites`` list grows accordingly).
    """
    data = folder / "data"
    make_demo_data(data, rows=rows, seed=1)
    configs = folder / "site_configs"
    configs.mkdir(parents=True)
    job = yaml.safe_load((ROOT / "site_configs" / "job.yaml").read_text())
    job["forest"]["n_estimators"] = 30
    job["election"]["tuning_rounds"] = 3
    for section, values in job_overrides.items():
        job[section].update(values)
    sites = {s: s for s in ("site-1", "site-2", "site-3")} | dict(copies or {})
    job["job"]["sites"] = list(sites)
    (configs / "job.yaml").write_text(yaml.safe_dump(job))
    for site, template in sites.items():
        cfg = yaml.safe_load((ROOT / "site_configs" / f"{template}.yaml").read_text())
        cfg["site"] = site
        cfg["data_path"] = str(data / f"{template}.csv")
        (configs / f"{site}.yaml").write_text(yaml.safe_dump(cfg))
    return configs
