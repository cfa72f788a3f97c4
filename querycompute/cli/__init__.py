"""The `querycompute` command: cache commands, query text, the demo.
"""
