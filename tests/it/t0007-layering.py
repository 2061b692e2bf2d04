#!/usr/bin/env python3
"""t0007-layering: the shape of DESIGN.md's pipeline holds in the built objects of fcgi/:
no two files call each other, directly or round a longer circle; the forward stage
references nothing of route, auto or guard; the driver is the only caller of forward's
attempt. Read from `nm` of the objects, so a test that greps comments cannot be fooled."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import BUILDDIR, run_tests


def objects():
    d = os.path.join(BUILDDIR, "fcgi")
    objs = sorted(f for f in os.listdir(d) if f.endswith(".o"))
    assert len(objs) > 20, objs
    return {re.sub(r"^.*-", "", o[:-2]): os.path.join(d, o) for o in objs}


def symbols(path):
    out = subprocess.run(["nm", path], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBRC" and parts[1].isupper():
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
    return defined, used


def graph():
    objs = objects()
    syms = {name: symbols(path) for name, path in objs.items()}
    owner = {}
    for name, (defined, _) in syms.items():
        for s in defined:
            owner[s] = name
    edges = {name: set() for name in syms}
    refs = {name: set() for name in syms}
    for name, (_, used) in syms.items():
        for s in used:
            o = owner.get(s)
            if o and o != name:
                edges[name].add(o)
                refs[name].add(s)
    return edges, refs


def find_cycle(edges):
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(edges[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if not state.get(m):
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if not state.get(n):
            c = visit(n)
            if c:
                return c
    return None


def test_no_call_cycles_between_files():
    edges, _ = graph()
    cycle = find_cycle(edges)
    assert cycle is None, "fcgi/ files call each other in a circle: " + " -> ".join(cycle)


def test_the_checker_sees_a_cycle():
    """The check itself can fail: a two-file circle and a three-file one are found."""
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) is not None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_forward_knows_nothing_of_route_auto_guard():
    edges, refs = graph()
    for stage in ("route", "auto", "guard", "drive", "retry", "sticky", "wake"):
        assert stage not in edges["forward"], "forward.c references %s.c: %s" % (
            stage, sorted(s for s in refs["forward"] if s.startswith(stage)))
    bad = [s for s in refs["forward"] if re.match(r"(route|auto|guard)_", s)]
    assert not bad, bad


def test_stages_never_reach_back():
    """Later stages do not call earlier ones: forward and the adapters never call the
    driver, the route stage or admit; the serving view calls no stage."""
    edges, _ = graph()
    for late, early in [("forward", "drive"), ("relay", "drive"), ("relay", "forward"),
                        ("proto_openai", "forward"), ("proto_anthropic", "forward"),
                        ("proto_messages", "forward"), ("proto_messages", "drive"), ("relay", "route"),
                        ("serving", "route"), ("serving", "auto"), ("serving", "wake"),
                        ("wake", "route"), ("auto", "route"), ("route", "drive"), ("forward", "admit"),
                        ("cache", "drive"), ("cache", "route"), ("cache", "account"), ("cache", "forward"),
                        ("cache_store", "usage_writer"), ("cache_store", "cache"),
                        ("screen", "relay"), ("screen", "forward"), ("screen", "drive"), ("screen", "cache")]:
        if late in edges:
            assert early not in edges[late], "%s.c calls back into %s.c" % (late, early)
    # R-CACHE: the answer cache is one module the driver and account call, with a pure key
    assert "cache" in edges and "cache_key" in edges, sorted(edges)
    assert "cache" in edges["drive"] and "cache" in edges["account"], (edges["drive"], edges["account"])
    assert not (edges["cache_key"] - {"errors", "usage"}), edges["cache_key"]
    # R-GUARD-3: the relay hands answers to screen.c; the texts it reads are pure
    assert "screen" in edges["relay"], edges["relay"]
    assert "screen_text" in edges and not edges["screen_text"], edges.get("screen_text")


def test_the_translation_is_pure():
    """anthropic*.c and messages*.c (translation), the xlate.c they share and dialect.c touch no
    request, socket or shared state."""
    edges, refs = graph()
    pure = {"errors", "anthropic", "anthropic_stream", "messages", "messages_stream", "xlate", "usage", "dialect"}
    names = [n for n in edges if n.startswith(("anthropic", "messages", "xlate", "dialect"))]
    assert {"anthropic", "messages", "messages_stream", "xlate", "dialect"} <= set(names), names
    for name in names:
        assert not (edges[name] - pure), (name, edges[name])
        assert not [s for s in refs[name] if s.startswith(("shm_", "reply_", "request_", "curl_"))], refs[name]


def test_error_codes_come_from_the_list():
    """A code is named only as ERR_... (errors.def); a string literal would compile with a typo."""
    from harness import SRCDIR
    d = os.path.join(SRCDIR, "fcgi")
    bad = []
    for name in sorted(os.listdir(d)):
        if not name.endswith(".c"):
            continue
        with open(os.path.join(d, name)) as f:
            for n, line in enumerate(f, 1):
                if re.search(r'error_code\s*=\s*"', line) or re.search(r'reply_error(_extra)?\([^,]+,\s*"', line):
                    bad.append("%s:%d: %s" % (name, n, line.strip()))
    assert not bad, bad


if __name__ == "__main__":
    run_tests(globals())
