"""The intermediate representations (DESIGN.md section 2): the typed expression IR of the
lambdas (expr.py), the fused-pass program a plan hands the code generator (program.py: Pass,
ElementProgram, terminals), the column operations' specs (stage_specs.py) and the kernel IR
every GPU dialect prints (kernel_ir.py)."""
