"""The lambda frontend: Python lambdas (or query text) -> typed expression IR.

capture.py finds a lambda's AST and its captured values, translate*.py turn it into
codegen.expr trees under NumPy 2 / NEP 50 semantics, chain_text.py parses CLI query text.
"""
# Names resolve on first use (PEP 562): `import querycompute` needs only capture.py on its
# warm path; translation and the CLI parser load when a lambda is first translated / parsed.
_WHERE = {"LambdaSource": "capture", "capture_key": "capture", "capture_values": "capture",
          "lambda_source": "capture", "ChainOp": "chain_text", "parse_chain": "chain_text",
          "translate": "translate", "RecordVal": "values", "Scalar": "values",
          "TupleVal": "values", "Value": "values"}


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = sorted(_WHERE)
