"""What every specviz module shares: one frozen pydantic base and one exception base.

    class Step(Frozen): ...                          # immutable, unknown fields refused
    class RunFileError(SpecvizError, ValueError): ...  # `except SpecvizError` catches every refusal

Every specviz exception subclasses `SpecvizError` and keeps the built-in base it had before
(ValueError for bad input, RuntimeError for a failing process or server), so code that catches
those still works. This module imports nothing from specviz: the tracer imports it inside vLLM's
EngineCore process.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """A pydantic model that cannot change after it is built and refuses fields it does not declare."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class SpecvizError(Exception):
    """Base of every error specviz raises on purpose; the message says what is wrong and what to do."""
