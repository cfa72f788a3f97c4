"""codegen: a standalone kernel IR and its printers.

It knows nothing about queries or lambdas: `querycompute` lowers a query into an
`ElementProgram` plus a `Terminal` (see `program.py`) and asks a dialect to print it.
This package never imports `querycompute`.
"""
