"""How loosely typed ``streamkit/`` is: the ``Any`` nodes and the ``dict[str, Any]`` spellings.

    python -m benchmarks.type_counts            # this checkout's streamkit/
    python -m benchmarks.type_counts --per-file # and the files that hold them, most first

``Any`` counts every ``Any`` name the parser sees outside import lines (annotations, casts,
``TypeAlias`` values, ``typing.Any`` attributes), the measure issue 32 quotes (~1,000 at its
start). ``dict[str, Any]`` counts the spelling in the source text, whitespace-insensitive, in code
and annotations alike (``Dict[str, Any]`` and ``Mapping[str, Any]`` are not counted). Both are
counts of source, not of a type checker's inferred types: they move only when the code is edited.
"""

from __future__ import annotations

import argparse
import ast
import re
from collections import Counter
from pathlib import Path

_DICT_ANY = re.compile(r"\bdict\[\s*str\s*,\s*Any\s*\]")


def count_file(path: Path) -> tuple[int, int]:
    """``(Any nodes, dict[str, Any] spellings)`` in one Python file."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    anys = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "Any":
            anys += 1
        elif isinstance(node, ast.Attribute) and node.attr == "Any":
            anys += 1
    return anys, len(_DICT_ANY.findall(source))


def count_tree(root: Path) -> tuple[Counter[str], Counter[str]]:
    """Per-file counts of ``Any`` nodes and ``dict[str, Any]`` under ``root``."""
    anys: Counter[str] = Counter()
    dicts: Counter[str] = Counter()
    for path in sorted(root.rglob("*.py")):
        a, d = count_file(path)
        name = str(path.relative_to(root.parent))
        anys[name] = a
        dicts[name] = d
    return anys, dicts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--root", type=Path,
                        default=Path(__file__).resolve().parent.parent / "streamkit")
    parser.add_argument("--per-file", action="store_true")
    args = parser.parse_args(argv)
    anys, dicts = count_tree(args.root)
    print(f"Any nodes: {sum(anys.values())}")
    print(f"dict[str, Any]: {sum(dicts.values())}")
    if args.per_file:
        for name, n in anys.most_common():
            if n or dicts[name]:
                print(f"{n:5d} {dicts[name]:5d}  {name}")


if __name__ == "__main__":
    main()
