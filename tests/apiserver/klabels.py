"""Label/field selectors and the name/label/annotation syntax checks of k8s.io/apimachinery.

Messages follow apimachinery/pkg/util/validation (IsQualifiedName, IsValidLabelValue,
IsDNS1123Subdomain, IsDNS1123Label) so that 422 bodies read like the real ones.
"""

import re

from kerrors import ApiError, FieldError

_QNAME_CHAR_FMT = "[A-Za-z0-9]"
_QNAME_EXT_CHAR_FMT = "[-A-Za-z0-9_.]"
QUALIFIED_NAME_FMT = "(" + _QNAME_CHAR_FMT + _QNAME_EXT_CHAR_FMT + "*)?" + _QNAME_CHAR_FMT
_QUALIFIED_NAME_RE = re.compile("^" + QUALIFIED_NAME_FMT + "$")
QUALIFIED_NAME_ERR = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                      "alphanumeric character")
LABEL_VALUE_FMT = "(" + QUALIFIED_NAME_FMT + ")?"
_LABEL_VALUE_RE = re.compile("^" + LABEL_VALUE_FMT + "$")
LABEL_VALUE_ERR = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                   "and must start and end with an alphanumeric character")
DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
_DNS1123_LABEL_RE = re.compile("^" + DNS1123_LABEL_FMT + "$")
_DNS1123_SUBDOMAIN_RE = re.compile("^" + DNS1123_SUBDOMAIN_FMT + "$")
DNS1123_SUBDOMAIN_ERR = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                         "'.', and must start and end with an alphanumeric character")
DNS1123_LABEL_ERR = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
                     "must start and end with an alphanumeric character")


def _regex_error(msg, fmt, *examples):
    if examples:
        msg += " (e.g. " + ",  or ".join("'%s'" % e for e in examples) + ", regex used for validation is '" + fmt + "')"
    else:
        msg += " (regex used for validation is '" + fmt + "')"
    return msg


def is_dns1123_subdomain(value):
    """Error strings (empty when valid) of IsDNS1123Subdomain."""
    errs = []
    if len(value) > 253:
        errs.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN_RE.match(value):
        errs.append(_regex_error(DNS1123_SUBDOMAIN_ERR, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1123_label(value):
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _DNS1123_LABEL_RE.match(value):
        errs.append(_regex_error(DNS1123_LABEL_ERR, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_qualified_name(value):
    """Error strings of IsQualifiedName: an optional DNS-subdomain prefix and '/', then a name part."""
    errs = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return ["a qualified name " + _regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, "MyName", "my.name",
                                                     "123-abc") +
                " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if name and not _QUALIFIED_NAME_RE.match(name):
        errs.append("name part " + _regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, "MyName", "my.name",
                                                "123-abc"))
    return errs


def is_valid_label_value(value):
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _LABEL_VALUE_RE.match(value):
        errs.append(_regex_error(LABEL_VALUE_ERR, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def validate_labels(labels, path):
    errs = []
    if labels is None:
        return errs
    if not isinstance(labels, dict):
        return [FieldError.invalid(path, labels, "must be a map of string keys to string values")]
    for k, v in labels.items():
        for m in is_qualified_name(k):
            errs.append(FieldError.invalid(path, k, m))
        if not isinstance(v, str):
            errs.append(FieldError.invalid(path + "." + k, v, "must be a string"))
            continue
        for m in is_valid_label_value(v):
            errs.append(FieldError.invalid(path, v, m))
    return errs


TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


def validate_annotations(annotations, path):
    errs = []
    if annotations is None:
        return errs
    if not isinstance(annotations, dict):
        return [FieldError.invalid(path, annotations, "must be a map of string keys to string values")]
    total = 0
    for k, v in annotations.items():
        for m in is_qualified_name(k.lower()):
            errs.append(FieldError.invalid(path, k, m))
        if not isinstance(v, str):
            errs.append(FieldError.invalid(path + "." + k, v, "must be a string"))
            continue
        total += len(k) + len(v)
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(FieldError.too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return errs


# ----------------------------------------------------------------------------------------------
# Label selectors: the string form of ?labelSelector= and the LabelSelector struct of specs.
# A parsed selector is a list of (key, op, values) with op in
# {"=", "!=", "in", "notin", "exists", "!", ">", "<"}; the empty list matches everything.

_SEL_KEY = r"[A-Za-z0-9./_-]+"
_RE_NOT_EXISTS = re.compile(r"^\s*!\s*(" + _SEL_KEY + r")\s*$")
_RE_EQ = re.compile(r"^\s*(" + _SEL_KEY + r")\s*(==|=|!=)\s*([A-Za-z0-9._-]*)\s*$")
_RE_SET = re.compile(r"^\s*(" + _SEL_KEY + r")\s+(in|notin)\s*\(([^()]*)\)\s*$")
_RE_CMP = re.compile(r"^\s*(" + _SEL_KEY + r")\s*(<|>)\s*([0-9-]+)\s*$")
_RE_EXISTS = re.compile(r"^\s*(" + _SEL_KEY + r")\s*$")


def _split_top_level(s):
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _bad_selector(detail):
    return ApiError.bad_request("unable to parse requirement: " + detail)


def _check_key(key):
    msgs = is_qualified_name(key)
    if msgs:
        raise _bad_selector('<nil>: Invalid value: "%s": %s' % (key, msgs[0]))


def _check_value(i, key, value):
    msgs = is_valid_label_value(value)
    if msgs:
        raise _bad_selector('values[%d][%s]: Invalid value: "%s": %s' % (i, key, value, msgs[0]))


def parse_label_selector(s):
    """Parses the string form of a label selector (as kubectl and client-go write it)."""
    reqs = []
    if s is None or not s.strip():
        return reqs
    for part in _split_top_level(s):
        if not part.strip():
            raise ApiError.bad_request("found '', expected: !, identifier, or 'end of string'")
        m = _RE_NOT_EXISTS.match(part)
        if m:
            _check_key(m.group(1))
            reqs.append((m.group(1), "!", []))
            continue
        m = _RE_SET.match(part)
        if m:
            key, op = m.group(1), m.group(2)
            _check_key(key)
            values = [v.strip() for v in m.group(3).split(",")] if m.group(3).strip() else []
            if not values:
                raise _bad_selector("for 'in', 'notin' operators, values set can't be empty")
            for i, v in enumerate(values):
                _check_value(i, key, v)
            reqs.append((key, op, values))
            continue
        m = _RE_CMP.match(part)
        if m:
            _check_key(m.group(1))
            try:
                int(m.group(3))
            except ValueError:
                raise _bad_selector("for 'Gt', 'Lt' operators, the value must be an integer")
            reqs.append((m.group(1), m.group(2), [m.group(3)]))
            continue
        m = _RE_EQ.match(part)
        if m:
            key, op, value = m.group(1), m.group(2), m.group(3)
            _check_key(key)
            _check_value(0, key, value)
            reqs.append((key, "!=" if op == "!=" else "=", [value]))
            continue
        m = _RE_EXISTS.match(part)
        if m:
            _check_key(m.group(1))
            reqs.append((m.group(1), "exists", []))
            continue
        raise ApiError.bad_request("unable to parse requirement: found '%s', expected: identifier" % part.strip())
    return reqs


def labels_match(reqs, labels):
    labels = labels or {}
    for key, op, values in reqs:
        present = key in labels
        v = labels.get(key)
        if op == "=":
            if not present or v != values[0]:
                return False
        elif op == "!=":
            if present and v == values[0]:
                return False
        elif op == "in":
            if not present or v not in values:
                return False
        elif op == "notin":
            if present and v in values:
                return False
        elif op == "exists":
            if not present:
                return False
        elif op == "!":
            if present:
                return False
        elif op in (">", "<"):
            if not present:
                return False
            try:
                lv = int(v)
            except ValueError:
                return False
            rv = int(values[0])
            if (op == ">" and not lv > rv) or (op == "<" and not lv < rv):
                return False
    return True


def selector_struct_to_reqs(sel):
    """metav1.LabelSelector → requirements. None matches nothing (as LabelSelectorAsSelector(nil))."""
    if sel is None:
        return None
    reqs = []
    for k, v in sorted((sel.get("matchLabels") or {}).items()):
        reqs.append((k, "=", [v]))
    for e in sel.get("matchExpressions") or []:
        op = e.get("operator")
        key = e.get("key")
        vals = list(e.get("values") or [])
        if op == "In":
            reqs.append((key, "in", vals))
        elif op == "NotIn":
            reqs.append((key, "notin", vals))
        elif op == "Exists":
            reqs.append((key, "exists", []))
        elif op == "DoesNotExist":
            reqs.append((key, "!", []))
    return reqs


def selector_struct_matches(sel, labels):
    reqs = selector_struct_to_reqs(sel)
    if reqs is None:
        return False
    return labels_match(reqs, labels)


def selector_struct_is_empty(sel):
    return sel is None or (not sel.get("matchLabels") and not sel.get("matchExpressions"))


def selector_struct_to_string(sel):
    """The string form (as in Scale.status.selector / kubectl)."""
    parts = []
    for k, v in sorted((sel.get("matchLabels") or {}).items()):
        parts.append("%s=%s" % (k, v))
    for e in sel.get("matchExpressions") or []:
        op = e.get("operator")
        vals = ",".join(sorted(e.get("values") or []))
        if op == "In":
            parts.append("%s in (%s)" % (e.get("key"), vals))
        elif op == "NotIn":
            parts.append("%s notin (%s)" % (e.get("key"), vals))
        elif op == "Exists":
            parts.append(e.get("key"))
        elif op == "DoesNotExist":
            parts.append("!" + e.get("key"))
    return ",".join(parts)


def validate_label_selector(sel, path):
    """ValidateLabelSelector (metav1 validation) messages."""
    errs = []
    if sel is None:
        return errs
    if not isinstance(sel, dict):
        return [FieldError.invalid(path, sel, "must be an object")]
    errs.extend(validate_labels(sel.get("matchLabels"), path + ".matchLabels"))
    for i, e in enumerate(sel.get("matchExpressions") or []):
        ep = "%s.matchExpressions[%d]" % (path, i)
        op = e.get("operator")
        vals = e.get("values") or []
        if op in ("In", "NotIn"):
            if not vals:
                errs.append(FieldError.required(ep + ".values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist"):
            if vals:
                errs.append(FieldError.forbidden(ep + ".values",
                                                 "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            errs.append(FieldError.invalid(ep + ".operator", op, "not a valid selector operator"))
        key = e.get("key") or ""
        for m in is_qualified_name(key):
            errs.append(FieldError.invalid(ep + ".key", key, m))
    return errs


# ----------------------------------------------------------------------------------------------
# Field selectors: "a=b,c!=d" over a per-resource map of selectable fields.

def parse_field_selector(s):
    reqs = []
    if s is None or not s.strip():
        return reqs
    for part in s.split(","):
        if not part.strip():
            continue
        if "!=" in part:
            k, v = part.split("!=", 1)
            op = "!="
        elif "==" in part:
            k, v = part.split("==", 1)
            op = "="
        elif "=" in part:
            k, v = part.split("=", 1)
            op = "="
        else:
            raise ApiError.bad_request("invalid selector: '%s'; can't understand '%s'" % (s, part))
        reqs.append((k.strip(), op, v.strip()))
    return reqs


def fields_match(reqs, fields):
    for k, op, v in reqs:
        actual = fields.get(k, "")
        if op == "=" and actual != v:
            return False
        if op == "!=" and actual == v:
            return False
    return True
