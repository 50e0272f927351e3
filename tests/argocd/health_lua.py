"""Runs the chart's Argo CD health check (charts/inplace-webhook/argocd/health.lua) on a Deployment with a real
Lua 5.1 interpreter (Debian's lua5.1; Argo CD runs such checks in gopher-lua, a Lua 5.1). The object, as JSON,
becomes a Lua table literal bound to the global `obj`, as Argo CD does; the script's `return hs` is printed.

    health(deployment_dict) -> (status, message)
"""

import json
import os
import shutil
import subprocess

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(SOURCE_DIR, "charts", "inplace-webhook", "argocd", "health.lua")


def lua_string(s):
    out = ['"']
    for b in s.encode("utf-8"):
        c = chr(b)
        if c in '"\\' or b < 32 or b >= 127:
            out.append("\\%03d" % b)  # decimal escapes: Lua 5.1 has no \x
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def lua_value(v):
    """JSON value -> Lua literal: objects and arrays become tables (arrays 1-based), null becomes nil."""
    if v is None:
        return "nil"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return lua_string(v)
    if isinstance(v, list):
        return "{" + ", ".join(lua_value(x) for x in v) + "}"
    if isinstance(v, dict):
        return "{" + ", ".join("[%s] = %s" % (lua_string(k), lua_value(x)) for k, x in v.items()
                                if x is not None) + "}"
    raise TypeError("not JSON: %r" % (v,))


def interpreter():
    return shutil.which("lua5.1")


def health(obj, script=SCRIPT):
    """The (status, message) the health check returns for `obj` (a Deployment as the API server returns it)."""
    lua = interpreter()
    if lua is None:
        raise RuntimeError("lua5.1 is not installed (Debian package lua5.1)")
    with open(script) as f:
        body = f.read()
    program = ("obj = %s\nlocal function check()\n%s\nend\nlocal hs = check()\n"
               "io.write(tostring(hs.status), \"\\n\", tostring(hs.message or \"\"))\n") % (lua_value(obj), body)
    p = subprocess.run([lua, "-"], input=program, capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise RuntimeError("lua5.1 failed (%d): %s" % (p.returncode, p.stderr.strip()))
    status, _, message = p.stdout.partition("\n")
    return status, message


if __name__ == "__main__":
    import sys
    print(json.dumps(health(json.load(sys.stdin))))
