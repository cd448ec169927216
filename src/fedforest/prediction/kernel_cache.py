"""Where the numba kernels' machine code is kept: one folder per machine, not per job.

numba's own on-disk cache (``cache=True``) keeps compiled code next to the
source file, or under ``NUMBA_CACHE_DIR`` in a folder named after the source
file's folder. A FLARE job ships fedforest in its ``custom/`` folder, a new
folder for every job and every site, so each site process would compile the
kernels again (a few seconds of CPU each). The locator here keeps them in a
folder named after the *content* of the sources they are compiled from, under
a cache folder the site's user owns:

* ``FEDFOREST_KERNEL_CACHE`` if set (``off`` or an empty value: no disk cache);
* otherwise ``$XDG_CACHE_HOME/fedforest/kernels``, by default
  ``~/.cache/fedforest/kernels``.

Every job, site and copy of the same fedforest release on that machine then
loads the same compiled code; a changed source gets a new folder. Where the
folder cannot be created or written, the kernels are compiled in memory, as
they are without a cache (one warning says so); predictions never depend on
it.

numba offers no public hook for this: :func:`install` adds a locator to the
list numba tries (``numba.core.caching.CacheImpl._locator_classes``;
``_CacheImpl`` in older releases), for the kernel module alone. If numba's
internals differ, it installs nothing and the kernels compile in memory.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

#: The environment variable that names the cache folder (``off``: none).
ENV = "FEDFOREST_KERNEL_CACHE"

#: Sources whose code or constants the kernels are compiled from (this package).
SOURCES = (
    "numba_kernels.py",
    "routing.py",
    "draws.py",
    "../model/traversal.py",
    "../rules/routing.py",
)

_HERE = Path(__file__).resolve().parent
_KERNEL_FILE = os.path.normcase(os.path.realpath(_HERE / "numba_kernels.py"))


def cache_root(environ=None) -> Path | None:
    """The cache folder this process would use, or ``None`` when disabled.

    Examples
    --------
    >>> cache_root({"FEDFOREST_KERNEL_CACHE": "/srv/site-1/cache"}).as_posix()
    '/srv/site-1/cache'
    >>> cache_root({"FEDFOREST_KERNEL_CACHE": "off"}) is None
    True
    >>> cache_root({"XDG_CACHE_HOME": "/tmp/c"}).as_posix()
    '/tmp/c/fedforest/kernels'
    """
    env = os.environ if environ is None else environ
    if ENV in env:
        value = env[ENV].strip()
        return None if value.lower() in ("", "off") else Path(value).expanduser()
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fedforest" / "kernels"


def source_key() -> str:
    """Hash of the kernels' sources: the name of their folder in the cache."""
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(name.encode())
        digest.update((_HERE / name).read_bytes())
    return digest.hexdigest()[:24]


def kernel_folder(environ=None) -> Path | None:
    """The folder of this release's compiled kernels, created; ``None`` if unusable.

    ``None`` when the cache is disabled or the folder cannot be created or
    written (logged once, naming the folder and :data:`ENV`).
    """
    root = cache_root(environ)
    if root is None:
        logger.info("%s=off: the numba kernels are compiled in memory", ENV)
        return None
    folder = root / source_key()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as exc:
        logger.warning(
            "cannot write the numba kernel cache %s (%s); the kernels are compiled in memory "
            "in every process. Set %s to a folder this user can write (or to 'off')",
            folder,
            exc,
            ENV,
        )
        return None
    return folder


def install(environ=None) -> bool:
    """Make numba cache the kernels in :func:`kernel_folder`.

    Call before the kernel module is imported (it does so itself).

    Returns
    -------
    bool
        Whether the kernels can be cached on disk: pass it as ``cache=`` to
        ``numba.njit``.
    """
    folder = kernel_folder(environ)
    if folder is None:
        return False
    try:
        from numba.core import caching
    except ImportError:  # pragma: no cover - depends on the installed numba
        return False
    base = getattr(caching, "_CacheLocator", None)
    mixin = getattr(caching, "_SourceFileBackedLocatorMixin", None)
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)
    if base is None or mixin is None or not isinstance(classes, list):
        logger.warning(
            "numba %s has no cache locators to extend; the kernels are compiled in memory",
            _numba_version(),
        )
        return False
    for cls in classes:
        if getattr(cls, "fedforest_kernel_locator", False):
            classes.remove(cls)
            break
    classes.insert(0, _locator_class(base, mixin, folder))
    logger.debug("numba kernels cached in %s", folder)
    return True


def _locator_class(base, mixin, folder: Path):
    """A numba cache locator for the kernel module's functions, in ``folder``.

    ``folder`` is named after :func:`source_key`, which is also the index's stamp.
    """
    stamp = folder.name

    class KernelLocator(mixin, base):
        fedforest_kernel_locator = True

        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno

        def get_cache_path(self):
            return str(folder)

        def get_source_stamp(self):
            # the sources' content, not the file's path or time: every copy shares it
            return stamp

        @classmethod
        def from_function(cls, py_func, py_file):
            if os.path.normcase(os.path.realpath(py_file)) != _KERNEL_FILE:
                return None
            return cls(py_func, py_file)

    return KernelLocator


def _numba_version() -> str:
    try:
        import numba

        return numba.__version__
    except ImportError:  # pragma: no cover - the caller imported numba
        return "?"
