from llmaz.testing.plugins import plugin_manager_factory

__all__ = ["plugin_manager_factory"]
