"""The public API layer: Query and its operators and terminals, Grouped, repr, explain/source.

Imports point down (DESIGN.md section 2): api may use every layer below it; nothing below imports api.
"""
