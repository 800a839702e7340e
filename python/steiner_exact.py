"""Exact minimum Steiner tree (unit edge costs) as an integer program solved by HiGHS.

Input (one JSON object on stdin):
    {"nodes": N, "edges": [[a, b], ...], "root": r, "terminals": [t, ...],
     "time_limit_s": 60.0}                      # time_limit_s optional
The graph is undirected, nodes are 0..N-1; self loops are ignored and duplicate
edges merged. Output (one JSON object on stdout):
    {"status": "optimal", "cost": C, "edges": [[parent, child], ...]}
with the C tree arcs oriented away from the root, sorted. Exit codes: 0 optimal;
2 malformed input or a terminal unreachable from the root (message on stderr);
3 HiGHS did not prove optimality (stdout {"status": <HiGHS model status>,
"cost": <best found or null>, "lower_bound": <proven bound or null>});
4 the solution failed the tree check (message on stderr).

Formulation (directed multi-commodity flow). Every edge {u,v} becomes two arcs
(u,v), (v,u), each with a binary x_a ("arc a is in the tree"). For every terminal
t != root, a commodity with flows f^t_a in [0,1] and f^t_a <= x_a: the root sends
one unit of t, t absorbs it, every other node conserves it. Minimise sum x_a.
Also x_(u,v) + x_(v,u) <= 1, in-degree (sum of incoming x) <= 1 at non-root nodes,
and 0 at the root.

Why it is exact: orienting an optimal Steiner tree away from the root, with each
commodity routed along its tree path, satisfies every constraint, so
ILP optimum <= Steiner optimum. Conversely, in any feasible integral solution
each terminal receives one unit of flow from the root through arcs with x_a = 1,
so by max-flow/min-cut the chosen arcs hold a directed root->t path for every t:
their underlying edges connect root and all terminals, which takes at least
(Steiner optimum) edges. Hence ILP optimum == Steiner optimum, and an optimal x
is exactly an arborescence (fewer arcs could not reach every node they touch).
The objective is integral and mip_rel_gap is 0, so "optimal" from HiGHS is a
proof, not a heuristic; the result is re-checked as a tree before printing.
"""

import json
import sys

import highspy
import numpy as np

INF = highspy.kHighsInf


def fail(msg, code=2):
    print(f"steiner_exact: {msg}", file=sys.stderr)
    sys.exit(code)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def parse(stream):
    try:
        req = json.loads(stream.read())
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        fail(f"bad JSON: {e}")
    if not isinstance(req, dict):
        fail("input must be a JSON object")
    for key in ("nodes", "edges", "root", "terminals"):
        if key not in req:
            fail(f"missing key {key!r}")
    n = req["nodes"]
    if not is_int(n) or n < 1:
        fail("'nodes' must be a positive integer")

    def node(v, what):
        if not is_int(v) or not 0 <= v < n:
            fail(f"{what} {v!r} is not a node id in 0..{n - 1}")
        return v

    if not isinstance(req["edges"], list):
        fail("'edges' must be a list of [a, b] pairs")
    edges = set()
    for e in req["edges"]:
        if not isinstance(e, list) or len(e) != 2:
            fail(f"edge {e!r} is not an [a, b] pair")
        a, b = node(e[0], "edge endpoint"), node(e[1], "edge endpoint")
        if a != b:
            edges.add((min(a, b), max(a, b)))
    root = node(req["root"], "root")
    if not isinstance(req["terminals"], list):
        fail("'terminals' must be a list of node ids")
    terms = sorted({node(t, "terminal") for t in req["terminals"]} - {root})
    limit = req.get("time_limit_s", 60.0)
    if not isinstance(limit, (int, float)) or isinstance(limit, bool) or not limit > 0:
        fail("'time_limit_s' must be a positive number")
    return n, sorted(edges), root, terms, float(limit)


def reachable(root, arcs):
    """Nodes reachable from root over the directed arcs."""
    out = {}
    for u, v in arcs:
        out.setdefault(u, []).append(v)
    seen, stack = {root}, [root]
    while stack:
        for v in out.get(stack.pop(), ()):
            if v not in seen:
                seen.add(v)
                stack.append(v)
    return seen


def solve(edges, root, terms, limit):
    """Returns (HiGHS model status string, cost or None, bound or None, arcs or None)."""
    arcs = [a for u, v in edges for a in ((u, v), (v, u))]  # arc 2e = (u,v), 2e+1 = (v,u)
    na, k = len(arcs), len(terms)
    nodes = sorted({w for e in edges for w in e} | {root})
    into = {w: [] for w in nodes}
    outof = {w: [] for w in nodes}
    for a, (u, v) in enumerate(arcs):
        outof[u].append(a)
        into[v].append(a)

    # Columns: x_a = a; f^t_a = na * (1 + i) + a for terminal i.
    rows, lo, hi = [], [], []  # each row: list of (column, coefficient)

    def row(entries, lower, upper):
        rows.append(entries)
        lo.append(lower)
        hi.append(upper)

    for i, t in enumerate(terms):
        base = na * (1 + i)
        for a in range(na):
            row([(base + a, 1.0), (a, -1.0)], -INF, 0.0)  # f^t_a <= x_a
        for w in nodes:  # inflow - outflow = -1 at root, +1 at t, 0 elsewhere
            b = -1.0 if w == root else 1.0 if w == t else 0.0
            row([(base + a, 1.0) for a in into[w]] + [(base + a, -1.0) for a in outof[w]], b, b)
    for e in range(len(edges)):
        row([(2 * e, 1.0), (2 * e + 1, 1.0)], -INF, 1.0)  # one direction per edge
    for w in nodes:
        if w != root and into[w]:
            row([(a, 1.0) for a in into[w]], -INF, 1.0)  # in-degree <= 1

    ncol = na * (1 + k)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = ncol, len(rows)
    lp.col_cost_ = np.array([1.0] * na + [0.0] * (na * k))
    lp.col_lower_ = np.zeros(ncol)
    # Arcs into the root are fixed to 0 (root in-degree 0).
    lp.col_upper_ = np.array([0.0 if arcs[c % na][1] == root else 1.0 for c in range(ncol)])
    lp.integrality_ = [highspy.HighsVarType.kInteger] * na + [highspy.HighsVarType.kContinuous] * (na * k)
    lp.row_lower_, lp.row_upper_ = np.array(lo), np.array(hi)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = ncol, len(rows)
    lp.a_matrix_.start_ = np.cumsum([0] + [len(r) for r in rows], dtype=np.int32)
    lp.a_matrix_.index_ = np.array([c for r in rows for c, _ in r], dtype=np.int32)
    lp.a_matrix_.value_ = np.array([v for r in rows for _, v in r])

    h = highspy.Highs()
    for opt, val in (("output_flag", False), ("random_seed", 0), ("threads", 1),
                     ("time_limit", limit), ("mip_rel_gap", 0.0)):
        h.setOptionValue(opt, val)
    h.passModel(lp)
    h.run()
    status = h.getModelStatus()
    name = h.modelStatusToString(status)
    info = h.getInfo()
    has_sol = info.primal_solution_status == 2  # kSolutionStatusFeasible
    cost = round(info.objective_function_value) if has_sol else None
    bound = info.mip_dual_bound if abs(info.mip_dual_bound) < INF else None
    if status != highspy.HighsModelStatus.kOptimal:
        return name, cost, bound, None
    x = h.getSolution().col_value
    return "optimal", cost, bound, sorted(arcs[a] for a in range(na) if x[a] > 0.5)


def check_tree(edges, root, terms, cost, tree):
    """Raises AssertionError unless tree is an arborescence from root reaching all terminals."""
    edge_set = set(edges)
    assert len(tree) == cost, f"{len(tree)} arcs but cost {cost}"
    assert all((min(u, v), max(u, v)) in edge_set for u, v in tree), "arc not in the graph"
    heads = [v for _, v in tree]
    assert root not in heads and len(heads) == len(set(heads)), "a node has two parents"
    seen = reachable(root, tree)
    assert set(heads) <= seen, "an arc is not reachable from the root"
    assert set(terms) <= seen, "a terminal is not reached"


def main():
    n, edges, root, terms, limit = parse(sys.stdin)
    # Prune to the root's connected component (edges are undirected here).
    comp = reachable(root, edges + [(v, u) for u, v in edges])
    missing = [t for t in terms if t not in comp]
    if missing:
        fail(f"terminal(s) {missing} unreachable from root {root}")
    edges = [e for e in edges if e[0] in comp]
    if not terms:
        status, cost, bound, tree = "optimal", 0, 0.0, []
    else:
        status, cost, bound, tree = solve(edges, root, terms, limit)
    if status != "optimal":
        print(json.dumps({"status": status, "cost": cost, "lower_bound": bound}))
        sys.exit(3)
    try:
        check_tree(edges, root, terms, cost, tree)
    except AssertionError as e:
        fail(f"internal error, solution is not a Steiner tree: {e}", 4)
    print(json.dumps({"status": "optimal", "cost": cost, "edges": [list(a) for a in tree]}))


if __name__ == "__main__":
    main()
