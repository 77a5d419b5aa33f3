"""llmaz.plugins"""
