"""Issues 13 and 14: the CLI's query text takes the pipeline operators, the positional
terminals and group_by (parsed, never executed)."""
from querycompute.cli.main import main


def test_item3_cli_source_prints_every_stage(capsys):
    assert main(["source", "where(lambda v: v > 3).order_by(lambda v: -v).take(5).scan(lambda a, v: a + v, 0).last()",
                 "--dtype", "float32", "--backend", "opencl"]) == 0
    out = capsys.readouterr().out
    stages = [line for line in out.splitlines() if line.startswith("// ---- stage")]
    assert len(stages) >= 4 and "__kernel" in out and "top-k" in out


def test_item3_cli_explain_distinct_element_at(capsys):
    assert main(["explain", "distinct().element_at(3)", "--dtype", "int32", "--backend", "cuda"]) == 0
    out = capsys.readouterr().out
    assert "first-occurrence flags" in out and "B per element" in out


def test_item1_cli_group_by(capsys):
    assert main(["explain", "where(lambda r: r.qty > 1).group_by(lambda r: (r.flag, r.status))"
                 ".agg(s=qc.sum(lambda r: r.qty), n=qc.count)", "--field", "flag:uint8",
                 "--field", "status:uint8", "--field", "qty:float64", "--backend", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "group_by: groups of equal keys (uint8, uint8)" in out
