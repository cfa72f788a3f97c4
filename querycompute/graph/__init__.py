"""The operation graph: one node per operator and per terminal (terminals as data: AggSpec).
"""
