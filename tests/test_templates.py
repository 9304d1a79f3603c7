"""README's example kernel is the file the tests load (tests/readme_kernel.py)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readmes_example_is_the_file_the_tests_load():
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```python\n# my_matmul.py\n") + len("```python\n# my_matmul.py\n")
    example = readme[start:readme.index("```", start)]
    source = (Path(__file__).parent / "readme_kernel.py").read_text()
    assert source.split('"""', 2)[2].strip() == example.strip()

