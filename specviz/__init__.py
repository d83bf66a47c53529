"""specviz: watch vLLM speculative decoding step by step, and measure it."""

__version__ = "0.1.0"
