#!/usr/bin/env python3
"""Every ladder folder under chapters/ (chNN_name/<ladder>/, `common` aside) has a README.md with one
'<!-- aisp:results:begin -->' followed by one '<!-- aisp:results:end -->': where `aisp report
--update-readme` writes the generated tables (it leaves a README without them as it is, so a ladder's
measured table would silently never appear; ch02:p2p_copy's had other markers until 2026-11-28).
Exits 1 naming each README at fault."""
import glob, os, sys
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'chapters')
begin, end = '<!-- aisp:results:begin -->', '<!-- aisp:results:end -->'
bad = []
for ladder in sorted(glob.glob(os.path.join(root, 'ch[0-9][0-9]_*', '*', ''))):
    name = os.path.relpath(ladder, root).rstrip('/')
    if os.path.basename(name) == 'common':
        continue
    readme = os.path.join(ladder, 'README.md')
    if not os.path.isfile(readme):
        bad.append(f'chapters/{name}/: no README.md')
        continue
    text = open(readme, encoding='utf-8').read()
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        bad.append(f'chapters/{name}/README.md: needs one {begin} followed by one {end}')
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
