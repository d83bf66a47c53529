"""Fixtures for the AppTest page tests; the plain helpers they use are in tests/page_helpers.py."""

from __future__ import annotations

import pytest
from page_helpers import open_page


@pytest.fixture
def app():
    """The whole app (app.py) after its first run, as a newcomer opens it."""
    return open_page()
