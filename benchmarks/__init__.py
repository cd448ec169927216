"""fedforest's benchmarks, installed with the project as the package ``benchmarks``.

Each ``bench_*.py`` runs as a script (``python benchmarks/bench_job.py``, the
``make bench-*`` targets) and writes ``benchmarks/results/<name>.json`` and
``<name>.md`` through :mod:`benchmarks.harness`, the shared harness: options,
timing, machine facts, the results files, progress lines and the in-process
job. Their modules import each other as ``benchmarks.bench_<name>``.
"""
