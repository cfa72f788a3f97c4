"""The lambda frontend: Python lambdas (or query text) -> typed expression IR.

capture.py finds a lambda's AST and its captured values, translate*.py turn it into
codegen.expr trees under NumPy 2 / NEP 50 semantics, chain_text.py parses CLI query text.
"""
from .capture import LambdaSource, capture_key, capture_values, lambda_source
from .chain_text import ChainOp, parse_chain
from .translate import translate
from .values import RecordVal, Scalar, TupleVal, Value

__all__ = ["lambda_source", "capture_values", "capture_key", "LambdaSource", "Scalar", "TupleVal",
           "RecordVal", "Value", "translate", "parse_chain", "ChainOp"]
