"""Lowering to kernel IR, shared by the ops (_codegen/ops/<op>/): one element's computation as
kernel statements (element.py), the block-level building blocks (block.py: block reductions
and scans with fixed tree shapes), wide loads and stores of contiguous runs (vector.py) and
logical blocks, which make a kernel's results independent of the physical grid
(logical_blocks.py)."""
