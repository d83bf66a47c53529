# The README's commands. `app` and `test` set everything up first (idempotent); `check` is the fast loop.
PY := .venv/bin/python

.PHONY: app test check setup
app: setup
	$(PY) -m streamlit run app.py

# The whole suite: unit, AppTest, live vLLM (CPU) and the real browser. What CI runs.
test:
	bash scripts/setup.sh --browser
	$(PY) -m pytest -q

# The unit and app folders (no vLLM start, no browser), without training (`slow`), and lint: under a minute.
# Needs `make setup` once.
check:
	@test -x $(PY) || { echo "no .venv yet: run 'make setup' once"; exit 2; }
	$(PY) -m ruff check .
	$(PY) -m pytest -q tests/unit tests/app -m "not slow"

setup:
	bash scripts/setup.sh
