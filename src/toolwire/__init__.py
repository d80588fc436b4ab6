"""toolwire: a tool-calling runtime and OpenAI-compatible gateway for LLM assistants."""

__version__ = "0.1.0"
