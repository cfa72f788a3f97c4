"""What a query reads: arrays, zips, tables, ranges, shaped elements, and the adapters that turn a user's
input (pandas, polars, Arrow, lists) into NumPy columns.
"""
