#!/usr/bin/env python3
"""Checks the include and link graph of src/ against the layer table of docs/architecture.md.

The table (the one whose header has the columns `module` and `may use`) lists every module folder
of src/ in layer order with the modules it may include and link directly. This check fails, naming
the file and line, on
  - an `#include "M/..."` in src/<module>/ where M is a module not in <module>'s `may use` list;
  - a kvplan_* library in a src/<module>/CMakeLists.txt DEPS/PRIVATE_DEPS list that belongs to a
    module not in that list;
  - a module folder of src/ missing from the table, or a table row naming no folder;
  - a `may use` entry that points down the table (a module may only use modules listed above it),
    which is what keeps the graph free of cycles.

    scripts/ci/check-layering.py [REPO_ROOT]     # exit 0 when the layering holds, 1 otherwise
"""
import os
import re
import sys

# Libraries whose name is not kvplan_<module folder>.
LIBRARY_MODULE = {"kvplan_tokenizer": "model", "kvplan_cli_lib": "cli", "kvplan_kernels": "kernels",
                  "kvplan_runtime_shared": "runtime"}
# Include paths outside src/ that belong to a module: the runtime's installed C header.
PUBLIC_HEADERS = {"kvplan": "runtime"}


def read_table(path):
    lines = open(path, encoding="utf-8").read().splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip().strip("`").lower() for c in line.strip().strip("|").split("|")]
        if "module" in cells and "may use" in cells:
            mod_col, use_col = cells.index("module"), cells.index("may use")
            order, allowed = [], {}
            for row in lines[i + 2:]:
                if not row.strip().startswith("|"):
                    break
                parts = [c.strip() for c in row.strip().strip("|").split("|")]
                module = parts[mod_col].strip("`")
                cell = parts[use_col].replace("—", "")
                # "every module above": the top of the stack (the CLI) may use them all.
                uses = list(order) if "every module above" in cell else re.findall(r"[a-z_]+", cell)
                order.append(module)
                allowed[module] = set(uses)
            return order, allowed
    sys.exit(f"{path}: no table with the columns 'module' and 'may use'")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    src = os.path.join(root, "src")
    order, allowed = read_table(os.path.join(root, "docs", "architecture.md"))
    errors = []
    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    for d in folders:
        if d not in allowed:
            errors.append(f"src/{d}/: a module folder the table of docs/architecture.md does not list")
    for m in order:
        if m not in folders:
            errors.append(f"docs/architecture.md: module '{m}' has no folder src/{m}/")
        for u in allowed[m]:
            if u not in order:
                errors.append(f"docs/architecture.md: '{m}' may use '{u}', which is no module")
            elif order.index(u) >= order.index(m):
                errors.append(f"docs/architecture.md: '{m}' may use '{u}', listed below it (a cycle)")
    include = re.compile(r'^\s*#\s*include\s*"([a-z_]+)/')
    deps = re.compile(r"\b(kvplan_[a-z_]+)\b")
    for module in folders:
        if module not in allowed:
            continue
        ok = allowed[module] | {module}
        for dirpath, _, files in os.walk(os.path.join(src, module)):
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                if name == "CMakeLists.txt":
                    text = open(path, encoding="utf-8").read()
                    for block in re.findall(r"(?:DEPS|PRIVATE_DEPS|target_link_libraries)([^)]*)\)", text):
                        for lib in deps.findall(block):
                            target = LIBRARY_MODULE.get(lib, lib[len("kvplan_"):])
                            if target in allowed and target not in ok:
                                errors.append(f"{rel}: links {lib} (module {target}), which "
                                              f"'{module}' may not use")
                    continue
                if not name.endswith((".h", ".cpp", ".hip")):
                    continue
                for n, line in enumerate(open(path, encoding="utf-8"), 1):
                    m = include.match(line)
                    if not m:
                        continue
                    target = PUBLIC_HEADERS.get(m.group(1), m.group(1))
                    if target in allowed and target not in ok:
                        errors.append(f"{rel}:{n}: includes {m.group(1)}/ (module {target}), which "
                                      f"'{module}' may not use (docs/architecture.md)")
    for e in errors:
        print(e)
    if errors:
        print(f"check-layering: {len(errors)} edge(s) against docs/architecture.md")
        return 1
    print(f"check-layering: {len(folders)} modules, every include and link follows docs/architecture.md")
    return 0


sys.exit(main())
