"""llmaz backend plugin for Ollama."""

from llmaz_backend_ollama.backend import OllamaBackend

__all__ = ["OllamaBackend"]
