"""Argument types shared by the data_prep scripts."""

from __future__ import annotations

import argparse


def integer(low: int):
    """An argparse type: an integer >= ``low``, refused with a message naming the value."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer (>= {low})") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is out of range; allowed: >= {low}")
        return value

    return parse
