"""llmaz.testing"""
