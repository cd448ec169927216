"""The ``fedforest`` command's option types and input files, shared by its commands.

Option values are checked in two places, the same way for every subcommand:
a value that is wrong by itself (not a number, out of range, not a choice) is
refused by its argparse ``type`` (a usage error, exit status 2, naming the
option); a value that is wrong for the files given (a column the data lacks,
an unreadable CSV, an output that would overwrite something) is refused by
the command with ``fedforest: error: ...`` (exit status 1).
"""

from __future__ import annotations

import argparse
import copy
import math

from ..vocabulary import SELECTORS

#: As the job's ``forest.n_estimators`` (``federation/config.py``).
MAX_TREES = 10_000


def csv_list(text: str | None) -> list[str]:
    """The non-empty, stripped items of a comma-separated option value."""
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def integer(low: int, high: int | None = None):
    """An argparse type: an integer in [low, high]."""
    allowed = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not an integer; allowed: {allowed}"
            ) from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value} is out of range; allowed: {allowed}")
        return value

    return parse


def number(low: float, high: float | None = None, low_open: bool = False):
    """An argparse type: a finite number in [low, high] (or (low, high] with ``low_open``)."""
    left = "(" if low_open else "["
    allowed = (
        f"a number in {left}{low:g}, {high:g}]"
        if high is not None
        else (f"a number {'>' if low_open else '>='} {low:g}")
    )

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a number; allowed: {allowed}"
            ) from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number; allowed: {allowed}")
        if value < low or (low_open and value == low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text!r} is out of range; allowed: {allowed}")
        return value

    return parse


def listed(item, what: str):
    """An argparse type: a comma-separated list of distinct items, each parsed by ``item``."""

    def parse(text: str) -> list:
        parts = csv_list(text)
        if not parts:
            raise argparse.ArgumentTypeError(f"{text!r} holds no {what}; give at least one")
        values = []
        for part in parts:
            try:
                values.append(item(part))
            except argparse.ArgumentTypeError as err:
                raise argparse.ArgumentTypeError(f"in {text!r}: {err}") from None
        repeated = sorted({str(v) for v in values if values.count(v) > 1})
        if repeated:
            raise argparse.ArgumentTypeError(f"{text!r} repeats {', '.join(repeated)}")
        return values

    return parse


def choice(allowed):
    """An argparse type: one of ``allowed``."""

    def parse(text: str) -> str:
        if text not in allowed:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not allowed; allowed: {', '.join(allowed)}"
            )
        return text

    return parse


def name(text: str) -> str:
    """An argparse type: a column or feature name, as given."""
    return text


def selector_list(text: str) -> list[str]:
    """An argparse type: selectors, comma-separated (may repeat: one per file)."""
    names = csv_list(text)
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} holds no selector")
    for name in names:
        choice(SELECTORS)(name)
    return names


def rename_pairs(text: str) -> dict[str, str]:
    """An argparse type: ``local=global`` pairs, comma-separated.

    Only plain spaces and tabs around a name are left out: a name holding a
    no-break or zero-width space (``$'bmi\\u00a0=bmi'`` in bash) is the
    column of that exact spelling.
    """
    pairs = {}
    for pair in (t.strip(" \t") for t in (text or "").split(",")):
        if not pair:
            continue
        local, sep, target = (p.strip(" \t") for p in pair.partition("="))
        if not sep or not local or not target:
            raise argparse.ArgumentTypeError(
                f"{pair!r} is not local=global (a column name on each side of '=')"
            )
        if local in pairs:
            raise argparse.ArgumentTypeError(f"column {local!r} is renamed twice")
        pairs[local] = target
    if not pairs:
        raise argparse.ArgumentTypeError(f"{text!r} holds no local=global pair")
    targets = list(pairs.values())
    repeated = sorted({t for t in targets if targets.count(t) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(
            f"several columns are renamed to {', '.join(map(repr, repeated))}; "
            "each global name may be given once"
        )
    return pairs


def read_csv(path, option: str, exempt=None):
    """Read a CSV named by ``option``; refuse a missing, unreadable or empty file by name,
    and what the job refuses in a data file (:func:`~fedforest.federation.tables.read_csv_checked`:
    not UTF-8, ragged rows, the wrong separator, a duplicated column name).

    With ``exempt`` (the columns not to check as numbers), a table that is a site
    without a YAML (``elect``'s tables): the data file's own rules too
    (:func:`~fedforest.federation.tables.read_site_csv`: names as they read, no
    unnamed column, no stray text among numbers).
    """
    from pathlib import Path

    from ..federation.tables import read_csv_checked, read_site_csv

    path = Path(path)
    if not path.is_file():
        if not path.exists() and not path.is_symlink():
            raise FileNotFoundError(f"{option}: no such CSV file: {path}")
        raise FileNotFoundError(f"{option}: {path} {not_a_file(path)}; give a CSV file")

    def fail(what: str, allowed: str):
        raise ValueError(f"{option} {path}: {what}; allowed: {allowed}")

    try:
        frame = (
            read_csv_checked(path, fail) if exempt is None else read_site_csv(path, fail, exempt)
        )
    except OSError as err:
        raise ValueError(f"{option}: cannot read {path}: {err}") from err
    if frame.empty:
        raise ValueError(
            f"{option}: {path} has no data rows; allowed: a header line and at least one row"
        )
    return frame


def not_a_file(path) -> str:
    """What ``path`` is instead of a regular file, for a message: ``is a folder``, ..."""
    import os
    import stat
    from pathlib import Path

    path = Path(path)
    if path.is_symlink() and not path.exists():
        return f"is a link to {os.readlink(path)}, which does not exist"
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "does not exist"
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    kind = next((name for test, name in kinds if test(mode)), None)
    return "is not a regular file" if kind is None else f"is {kind}, not a file"


def check_output(path, option: str, overwrite: bool, inputs) -> None:
    """Refuse to write the file ``path`` (given as ``option``) unless it is safe and writable.

    :func:`~fedforest.outputs.check_file` first (never an input, whatever
    ``overwrite`` says; an existing file only with ``--overwrite``), then what
    writing would run into, each named with the fix: a link to nothing, a
    read-only file, a folder the user cannot write in.
    """
    import os
    from pathlib import Path

    from ..outputs import OutputError, check_file

    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise OutputError(
            f"{option} {path} is a link to {os.readlink(path)}, which does not exist; give the "
            "name of a file to write (or remove the link)"
        )
    check_file(path, option, overwrite=overwrite, inputs=inputs)
    if path.exists() and (not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222):
        raise OutputError(
            f"{option} {path} is read-only; refusing to replace it. Give another name (or make "
            f"it writable: chmod u+w {path})"
        )
    folder = path.resolve().parent
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(
            f"{option} {path}: cannot write in the folder {folder} (no permission); give a file "
            "in a folder you can write"
        )


def write_output(path, option: str, write) -> None:
    """Write ``path`` by :func:`~fedforest.outputs.write_file`; a failure names ``path``
    (never the temporary file it writes first)."""
    from ..outputs import OutputError, write_file

    try:
        write_file(path, write)
    except OSError as err:
        raise OutputError(
            f"{option} {path}: cannot write it ({err.strerror or err}); nothing was changed. "
            "Give a file in a folder you can write"
        ) from None


def columns_text(frame) -> str:
    """The columns of ``frame``, comma-separated, for a message (at most
    :data:`~fedforest.model.inputs.MAX_LISTED`, then how many more)."""
    from ..model.inputs import names_text

    return names_text(list(map(str, frame.columns)))


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Help that shows every option's default: ``(default: ...)`` after its text.

    Left out where there is nothing to show (no default, a switch that is off
    by default, a required option) or where the help already says it; an
    option without help text gets a line with its default.
    """

    @staticmethod
    def _default(action: argparse.Action) -> str | None:
        """The default to show, escaped for argparse's ``%`` formatting; None: none."""
        default = action.default
        if (
            default is None
            or default is argparse.SUPPRESS
            or default is False
            or action.required
            or isinstance(action, argparse._HelpAction | argparse._VersionAction)
            or (not action.option_strings and action.nargs not in ("?", "*"))
        ):
            return None
        shown = ",".join(map(str, default)) if isinstance(default, list | tuple) else default
        return str(shown).replace("%", "%%")

    def _format_action(self, action: argparse.Action) -> str:
        if not (action.help or "").strip() and action.help is not argparse.SUPPRESS:
            shown = self._default(action)
            if shown is not None:
                action = copy.copy(action)
                action.help = f"default: {shown}"
        return super()._format_action(action)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        shown = self._default(action)
        if shown is None or "default" in text:
            return text
        return f"{text} (default: {shown})"


class Parser(argparse.ArgumentParser):
    """``fedforest``'s parser: its subcommands' parsers are of this class too
    (``add_subparsers`` makes them so), so every ``--help`` shows the defaults."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)
