"""Issue 14 item 7: the guide's group_by and join examples (and issue 29's Strings) run as written (each block saved
as a file and run: lambdas need a source file)."""
import pathlib
import re
import runpy

import pytest

GUIDE = pathlib.Path(__file__).parent.parent / "docs" / "guide.md"


def _blocks(section: str) -> list[str]:
    text = GUIDE.read_text()
    start = text.index(f"## {section}")
    end = text.index("\n## ", start + 3)
    return re.findall(r"```python\n(.*?)```", text[start:end], re.S)


@pytest.mark.parametrize("section", ["Grouping: group_by", "Joining: join and left_join", "Strings"])
def test_item7_guide_examples_run(section, tmp_path):
    blocks = _blocks(section)
    assert blocks
    for i, code in enumerate(blocks):
        path = tmp_path / f"example_{i}.py"
        path.write_text(code)
        runpy.run_path(str(path))
