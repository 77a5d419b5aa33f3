"""llmaz.render"""
