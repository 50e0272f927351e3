"""The three PATCH bodies kube-apiserver accepts (server-side apply is not implemented):

- application/merge-patch+json (RFC 7386, evanphx/json-patch MergePatch)
- application/json-patch+json (RFC 6902, evanphx/json-patch v4 semantics)
- application/strategic-merge-patch+json (k8s.io/apimachinery/pkg/util/strategicpatch), driven by a small
  schema of the patchStrategy/patchMergeKey struct tags of the types served here.

Errors are ApiError with the status the real server answers (400 for undecodable patches, 422 for
JSON patches that do not apply, 500 "Unknown" for a merge-key-less list element, as kube-apiserver does).
"""

import copy
import json

from kerrors import ApiError

# ----------------------------------------------------------------------------------------------
# Strategic-merge schema. A struct schema maps field name -> spec:
#   ("struct", schema)                     nested struct, merged recursively
#   ("list", "merge", mergeKey, schema)    list merged by key (mergeKey None: set of primitives)
#   ("list", "replace")                    atomic list (the default for lists without a strategy)
# Fields absent from a schema: maps merge recursively, lists are replaced (as for unknown types).


def _merge_list(key, elem=None):
    return ("list", "merge", key, elem or {})


REPLACE = ("list", "replace")

OBJECT_META = {
    "ownerReferences": _merge_list("uid"),
    "finalizers": _merge_list(None),
    "managedFields": REPLACE,
}

CONTAINER = {
    "env": _merge_list("name"),
    "ports": _merge_list("containerPort"),
    "volumeMounts": _merge_list("mountPath"),
    "volumeDevices": _merge_list("devicePath"),
    "envFrom": REPLACE,
    "resizePolicy": REPLACE,
}

POD_SPEC = {
    "containers": _merge_list("name", CONTAINER),
    "initContainers": _merge_list("name", CONTAINER),
    "ephemeralContainers": _merge_list("name", CONTAINER),
    "volumes": _merge_list("name"),
    "imagePullSecrets": _merge_list("name"),
    "hostAliases": _merge_list("ip"),
    "topologySpreadConstraints": _merge_list("topologyKey"),
    "resourceClaims": _merge_list("name"),
    "schedulingGates": _merge_list("name"),
    "tolerations": REPLACE,  # no patchStrategy in core/v1: atomic
    "readinessGates": REPLACE,  # no patchStrategy in core/v1: atomic
}

POD_STATUS = {
    "conditions": _merge_list("type"),
    "podIPs": _merge_list("ip"),
    "hostIPs": _merge_list("ip"),
    "containerStatuses": REPLACE,
    "initContainerStatuses": REPLACE,
    "ephemeralContainerStatuses": REPLACE,
}

POD_TEMPLATE_SPEC = {"metadata": ("struct", OBJECT_META), "spec": ("struct", POD_SPEC)}

POD = {"metadata": ("struct", OBJECT_META), "spec": ("struct", POD_SPEC), "status": ("struct", POD_STATUS)}

WORKLOAD_STATUS = {"conditions": _merge_list("type")}

DEPLOYMENT = {
    "metadata": ("struct", OBJECT_META),
    "spec": ("struct", {"template": ("struct", POD_TEMPLATE_SPEC)}),
    "status": ("struct", WORKLOAD_STATUS),
}

REPLICASET = DEPLOYMENT

GENERIC = {"metadata": ("struct", OBJECT_META)}


def _bad(msg):
    return ApiError.bad_request(msg)


def _strip_directives(v):
    if isinstance(v, dict):
        return {k: _strip_directives(x) for k, x in v.items() if not k.startswith("$") and x is not None}
    if isinstance(v, list):
        return [_strip_directives(x) for x in v if not (isinstance(x, dict) and "$patch" in x and len(x) == 1)]
    return v


def _field_spec(schema, key):
    if schema is None:
        return None
    return schema.get(key)


def strategic_merge(original, patch, schema):
    """Applies a strategic merge patch map to an original map; returns the new map (None = deleted)."""
    if not isinstance(patch, dict):
        raise _bad("unable to find api field in struct for the patch: patch is not a JSON object")
    return _merge_map(original if isinstance(original, dict) else {}, patch, schema)


def _merge_map(original, patch, schema):
    patch = dict(patch)
    directive = patch.pop("$patch", None)
    if directive == "replace":
        return _strip_directives(patch)
    if directive == "delete":
        return None
    if directive not in (None, "merge"):
        raise _bad("Unknown patch type: %s" % directive)
    result = copy.deepcopy(original)
    retain = patch.pop("$retainKeys", None)
    if retain is not None:
        if not isinstance(retain, list):
            raise _bad("invalid patch: $retainKeys must be a list")
        for k in [k for k in result if k not in retain]:
            del result[k]
    orders = {}
    for k in [k for k in patch if k.startswith("$")]:
        v = patch.pop(k)
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            if not isinstance(v, list):
                raise _bad("invalid patch: $deleteFromPrimitiveList must be a list")
            cur = result.get(field)
            if isinstance(cur, list):
                result[field] = [x for x in cur if x not in v]
        elif k.startswith("$setElementOrder/"):
            if not isinstance(v, list):
                raise _bad("invalid patch: $setElementOrder must be a list")
            orders[k.split("/", 1)[1]] = v
        else:
            raise _bad("Unknown patch directive: %s" % k)
    for k, pv in patch.items():
        if pv is None:
            result.pop(k, None)
            continue
        spec = _field_spec(schema, k)
        ov = result.get(k)
        if isinstance(pv, dict):
            sub = spec[1] if spec and spec[0] == "struct" else None
            merged = _merge_map(ov if isinstance(ov, dict) else {}, pv, sub)
            if merged is None:
                result.pop(k, None)
            else:
                result[k] = merged
        elif isinstance(pv, list):
            if spec and spec[0] == "list" and spec[1] == "merge":
                result[k] = _merge_list_values(ov if isinstance(ov, list) else [], pv, spec[2], spec[3])
            else:
                result[k] = _strip_directives(pv)
        else:
            result[k] = pv
    for field, order in orders.items():
        spec = _field_spec(schema, field)
        cur = result.get(field)
        if isinstance(cur, list):
            key = spec[2] if spec and spec[0] == "list" and len(spec) > 2 else None
            result[field] = _apply_order(cur, order, key)
    return result


def _apply_order(items, order, key):
    def ident(x):
        v = x.get(key) if key is not None and isinstance(x, dict) else x
        return json.dumps(v, sort_keys=True)

    pos = {}
    for i, o in enumerate(order):
        pos.setdefault(ident(o), i)
    ordered = [x for x in items if ident(x) in pos]
    ordered.sort(key=lambda x: pos[ident(x)])
    return ordered + [x for x in items if ident(x) not in pos]


def _merge_list_values(original, patch, merge_key, elem_schema):
    if any(isinstance(e, dict) and e.get("$patch") == "replace" for e in patch):
        return _strip_directives([e for e in patch if not (isinstance(e, dict) and e.get("$patch") == "replace")])
    result = copy.deepcopy(original)
    if merge_key is None:
        for v in patch:
            if isinstance(v, dict) and "$patch" in v:
                raise _bad("invalid patch: directive in a list of primitives")
            if v not in result:
                result.append(v)
        return result
    for pe in patch:
        if not isinstance(pe, dict):
            raise ApiError(500, "Unknown", "unable to merge: list element %s is not an object" % json.dumps(pe))
        directive = pe.get("$patch")
        if merge_key not in pe:
            raise ApiError(500, "Unknown", "map: %s does not contain declared merge key: %s" % (_go_map(pe), merge_key))
        kv = pe[merge_key]
        if directive == "delete":
            result = [e for e in result if not (isinstance(e, dict) and e.get(merge_key) == kv)]
            continue
        idx = next((i for i, e in enumerate(result) if isinstance(e, dict) and e.get(merge_key) == kv), None)
        if idx is None:
            merged = _merge_map({}, pe, elem_schema)
            if merged is not None:
                result.append(merged)
        else:
            merged = _merge_map(result[idx], pe, elem_schema)
            if merged is None:
                del result[idx]
            else:
                result[idx] = merged
    return result


def _go_map(m):
    return "map[" + " ".join("%s:%s" % (k, v) for k, v in sorted(m.items())) + "]"


# ----------------------------------------------------------------------------------------------
# RFC 7386

def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


# ----------------------------------------------------------------------------------------------
# RFC 6902 with evanphx/json-patch v4 behaviour

class JsonPatchError(Exception):
    pass


def _unescape(token):
    return token.replace("~1", "/").replace("~0", "~")


def _split_pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise JsonPatchError("invalid JSON pointer: %s" % path)
    return [_unescape(t) for t in path[1:].split("/")]


def _index(token, length, allow_end):
    if token == "-" and allow_end:
        return length
    try:
        if token != str(int(token)) or token.startswith("-") or (len(token) > 1 and token.startswith("0")):
            raise ValueError
        i = int(token)
    except ValueError:
        raise JsonPatchError("Unable to access invalid index: %s: invalid index referenced" % token)
    limit = length if allow_end else length - 1
    if i < 0 or i > limit:
        raise JsonPatchError("Unable to access invalid index: %d: invalid index referenced" % i)
    return i


def _container(doc, tokens, op, path):
    cur = doc
    for t in tokens[:-1]:
        if isinstance(cur, dict):
            if t not in cur:
                raise JsonPatchError("%s operation does not apply: doc is missing path: \"%s\": missing value" %
                                     (op, path))
            cur = cur[t]
        elif isinstance(cur, list):
            try:
                cur = cur[_index(t, len(cur), False)]
            except JsonPatchError:
                raise JsonPatchError("%s operation does not apply: doc is missing path: \"%s\": missing value" %
                                     (op, path))
        else:
            raise JsonPatchError("%s operation does not apply: doc is missing path: \"%s\": missing value" % (op, path))
    if not isinstance(cur, (dict, list)):
        raise JsonPatchError("%s operation does not apply: doc is missing path: \"%s\": missing value" % (op, path))
    return cur


def _get(doc, path):
    cur = doc
    for t in _split_pointer(path):
        if isinstance(cur, dict):
            if t not in cur:
                return False, None
            cur = cur[t]
        elif isinstance(cur, list):
            try:
                cur = cur[_index(t, len(cur), False)]
            except JsonPatchError:
                return False, None
        else:
            return False, None
    return True, cur


def _add(doc, path, value, op="add"):
    tokens = _split_pointer(path)
    if not tokens:
        return value
    con = _container(doc, tokens, op, path)
    last = tokens[-1]
    if isinstance(con, dict):
        con[last] = value
    else:
        con.insert(_index(last, len(con), True), value)
    return doc


def _remove(doc, path, op="remove"):
    tokens = _split_pointer(path)
    if not tokens:
        raise JsonPatchError("%s operation does not apply: doc is missing path: \"%s\"" % (op, path))
    con = _container(doc, tokens, op, path)
    last = tokens[-1]
    if isinstance(con, dict):
        if last not in con:
            raise JsonPatchError("Unable to remove nonexistent key: %s: missing value" % last)
        return con.pop(last)
    return con.pop(_index(last, len(con), False))


def json_patch(doc, ops, wrap_errors=True):
    """Applies RFC 6902 operations to a deep copy of doc. An operation that does not apply raises
    ApiError 422 (as a PATCH request answers), or JsonPatchError with the library's message when
    wrap_errors is False (a webhook's patch: kube-apiserver reports that one as an internal error)."""
    if not isinstance(ops, list):
        raise ApiError.bad_request("json: cannot unmarshal %s into Go value of type jsonpatch.Patch" %
                                   ("object" if isinstance(ops, dict) else type(ops).__name__))
    if len(ops) > 10000:
        raise ApiError(413, "RequestEntityTooLarge", "Request entity too large: The allowed maximum operations in a "
                                                     "JSON patch is 10000, got %d" % len(ops))
    doc = copy.deepcopy(doc)
    try:
        for o in ops:
            if not isinstance(o, dict):
                raise ApiError.bad_request("json: cannot unmarshal into Go value of type jsonpatch.Operation")
            kind = o.get("op")
            path = o.get("path")
            if kind not in ("add", "remove", "replace", "move", "copy", "test"):
                raise JsonPatchError("Unexpected kind: %s" % kind)
            if not isinstance(path, str):
                raise JsonPatchError("%s operation missing path" % kind)
            if kind == "add":
                if "value" not in o:
                    raise JsonPatchError("add operation missing value")
                doc = _add(doc, path, copy.deepcopy(o["value"]))
            elif kind == "remove":
                _remove(doc, path)
            elif kind == "replace":
                if "value" not in o:
                    raise JsonPatchError("replace operation missing value")
                tokens = _split_pointer(path)
                if not tokens:
                    doc = copy.deepcopy(o["value"])
                    continue
                con = _container(doc, tokens, "replace", path)
                last = tokens[-1]
                if isinstance(con, dict):
                    if last not in con:
                        raise JsonPatchError("replace operation does not apply: doc is missing key: %s: missing value"
                                             % path)
                    con[last] = copy.deepcopy(o["value"])
                else:
                    con[_index(last, len(con), False)] = copy.deepcopy(o["value"])
            elif kind in ("move", "copy"):
                frm = o.get("from")
                if not isinstance(frm, str):
                    raise JsonPatchError("%s operation missing from" % kind)
                ok, val = _get(doc, frm)
                if not ok:
                    raise JsonPatchError("%s operation does not apply: doc is missing from path: %s: missing value" %
                                         (kind, frm))
                if kind == "move":
                    _remove(doc, frm, "move")
                    doc = _add(doc, path, val, "move")
                else:
                    doc = _add(doc, path, copy.deepcopy(val), "copy")
            elif kind == "test":
                ok, val = _get(doc, path)
                expected = o.get("value")
                if not ok:
                    if expected is None and "value" in o:
                        continue
                    raise JsonPatchError("testing value %s failed: test failed" % path)
                if not _json_equal(val, expected):
                    raise JsonPatchError("testing value %s failed: test failed" % path)
    except JsonPatchError:
        # kube-apiserver wraps every Apply error into NewGenericServerResponse(422, ...), whose
        # message is the fixed generic one.
        if not wrap_errors:
            raise
        raise ApiError.generic(422)
    return doc


def _json_equal(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b if isinstance(a, bool) and isinstance(b, bool) else False
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    return a == b
