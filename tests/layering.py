#!/usr/bin/env python3
"""Checks every #include "..." in src/ against the layer table src/layers.txt.

A file in src/<layer>/ may include headers of its own layer and of the layers the table
lets it use, directly or through the layers those use (the relation is transitive, as the
CMake libraries' PUBLIC links are). The table itself must name known layers only, have no
cycles, and cover every folder of src/. Prints one line per violation (file:line: the
include and the rule it breaks) and exits 1 if there is any.

usage: layering.py [SOURCE_ROOT]   (default: the repository holding this script)
       layering.py --self-test      (the check catches what it should, on a made-up tree)
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_table(path):
    """layer -> list of layers it uses directly, in file order."""
    table = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.fullmatch(r"([a-z_]+):\s*([a-z_ ]*)", line)
            if not m:
                sys.exit(f"{path}:{n}: expected 'layer: used used ...', got {line!r}")
            table[m.group(1)] = m.group(2).split()
    return table


def table_errors(table, src):
    errors = []
    for layer, uses in table.items():
        for used in uses:
            if used not in table:
                errors.append(f"src/layers.txt: layer '{layer}' uses '{used}', which is not a layer")
            elif used == "cli":
                errors.append(f"src/layers.txt: layer '{layer}' uses 'cli', the executable")
    for name in sorted(os.listdir(src)):
        if os.path.isdir(os.path.join(src, name)) and name not in table:
            errors.append(f"src/{name}/: not a layer of src/layers.txt (add a line naming the layers it uses)")
    # Depth-first search for a cycle; reports the first one found as a path.
    state = {}

    def visit(layer, path):
        state[layer] = "open"
        for used in table.get(layer, []):
            if state.get(used) == "open":
                cycle = path[path.index(used):] + [used]
                errors.append("src/layers.txt: cycle " + " -> ".join(cycle))
            elif used in table and used not in state:
                visit(used, path + [used])
        state[layer] = "done"

    for layer in table:
        if layer not in state:
            visit(layer, [layer])
    return errors


def closure(table):
    """layer -> every layer it may use (itself included)."""
    allowed = {}

    def reach(layer, seen):
        for used in table.get(layer, []):
            if used not in seen:
                seen.add(used)
                reach(used, seen)
        return seen

    for layer in table:
        allowed[layer] = reach(layer, {layer})
    return allowed


def include_errors(table, src):
    allowed = closure(table)
    errors = []
    for dirpath, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".h", ".hpp", ".cpp", ".cc", ".inc")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, os.path.dirname(src))
            layer = os.path.relpath(path, src).split(os.sep)[0]
            if layer not in table:
                continue  # reported by table_errors
            with open(path, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m or "/" not in m.group(1):
                        continue  # same-folder include
                    target = m.group(1).split("/")[0]
                    if target not in table or target in allowed[layer]:
                        continue  # not a layer header (e.g. a test helper), or allowed
                    may = ", ".join(sorted(allowed[layer] - {layer})) or "nothing"
                    errors.append(f'{rel}:{n}: #include "{m.group(1)}": layer \'{layer}\' may not use '
                                  f"'{target}' (src/layers.txt: {layer} may use {may})")
    return errors


def check(root):
    src = os.path.join(root, "src")
    table = read_table(os.path.join(src, "layers.txt"))
    return table_errors(table, src) + include_errors(table, src)


def self_test():
    """A tree with one upward include, one unlisted folder and then a cycle: each reported."""
    files = {
        "src/layers.txt": "low:\nhigh: low\n",
        "src/low/a.h": '#include "high/b.h"\n#include <vector>\n',
        "src/high/b.h": '#include "low/a.h"\n#include "b_impl.h"\n',
        "src/stray/c.cpp": "",
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        errors = check(root)
        expected = ["src/stray/: not a layer", 'src/low/a.h:1: #include "high/b.h"']
        ok = len(errors) == 2 and all(any(e.startswith(x) for e in errors) for x in expected)
        with open(os.path.join(root, "src/layers.txt"), "w", encoding="utf-8") as f:
            f.write("low: high\nhigh: low\nstray:\n")
        cycle = check(root)
        ok = ok and any("cycle" in e for e in cycle) and not any("#include" in e for e in cycle)
    print("\n".join(errors + cycle))
    print("self-test " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    errors = check(root)
    for e in errors:
        print(e)
    if errors:
        print(f"{len(errors)} layering violation(s)")
        return 1
    print("layering: every include of src/ is allowed by src/layers.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
