"""Build the fedforest FLARE job from site_configs/ (same as `fedforest job build`).

Usage::

    python jobs/build_job.py [--config site_configs] [--out jobs]
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from fedforest.flare.job import build_job

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Build the fedforest FLARE job.")
    parser.add_argument("--config", type=Path, default=HERE.parent / "site_configs")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(f"job written to {build_job(args.config, args.out)}")
