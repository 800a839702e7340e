"""Tests for python/steiner_exact.py, the exact (HiGHS ILP) minimum Steiner tree solver.

Each case runs the script as a subprocess on a JSON instance and checks the cost
against a value derived by hand or by brute force, and that the returned arcs
really are a tree from the root reaching every terminal.

    pip install -r tests/python/requirements.txt -r python/requirements.txt
    pytest tests/python/test_steiner_exact.py
"""

import itertools
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / ".." / ".." / "python" / "steiner_exact.py"


def run(instance):
    text = instance if isinstance(instance, str) else json.dumps(instance)
    return subprocess.run(
        [sys.executable, str(SCRIPT)], input=text, capture_output=True, text=True, timeout=60
    )


def solve(nodes, edges, root, terminals):
    """Runs the solver, asserts success and a valid tree, returns the cost."""
    p = run({"nodes": nodes, "edges": [list(e) for e in edges], "root": root, "terminals": terminals})
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["status"] == "optimal"
    check_tree(edges, root, terminals, out)
    return out["cost"]


def check_tree(edges, root, terminals, out):
    arcs = [tuple(a) for a in out["edges"]]
    assert arcs == sorted(arcs)
    assert len(arcs) == out["cost"]
    undirected = {frozenset(e) for e in edges}
    assert all(frozenset(a) in undirected for a in arcs)
    heads = [v for _, v in arcs]
    assert root not in heads and len(heads) == len(set(heads))  # one parent each
    reached = {root}
    for _ in arcs:  # arcs are sorted, not topological: relax |arcs| times
        reached |= {v for u, v in arcs if u in reached}
    assert set(heads) <= reached  # no detached arcs or cycles
    assert set(terminals) <= reached


def brute_force(nodes, edges, root, terminals):
    """Smallest connected node set containing root and terminals, minus one."""
    adj = {v: set() for v in range(nodes)}
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    must = set(terminals) | {root}
    others = [v for v in range(nodes) if v not in must]
    for r in range(len(others) + 1):
        for extra in itertools.combinations(others, r):
            keep = must | set(extra)
            seen, stack = {root}, [root]
            while stack:
                for w in adj[stack.pop()] & keep:
                    if w not in seen:
                        seen.add(w)
                        stack.append(w)
            if seen == keep:
                return len(keep) - 1
    raise AssertionError("terminals not connected")


def test_path_graph_and_determinism():
    edges = [(i, i + 1) for i in range(6)] + [(3, 3), (4, 3), (2, 3)]  # self loop, duplicates
    inst = {"nodes": 7, "edges": [list(e) for e in edges], "root": 0, "terminals": [4, 2, 4, 0]}
    p1, p2 = run(inst), run(inst)
    assert p1.returncode == 0, p1.stderr
    assert p1.stdout == p2.stdout
    out = json.loads(p1.stdout)
    assert out == {"status": "optimal", "cost": 4, "edges": [[0, 1], [1, 2], [2, 3], [3, 4]]}
    check_tree(edges, 0, [4, 2], out)
    # Root in the middle, terminals both ways; root alone.
    assert solve(7, edges, 3, [0, 6]) == 6
    assert solve(7, edges, 3, [3]) == 0
    assert solve(7, edges, 3, []) == 0


def test_star_uses_hub():
    # Hub 0 joined to leaves 1..6, plus a long path 1-7-8-9-2 between two leaves.
    edges = [(0, i) for i in range(1, 7)] + [(1, 7), (7, 8), (8, 9), (9, 2)]
    assert solve(10, edges, 1, [2, 3, 4]) == 4  # 1-0, 0-2, 0-3, 0-4
    assert solve(10, edges, 1, [2]) == 2


def hub_instance():
    """Root 0 and terminals 1..3; a Steiner hub 4 two hops from each of them (spokes),
    and a direct 3-hop path between every pair of {0,1,2,3} (21 nodes, 26 edges)."""
    edges, n = [], 5

    def path(a, b, length):
        nonlocal n
        prev = a
        for _ in range(length - 1):
            edges.append((prev, n))
            prev, n = n, n + 1
        edges.append((prev, b))

    for t in range(4):
        path(4, t, 2)
    for a, b in itertools.combinations(range(4), 2):
        path(a, b, 3)
    return n, edges


def shortest_path_heuristic(nodes, edges, root, terminals):
    """Takahashi-Matsuyama: repeatedly attach the terminal nearest to the tree by a shortest path."""
    adj = {v: [] for v in range(nodes)}
    for a, b in edges:
        adj[a].append(b)
        adj[b].append(a)
    tree, cost, left = {root}, 0, set(terminals) - {root}
    while left:
        parent, frontier = {v: None for v in tree}, sorted(tree)
        while not left & set(frontier):
            nxt = []
            for u in frontier:
                for w in sorted(adj[u]):
                    if w not in parent:
                        parent[w] = u
                        nxt.append(w)
            frontier = nxt
        v = min(left & set(frontier))
        while v not in tree:
            tree.add(v)
            cost += 1
            v = parent[v]
        left -= tree
    return cost


def test_beats_shortest_path_heuristic():
    # Terminals are pairwise 3 apart directly but 4 apart through the hub, so the
    # heuristic chains direct paths (3 * 3 = 9) while the hub star costs 4 * 2 = 8.
    # 8 is the optimum: brute force over the 17 non-terminal nodes agrees (checked
    # offline; the smallest connected superset of the terminals has 9 nodes).
    n, edges = hub_instance()
    assert shortest_path_heuristic(n, edges, 0, [1, 2, 3]) == 9
    assert solve(n, edges, 0, [1, 2, 3]) == 8


def leaf_spine(spine_leaves, leaves=4, hosts_per_leaf=2):
    """Spines S (ids 0..), leaves L, hosts; spine_leaves[s] = leaves spine s links to."""
    ns = len(spine_leaves)
    leaf = lambda l: ns + l
    host = lambda l, h: ns + leaves + l * hosts_per_leaf + h
    edges = [(s, leaf(l)) for s, ls in enumerate(spine_leaves) for l in ls]
    edges += [(leaf(l), host(l, h)) for l in range(leaves) for h in range(hosts_per_leaf)]
    return ns + leaves * (1 + hosts_per_leaf), edges, host(0, 0), [host(l, 0) for l in (1, 2, 3)]


@pytest.mark.parametrize(
    "spine_leaves, expected",
    [
        # Full 3x4 fabric: host-leaf 1 + leaf-spine 1 + spine-leaves 3 + leaf-hosts 3.
        ([[0, 1, 2, 3]] * 3, 8),
        # No spine reaches all four leaves; S0 {0,1,2} and S1 {1,2,3} share a leaf,
        # so two spines: 4 host edges + (4 leaves + 2 spines - 1) = 9.
        ([[0, 1, 2], [1, 2, 3], [0, 3]], 9),
        # Chain L0-S0-L1-S1-L2-S2-L3: all three spines needed: 4 + (4 + 3 - 1) = 10.
        ([[0, 1], [1, 2], [2, 3]], 10),
    ],
)
def test_leaf_spine(spine_leaves, expected):
    n, edges, root, terms = leaf_spine(spine_leaves)
    assert solve(n, edges, root, terms) == expected
    assert brute_force(n, edges, root, terms) == expected


def random_instance(seed):
    rng = random.Random(seed)
    n = rng.randint(5, 9)
    order = list(range(n))
    rng.shuffle(order)
    edges = [(order[i], order[rng.randrange(i)]) for i in range(1, n)]  # random spanning tree
    edges += [tuple(rng.sample(range(n), 2)) for _ in range(rng.randint(0, n))]
    edges += [(v, v) for v in rng.sample(range(n), 1)] + edges[:1]  # a self loop and a duplicate
    root = rng.randrange(n)
    terms = rng.sample(range(n), rng.randint(1, n - 1))
    return n, edges, root, terms


@pytest.mark.parametrize("seed", range(30))
def test_matches_brute_force(seed):
    n, edges, root, terms = random_instance(seed)
    assert solve(n, edges, root, terms) == brute_force(n, edges, root, terms)


def test_disconnected_parts_pruned():
    # Component {0,1,2} plus an unrelated component {3,4}; no terminal in it.
    assert solve(5, [(0, 1), (1, 2), (3, 4)], 0, [2]) == 2


def test_time_limit_exit_3():
    w = 12  # 12x12 grid, 15 terminals: not solvable in a nanosecond
    edges = [[r * w + c, r * w + c + 1] for r in range(w) for c in range(w - 1)]
    edges += [[r * w + c, (r + 1) * w + c] for r in range(w - 1) for c in range(w)]
    terms = random.Random(1).sample(range(1, w * w), 15)
    p = run({"nodes": w * w, "edges": edges, "root": 0, "terminals": terms, "time_limit_s": 1e-9})
    assert p.returncode == 3, (p.stdout, p.stderr)
    out = json.loads(p.stdout)
    assert out["status"] != "optimal" and "Traceback" not in p.stderr


GOOD = {"nodes": 3, "edges": [[0, 1], [1, 2]], "root": 0, "terminals": [2]}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{not json",
        "[1, 2]",
        "[" * 100000,  # nesting deeper than the JSON parser's recursion limit
        json.dumps({k: v for k, v in GOOD.items() if k != "edges"}),
        json.dumps({k: v for k, v in GOOD.items() if k != "terminals"}),
        json.dumps({**GOOD, "nodes": 0}),
        json.dumps({**GOOD, "nodes": "3"}),
        json.dumps({**GOOD, "root": 3}),
        json.dumps({**GOOD, "root": -1}),
        json.dumps({**GOOD, "root": True}),
        json.dumps({**GOOD, "terminals": [5]}),
        json.dumps({**GOOD, "terminals": 2}),
        json.dumps({**GOOD, "edges": [[0, 1, 2]]}),
        json.dumps({**GOOD, "edges": [[0, 7]]}),
        json.dumps({**GOOD, "edges": [[0, 1.5]]}),
        json.dumps({**GOOD, "edges": {"0": 1}}),
        json.dumps({**GOOD, "time_limit_s": -1}),
        json.dumps({**GOOD, "time_limit_s": "fast"}),
        json.dumps({**GOOD, "edges": [[0, 1]]}),  # terminal 2 unreachable
    ],
)
def test_malformed_input_exits_2(text):
    p = run(text)
    assert p.returncode == 2, (text, p.stdout, p.stderr)
    assert p.stdout == ""
    assert p.stderr.strip() and len(p.stderr.strip().splitlines()) == 1
    assert "Traceback" not in p.stderr
