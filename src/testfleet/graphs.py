"""Cycles in a stage graph (``needs``, each event's ``needs_on``): one pure function for
the config loader and the stage-trigger rules, so that both name a cycle the same way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def find_cycle(graph: Mapping[str, Sequence[str]]) -> list[str]:
    """One cycle of ``graph`` as the path that closes it (``[a, b, a]``), or ``[]``.

    Nodes are visited in sorted order, so the cycle named is the same on every run; an
    edge to a node that is not a key of ``graph`` (an unknown stage, reported elsewhere)
    leads nowhere."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt in graph and not state.get(nxt):
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if not state.get(node):
            found = visit(node)
            if found:
                return found
    return []
