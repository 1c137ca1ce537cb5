#!/usr/bin/env python3
"""core/'s folders include only downward (core/CMakeLists.txt): exits 1 naming each include that points up."""
import os, re, sys
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'core')
allowed = {
    'base': set(),
    'measure': {'base'},
    'ceilings': {'base', 'measure'},
    'results': {'base', 'measure', 'ceilings'},
    'report': {'base', 'measure', 'ceilings', 'results'},
    'doctor': {'base'},
    'profile': {'base', 'measure', 'ceilings', 'results'},
}
bad = []
for folder in sorted(os.listdir(root)):
    path = os.path.join(root, folder)
    if not os.path.isdir(path):
        continue
    if folder not in allowed:
        bad.append(f'core/{folder}/: a folder the layout does not know (add it to scripts/check-layout.py)')
        continue
    for name in sorted(os.listdir(path)):
        if not name.endswith(('.cpp', '.hpp')):
            continue
        for n, line in enumerate(open(os.path.join(path, name)), 1):
            m = re.match(r'\s*#\s*include\s+"core/(\w+)/', line)
            if m and m.group(1) != folder and m.group(1) not in allowed[folder]:
                bad.append(f'core/{folder}/{name}:{n}: includes core/{m.group(1)}/ (allowed: {sorted(allowed[folder]) or "none"})')
            if re.match(r'\s*#\s*include\s+[<"](cuda|cublas|cudnn|nccl|nvrtc)', line):
                bad.append(f'core/{folder}/{name}:{n}: a CUDA header in core/')
stray = [f for f in os.listdir(root) if f.endswith(('.cpp', '.hpp'))]
bad += [f'core/{f}: a source file outside the concern folders' for f in stray]
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
