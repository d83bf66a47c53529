# The two commands of the README's quick start. Both set everything up first (idempotent).
PY := .venv/bin/python

.PHONY: app test setup
app: setup
	$(PY) -m streamlit run app.py

test:
	bash scripts/setup.sh --browser
	$(PY) -m pytest -q

setup:
	bash scripts/setup.sh
