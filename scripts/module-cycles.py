#!/usr/bin/env python3
# Top-level module import graph of one crate and the edges that lie on a cycle, for
# reading. Edges are `crate::MODULE` paths in each file outside its `#[cfg(test)]`
# part; tests.rs files are skipped. The test that holds the rule (file-level cycles
# too, and the core's layers) is crates/sim/tests/module_cycles.rs.
#
#   scripts/module-cycles.py crates/sim/src [DEPTH]
#
# Prints the graph and the cycle edges; exits 1 when there is a cycle.
# crates/sim/tests/module_cycles.rs checks the same graph in `cargo test`.
import re,sys,os,collections
root=sys.argv[1]; depth=int(sys.argv[2]) if len(sys.argv)>2 else 1
edges=collections.defaultdict(set)
for dp,dn,fn in os.walk(root):
    for f in fn:
        if not f.endswith('.rs'): continue
        p=os.path.join(dp,f); rel=os.path.relpath(p,root)
        parts=rel[:-3].split('/')
        if parts[-1] in('mod','lib'): parts=parts[:-1]
        if not parts: continue
        if 'tests' in parts[-1]: continue
        src='::'.join(parts[:depth])
        txt=open(p).read()
        # strip test modules crudely
        txt=re.split(r'#\[cfg\(test\)\]',txt)[0]
        for m in re.finditer(r'crate::([a-z_]+)(?:::([a-z_]+))?',txt):
            tgt=m.group(1) if depth==1 else '::'.join([g for g in m.groups() if g][:depth])
            # resolve depth2 only if it's a module dir
            if tgt.split('::')[0]!=src.split('::')[0] or depth>1:
                if tgt!=src: edges[src].add(tgt)
        for m in re.finditer(r'super::([a-z_]+)',txt):
            pass
for s in sorted(edges): print(s,'->',sorted(edges[s]))
# cycles
import itertools
def reach(a):
    seen=set();st=[a]
    while st:
        x=st.pop()
        for y in edges.get(x,()):
            if y not in seen: seen.add(y);st.append(y)
    return seen
cyc=[(a,b) for a in edges for b in edges[a] if a in reach(b)]
print('CYCLE EDGES:',sorted(cyc))
sys.exit(1 if cyc else 0)
