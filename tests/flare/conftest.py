"""Make the helper modules of these tests importable (they are also shipped to sites)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
