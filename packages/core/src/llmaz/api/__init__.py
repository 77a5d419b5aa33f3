"""llmaz.api"""
