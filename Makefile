PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test lint format docs docs-demo bench bench-job bench-scale bench-experiment bench-quality bench-ideas bench-regression bench-survival bench-survival-inference bench-payload bench-privacy bench-hospitals bench-oob-calibration demo demo-data demo-regression demo-data-regression demo-survival demo-data-survival job poc clean

# uv (from PyPI) installs the same requirements as pip, several times faster (compiling the
# bytecode up front, as pip does, so that every FLARE process starts from it); pip is the
# fallback where uv cannot run.
$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip uv
	$(PY) -m uv pip install --quiet --compile-bytecode --python $(PY) -r requirements.txt \
		|| $(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m uv pip install --quiet --python $(PY) --no-deps -e . \
		|| $(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

# The whole suite in parallel, one pytest-xdist worker per CPU (PYTEST_XDIST_AUTO_NUM_WORKERS
# sets another number), the 15 slowest tests listed at the end.
test: $(STAMP)
	$(PY) -m ruff check src tests benchmarks data_prep docs/generate.py
	$(PY) -m pytest -q -n logical --durations=15

lint: $(STAMP)
	$(PY) -m ruff check src tests benchmarks data_prep docs/generate.py
	$(PY) -m ruff format --check src tests benchmarks data_prep docs/generate.py

format: $(STAMP)
	$(PY) -m ruff format src tests benchmarks data_prep docs/generate.py
	$(PY) -m ruff check --fix src tests benchmarks data_prep docs/generate.py

# The generated blocks of README.md and docs/*.md: the configuration reference (from the
# schema), the benchmark results they include, the size of the runtime a job ships.
docs: $(STAMP)
	$(PY) docs/generate.py

# The README's excerpt of `make demo`'s console, from a fresh run of the demo.
docs-demo: $(STAMP)
	$(PY) docs/generate.py --demo

# The benchmarks (benchmarks/, each through benchmarks/harness.py): results in
# benchmarks/results/<name>.json and .md. BENCH_ARGS passes options to the script, e.g.
# `make bench-job BENCH_ARGS="--modes server --out /tmp/bench"`.
BENCH_ARGS ?=

bench: $(STAMP)
	$(PY) benchmarks/bench_inference.py $(BENCH_ARGS)

bench-experiment: $(STAMP)
	$(PY) benchmarks/bench_experiment.py $(BENCH_ARGS)

bench-job: $(STAMP)
	$(PY) benchmarks/bench_job.py $(BENCH_ARGS)

bench-scale: $(STAMP)
	$(PY) benchmarks/bench_scale.py $(BENCH_ARGS)

bench-quality: $(STAMP)
	$(PY) benchmarks/bench_quality.py $(BENCH_ARGS)

bench-ideas: $(STAMP)
	$(PY) benchmarks/bench_strategy_ideas.py $(BENCH_ARGS)

bench-payload: $(STAMP)
	$(PY) benchmarks/bench_payload.py $(BENCH_ARGS)

bench-privacy: $(STAMP)
	$(PY) benchmarks/bench_privacy.py $(BENCH_ARGS)

bench-hospitals: $(STAMP)
	$(PY) benchmarks/bench_hospitals.py $(BENCH_ARGS)

bench-oob-calibration: $(STAMP)
	$(PY) benchmarks/bench_oob_calibration.py $(BENCH_ARGS)

bench-regression: $(STAMP)
	$(PY) benchmarks/bench_regression.py $(BENCH_ARGS)

bench-survival: $(STAMP)
	$(PY) benchmarks/bench_survival.py $(BENCH_ARGS)

# Survival trees' inference with half the features absent, as a ratio to scikit-survival on
# the same trees, against classification's ratio to scikit-learn (same forest size).
bench-survival-inference: $(STAMP)
	$(PY) benchmarks/bench_survival_inference.py $(BENCH_ARGS)

demo-data: $(STAMP)
	$(PY) data_prep/make_demo_data.py --out demo_data

job: demo-data
	$(VENV)/bin/fedforest job build --config site_configs --out jobs

# The main command: demo data for 3 hospitals, the job's recipe run in FLARE's SimEnv.
demo: job
	$(VENV)/bin/fedforest job simulate --config site_configs --workspace workspaces/demo

demo-data-regression: $(STAMP)
	$(PY) data_prep/make_demo_data.py --task regression --out demo_data_regression

# The regression demo: the three hospitals predict the length of stay (job.task: regression,
# site_configs/regression/), in FLARE's SimEnv. `make demo` stays the classification demo.
demo-regression: demo-data-regression
	$(VENV)/bin/fedforest job simulate --config site_configs/regression \
		--workspace workspaces/demo-regression

demo-data-survival: $(STAMP)
	$(PY) data_prep/make_survival_data.py --out demo_data_survival

# The survival demo: three hospitals of the GBSG2 breast cancer trial predict the time to
# recurrence (job.task: survival, site_configs/survival/), in FLARE's SimEnv.
demo-survival: demo-data-survival
	$(VENV)/bin/fedforest job simulate --config site_configs/survival \
		--workspace workspaces/demo-survival

# The same recipe in FLARE's PocEnv: server and sites as separate processes. The POC
# workspace (startup kits, the processes' logs) is POC_WORKSPACE, the results go to POC_OUT
# and FLARE's output to $(POC_OUT).log; e.g. `make poc POC_WORKSPACE=/scratch/poc-env`.
POC_WORKSPACE ?= workspaces/poc-env
POC_OUT ?= workspaces/poc
poc: demo-data
	$(VENV)/bin/fedforest job poc --config site_configs --workspace $(POC_WORKSPACE) --out $(POC_OUT)

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info workspaces demo_data demo_data_regression demo_data_survival jobs/fedforest-demo

# Production mode, tested on one machine: provisions deploy/project.yml into a fresh
# workspace, starts the server and the 3 sites from their startup kits (site-2 keeps its
# data path in its own local/fedforest.yaml), runs the recipe through ProdEnv with the
# admin's kit, prints the results and stops every process it started.
.PHONY: prod-local
prod-local: demo-data
	$(PY) deploy/prod_local.py --project deploy/project.yml --config site_configs \
		--workspace /tmp/fedforest-prod --out workspaces/prod --local-data site-2=demo_data/site-2.csv
