# The README's commands. `app` and `test` set everything up first (idempotent); `check` is the fast loop.
PY := .venv/bin/python

.PHONY: app test check setup
app: setup
	$(PY) -m streamlit run app.py

# The whole suite: unit, AppTest, live vLLM (CPU) and the real browser. What CI runs.
test:
	bash scripts/setup.sh --browser
	$(PY) -m pytest -q

# Unit tests, AppTest and lint: no vLLM start, no training, under a minute. Needs `make setup` once.
check:
	@test -x $(PY) || { echo "no .venv yet: run 'make setup' once"; exit 2; }
	$(PY) -m ruff check .
	$(PY) -m pytest -q -m "not live and not browser and not slow"

setup:
	bash scripts/setup.sh
