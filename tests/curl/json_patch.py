"""A small RFC 6902 applier for checking the webhook's patches independently of the C++ code."""
import copy


def _tokens(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"bad pointer {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _parent(doc, tokens):
    cur = doc
    for t in tokens[:-1]:
        cur = cur[int(t)] if isinstance(cur, list) else cur[t]
    return cur, tokens[-1]


def apply(doc, patch):
    doc = copy.deepcopy(doc)
    for op in patch:
        tokens = _tokens(op["path"])
        kind = op["op"]
        if kind in ("add", "replace"):
            if not tokens:
                doc = copy.deepcopy(op["value"])
                continue
            parent, last = _parent(doc, tokens)
            if isinstance(parent, list):
                if last == "-":
                    parent.append(copy.deepcopy(op["value"]))
                elif kind == "add":
                    parent.insert(int(last), copy.deepcopy(op["value"]))
                else:
                    parent[int(last)] = copy.deepcopy(op["value"])
            else:
                if kind == "replace" and last not in parent:
                    raise KeyError(f"replace of missing {op['path']}")
                parent[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            parent, last = _parent(doc, tokens)
            if isinstance(parent, list):
                del parent[int(last)]
            else:
                del parent[last]
        elif kind == "test":
            parent, last = _parent(doc, tokens)
            got = parent[int(last)] if isinstance(parent, list) else parent[last]
            if got != op["value"]:
                raise ValueError(f"test failed at {op['path']}")
        else:
            raise ValueError(f"unsupported op {kind}")
    return doc
