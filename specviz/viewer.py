"""Viewer mode, for an app shared with people who should only look: SPECVIZ_VIEWER=1.

In viewer mode the app opens recorded runs and sweeps only (files in sample_runs/, and uploaded run
files): no engine starts, no server is reached, and nothing a visitor types is used as a path on
the server. Start it with `SPECVIZ_VIEWER=1 .venv/bin/python -m streamlit run app.py`.
"""

from __future__ import annotations

import os

VIEWER_ENV = "SPECVIZ_VIEWER"
VIEWER_CAPTION = ("Viewer mode: recorded runs and sweeps only. This app starts no engine and reaches no "
                  "server (set by SPECVIZ_VIEWER).")
_OFF = ("", "0", "false", "no", "off")


def viewer_mode() -> bool:
    """True when SPECVIZ_VIEWER is set to anything but empty, 0, false, no or off (read on every call)."""
    return os.environ.get(VIEWER_ENV, "").strip().lower() not in _OFF
