#!/usr/bin/env python3
"""Checks that Kiln's source folders include one another in the order of the layers.

CMake enforces the layers (cmake/KilnLayers.cmake): a layer cannot include a header of a
layer above it. Inside a layer nothing stops two folders from including each other, and
jit/ has five. This script reads every `#include "..."` of the library's sources and fails,
naming the file and the include, when a folder includes one that is not below it in ORDER.

usage: check_folder_graph.py [SOURCE_ROOT]
"""
import os
import re
import sys

# Lowest first. A folder may include its own files and those of the folders before it,
# except where BELOW narrows that down (the folders of one layer that stand side by side).
ORDER = [
    'base', 'comm', 'ops',
    'jit/graph', 'jit/fusion', 'jit/backend', 'jit/formats', 'jit/eval', 'jit/api',
    'runtime/cpu', 'runtime/cuda', 'runtime',
]
BELOW = {
    # A device sees the device interface and what it runs, never another device.
    'runtime/cpu': {'base', 'comm', 'ops', 'jit/graph', 'jit/fusion', 'jit/backend'},
    'runtime/cuda': {'base', 'comm', 'ops', 'jit/graph', 'jit/fusion', 'jit/backend'},
    # File formats read and write graphs; they never see fusion or evaluation.
    'jit/formats': {'base', 'comm', 'ops', 'jit/graph', 'jit/backend', 'jit/fusion'},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(path):
    """The ORDER entry that holds `path`, the longest that matches; None outside them."""
    best = None
    for folder in ORDER:
        if path.startswith(folder + '/') and (best is None or len(folder) > len(best)):
            best = folder
    return best


def allowed(source_folder):
    if source_folder in BELOW:
        return BELOW[source_folder] | {source_folder}
    return set(ORDER[:ORDER.index(source_folder) + 1])


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..')
    problems = []
    for top in ('base', 'comm', 'ops', 'jit', 'runtime'):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if not name.endswith(('.h', '.cc', '.inc')):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                source_folder = folder_of(path)
                with open(os.path.join(root, path), encoding='utf-8') as f:
                    text = f.read()
                for included in INCLUDE.findall(text):
                    target = folder_of(included)
                    if target is not None and target not in allowed(source_folder):
                        problems.append(f'{path}: includes "{included}", but {source_folder}/ '
                                        f'may include only {sorted(allowed(source_folder))}')
    for p in problems:
        print(p)
    if problems:
        print(f'{len(problems)} include(s) out of the folder order (scripts/check_folder_graph.py)')
        return 1
    print('every include follows the folder order')
    return 0


if __name__ == '__main__':
    sys.exit(main())
