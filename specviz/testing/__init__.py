"""Builders used only by tests, scripts and benchmarks: nothing in the app imports them.

- `specviz.testing.tiny_models`: tiny random-weight Llama targets and drafts that share the demo
  model's tokenizer (no downloads, seconds to build).
- `specviz.testing.draft_heads`: random-weight drafter heads (EAGLE, EAGLE-3, Medusa, MLP speculator,
  DFlash, ...) with a hand-laid token path, and a custom_class proposer, for trying every method.

The trained drafters that ship with specviz live in `drafters/` (built by `specviz.train`).
"""
