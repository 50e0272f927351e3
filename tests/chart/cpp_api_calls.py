"""Finds the Kubernetes API calls C++ sources make, for tests/chart/check_chart.py.

A small structural reader of our own C++ (not a C++ parser): comments are removed and literals
blanked, then every use of a path builder of hooks/kube_api.h (kube::PodPath, ...) is followed to the
API verb that uses the path. tests/chart/api-calls.md describes the shapes it follows; check_chart.py's
self-test runs it on each of them.
"""

import os
import re

# ----------------------------------------------------------------------------------------------
# C++ sources


def strip_cpp_comments(src):
    """Removes // and /* */ comments, keeping string literals, newlines and offsets' line numbers."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        elif src.startswith("R\"", i):  # raw string R"delim( ... )delim"
            m = re.match(r'R"([^(\s]*)\(', src[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = src.find(")" + m.group(1) + '"', i)
            end = n if end < 0 else end + len(m.group(1)) + 2
            out.append(src[i:end])
            i = end
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * src.count("\n", i, j))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def skip_string(src, i):
    """Index after the string or char literal starting at src[i]."""
    q = src[i]
    j = i + 1
    while j < len(src) and src[j] != q:
        j += 2 if src[j] == "\\" else 1
    return j + 1


def match_close(src, i):
    """Index of the bracket closing the one at src[i] ('(' or '{'), skipping literals."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack = [pairs[src[i]]]
    j = i + 1
    while j < len(src):
        c = src[j]
        if c in "\"'":
            j = skip_string(src, j)
            continue
        if c in pairs:
            stack.append(pairs[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return j
        j += 1
    return len(src) - 1


def split_args(src, open_index):
    """Top-level arguments of the call whose '(' is at open_index: [(start, end)] spans."""
    close = match_close(src, open_index)
    spans, start, depth, j = [], open_index + 1, 0, open_index + 1
    while j < close:
        c = src[j]
        if c in "\"'":
            j = skip_string(src, j)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            spans.append((start, j))
            start = j + 1
        j += 1
    if src[start:close].strip():
        spans.append((start, close))
    return spans


def enclosing_open(src, pos, lower_bound=0):
    """Index of the innermost '(' or '{' that is still open at pos (or -1)."""
    depth = 0
    j = pos - 1
    while j >= lower_bound:
        c = src[j]
        if c in ")}]":
            depth += 1
        elif c in "({[":
            if depth == 0:
                return j if c in "({" else -1
            depth -= 1
        elif c == ";" and depth == 0:
            return -1
        j -= 1
    return -1


def expression_end(code, pos):
    """End of the primary expression starting at pos: a name with member accesses and call
    arguments (`kube::PodPath(ns, n)`, `a.Path()`, `path`)."""
    m = re.match(r"(?:this->)?[A-Za-z_][\w:]*", code[pos:])
    j = pos + (m.end() if m else 0)
    while j < len(code):
        if code[j] == "(" or code[j] == "[":
            j = match_close(code, j) + 1
        elif re.match(r"(?:\.|->)[A-Za-z_]\w*", code[j:]):
            j += re.match(r"(?:\.|->)[A-Za-z_]\w*", code[j:]).end()
        else:
            break
    return j


def is_block(code, brace):
    """Whether the '{' at `brace` opens a block (if/for/switch/else/function/lambda body, or a case
    body) rather than a brace-initialiser."""
    before = code[:brace].rstrip()
    if not before or before[-1] in ");}:":
        return not before.endswith("::")
    return re.search(r"\b(else|do|try|const|noexcept|override|final|mutable)$", before) is not None


def enclosing_brace(code, pos, lower):
    """Index of the innermost block/initialiser '{' still open at pos, skipping parentheses (or -1)."""
    depth = 0
    j = pos - 1
    while j >= lower:
        c = code[j]
        if c in ")}]":
            depth += 1
        elif c in "({[":
            if depth == 0:
                if c == "{":
                    return j
            else:
                depth -= 1
        j -= 1
    return -1


def statement_start(code, brace, pos):
    """Where the statement holding pos starts, inside the block opened at `brace`: after the last
    ';', nested block or label at the block's own level."""
    start, depth, ternary = brace + 1, 0, 0
    j = brace + 1
    while j < pos:
        c = code[j]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0 and c == "}" and is_block(code, match_open(code, j)):
                start, ternary = j + 1, 0
        elif depth == 0:
            if c == ";":
                start, ternary = j + 1, 0
            elif c == "?":
                ternary += 1
            elif c == ":" and code[j + 1:j + 2] != ":" and code[j - 1:j] != ":":
                if ternary:
                    ternary -= 1
                else:
                    start = j + 1
        j += 1
    return start


def match_open(code, close):
    """Index of the bracket opening the one at code[close]."""
    pairs = {")": "(", "}": "{", "]": "["}
    depth = 0
    j = close
    while j >= 0:
        c = code[j]
        if c in pairs:
            depth += 1
        elif c in "({[":
            depth -= 1
            if depth == 0:
                return j
        j -= 1
    return 0


def cond_kinds(cond, all_kinds):
    """The enumerators of all_kinds for which condition text `cond` can hold, or None when it
    says nothing about them (`a.kind == E::kX || a.kind == E::kY` -> {kX, kY}; `!=` -> the rest)."""
    def atom(text):
        found = {k for k in re.findall(r"\b(\w+)\b", text) if k in all_kinds}
        if not found:
            return None
        return set(all_kinds) - found if "!=" in text else found
    result = set()
    for term in re.split(r"\|\|", cond):
        parts = [atom(a) for a in re.split(r"&&", term)]
        known = [p for p in parts if p is not None]
        if not known:
            return None
        inter = set(all_kinds)
        for p in known:
            inter &= p
        result |= inter
    return result


def if_condition_before(code, end):
    """The condition of an `if (...)` (or `else if`) whose closing ')' is the last thing before `end`."""
    before = code[:end].rstrip()
    if not before.endswith(")"):
        return None
    open_paren = match_open(code, len(before) - 1)
    if re.search(r"\bif\s*$", code[:open_paren]):
        return code[open_paren + 1:len(before) - 1]
    return None


def previous_if_condition(code, else_pos):
    """For an `else` at else_pos: the condition of the `if` it belongs to (or None)."""
    before = code[:else_pos].rstrip()
    if before.endswith("}"):
        opener = match_open(code, len(before) - 1)
        return if_condition_before(code, opener)
    # `if (c) stmt; else ...`: find the `if (` that starts the previous statement.
    m = None
    for m in re.finditer(r"\bif\s*\(", code[max(0, len(before) - 400):len(before)]):
        pass
    if m:
        start = max(0, len(before) - 400) + m.end() - 1
        return code[start + 1:match_close(code, start)]
    return None


def reachable_kinds(src, pos, all_kinds):
    """The enumerators of all_kinds for which the code at pos can run, from the guards around it:
    enclosing `if`/`else`, `switch` case labels, `?:`, and earlier `if (...) return/continue;`."""
    code = src.code
    func = src.function_at(pos)
    lower = func[1] if func else 0
    kinds = set(all_kinds)

    def restrict(k, positive):
        nonlocal kinds
        if k is not None:
            kinds &= k if positive else set(all_kinds) - k

    cur = pos
    while True:
        brace = enclosing_brace(code, cur, lower)
        if brace < 0:
            break
        start = statement_start(code, brace, cur)
        stmt = code[start:cur]
        # `c ? X : Y` in the statement.
        depth, q, colon = 0, -1, -1
        for i, c in enumerate(stmt):
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            elif depth == 0 and c == "?" and q < 0:
                q = i
            elif depth == 0 and c == ":" and q >= 0 and stmt[i - 1:i + 2].count(":") == 1:
                colon = i
        if q >= 0:
            head = re.split(r"(?<![=!<>])=(?!=)|\breturn\b", stmt[:q])[-1]
            restrict(cond_kinds(head, all_kinds), colon < 0)
        # `if (c) stmt` / `else stmt` / `else if (c) stmt` as the statement itself.
        lead = stmt.lstrip()
        lead_at = start + len(stmt) - len(lead)
        if lead.startswith("else"):
            restrict(cond_kinds(previous_if_condition(code, lead_at) or "", all_kinds), False)
            lead = lead[4:].lstrip()
            lead_at = cur - len(lead)
        m = re.match(r"if\s*\(", lead)
        if m:
            open_paren = lead_at + m.end() - 1
            close = match_close(code, open_paren)
            if close < cur:
                restrict(cond_kinds(code[open_paren + 1:close], all_kinds), True)
        # Earlier statements of this block that leave it: `if (c) return ...;` means not c below.
        region_start = brace + 1
        for m in re.finditer(r"\bif\s*\(", code[region_start:start]):
            at = region_start + m.start()
            if statement_start(code, brace, at) != at and code[statement_start(code, brace, at):at].strip() not in ("", "else"):
                continue  # not at this block's level
            if enclosing_brace(code, at, lower) != brace:
                continue
            open_paren = region_start + m.end() - 1
            close = match_close(code, open_paren)
            body = code[close + 1:start].lstrip()
            if body.startswith("{"):
                b = close + 1 + (len(code[close + 1:start]) - len(body))
                inner = code[b + 1:match_close(code, b)]
                last = inner.rstrip().rstrip(";").split(";")[-1].strip()
                exits = re.match(r"(return|continue|break|throw)\b", last) is not None
            else:
                exits = re.match(r"(return|continue|break|throw)\b", body) is not None
            if exits:
                restrict(cond_kinds(code[open_paren + 1:close], all_kinds), False)
        # What opens the block: if / else / switch (case labels).
        opener = code[:brace].rstrip()
        if opener.endswith(")"):
            paren = match_open(code, len(opener) - 1)
            keyword = re.search(r"\b(\w+)\s*$", code[:paren])
            keyword = keyword.group(1) if keyword else ""
            if keyword == "if":
                restrict(cond_kinds(code[paren + 1:len(opener) - 1], all_kinds), True)
                if re.search(r"\belse\s+if\s*$", code[:paren]):
                    else_at = re.search(r"\belse\s+if\s*$", code[:paren]).start()
                    restrict(cond_kinds(previous_if_condition(code, else_at) or "", all_kinds), False)
            elif keyword == "switch":
                labels = case_labels(code, brace, start)
                if labels is not None:
                    named = {k for k in re.findall(r"\bcase\s+(?:\w+::)*(\w+)\s*:", code[brace:match_close(code, brace)]) if k in all_kinds}
                    restrict(labels if "default" not in labels else (set(all_kinds) - named) | (labels - {"default"}), True)
        elif re.search(r"\belse$", opener):
            restrict(cond_kinds(previous_if_condition(code, len(opener) - 4) or "", all_kinds), False)
        elif opener.endswith(":") and not opener.endswith("::"):
            outer = enclosing_brace(code, brace, lower)
            if outer >= 0:
                labels = case_labels(code, outer, len(opener))
                if labels is not None and "default" not in labels:
                    restrict({k for k in labels if k in all_kinds} or None, True)
        cur = brace
    return kinds


def case_labels(code, brace, pos):
    """The `case X:`/`default:` labels directly before the statement at pos in the switch block
    opened at `brace` (a group of labels falls through to the same statements), or None."""
    body = code[brace + 1:pos]
    labels = list(re.finditer(r"\b(?:case\s+(?:\w+::)*(\w+)|(default))\s*:(?!:)", body))
    if not labels:
        return None
    group = [labels[-1]]
    for prev in reversed(labels[:-1]):
        if body[prev.end():group[0].start()].strip():
            break
        group.insert(0, prev)
    return {m.group(1) or m.group(2) for m in group}


def line_of(src, pos):
    return src.count("\n", 0, pos) + 1


API_VERBS = {"Get": "get", "List": "list", "ListPages": "list", "Create": "create", "Update": "update",
             "Patch": "patch", "Delete": "delete", "Watch": "watch"}
# Free functions that take the path as argument 1 (0-based) and make that verb.
PATH_FUNCTIONS = {"WatchFrom": ("watch", 1)}
KEY_OPERATIONS = {"find", "count", "erase", "contains", "at", "insert", "emplace", "try_emplace", "lower_bound",
                  "upper_bound", "equal_range"}
WRAPPERS = {"string", "string_view", "move", "forward", "c_str", "data", "str", "to_string"}
NOT_TYPES = {"return", "else", "new", "co_return", "auto", "const", "case", "throw", "delete"}
CONTROL = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "static_assert",
           "alignof", "noexcept", "requires"}
VERB_CALL = re.compile(r"(?:\.|->)\s*(%s)\s*\(" % "|".join(API_VERBS))
PATH_FUNCTION_CALL = re.compile(r"\b(%s)\s*\(" % "|".join(PATH_FUNCTIONS))
DEFINITION = re.compile(
    r"(?<![\w.>])((?:[A-Za-z_]\w*::)*~?[A-Za-z_]\w*)\s*\(([^;{}()]*(?:\([^()]*\)[^;{}()]*)*)\)\s*"
    r"(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?(?:final\s*)?(?:->\s*[\w:<>&*\s]+?)?"
    r"(?::\s*[^{;]*?)?\{")


def mask_literals(code):
    """The code with the contents of string and character literals blanked (same length), so that
    braces and parentheses inside JSON strings do not confuse the structural scans."""
    out = []
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        raw = re.match(r'R"([^(\s]*)\(', code[i:i + 20]) if c == "R" and (i == 0 or not code[i - 1].isalnum()) else None
        if raw:
            end = code.find(")" + raw.group(1) + '"', i)
            end = n if end < 0 else end + len(raw.group(1)) + 2
            out.append('R"' + re.sub(r"[^\n]", " ", code[i + 2:end - 1]) + '"')
            i = end
        elif c in "\"'" and not (c == "'" and i > 0 and code[i - 1].isalnum()):
            j = skip_string(code, i)
            out.append(c + re.sub(r"[^\n]", " ", code[i + 1:j - 1]) + code[j - 1:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Source:
    def __init__(self, name, text):
        self.name = name
        self.raw = strip_cpp_comments(text)  # comments gone, literals kept
        self.code = mask_literals(self.raw)  # literals blanked: for every structural scan
        self.functions = []  # (qualified name, body start '{', body end '}', name start)
        for m in DEFINITION.finditer(self.code):
            name = m.group(1)
            if name.split("::")[-1] in CONTROL:
                continue
            brace = m.end() - 1
            self.functions.append((name, brace, match_close(self.code, brace), m.start(1)))
        self.classes = {}  # class name -> (body start, body end)
        for m in re.finditer(r"\b(?:class|struct)\s+([A-Za-z_]\w*)[^;{()]*\{", self.code):
            brace = m.end() - 1
            self.classes[m.group(1)] = (brace, match_close(self.code, brace))

    def function_at(self, pos):
        """(name, start, end) of the innermost function whose body contains pos, or None."""
        best = None
        for f in self.functions:
            if f[1] < pos < f[2] and (best is None or f[1] > best[1]):
                best = f
        return best


def verb_calls(src, start, end):
    """(verb, path-argument text, position) of the API calls between start and end."""
    calls = []
    code = src.code
    for m in VERB_CALL.finditer(code, start, end):
        spans = split_args(code, m.end() - 1)
        arg = code[spans[0][0]:spans[0][1]].strip() if spans else ""
        calls.append((API_VERBS[m.group(1)], arg, m.start()))
    for m in PATH_FUNCTION_CALL.finditer(code, start, end):
        verb, index = PATH_FUNCTIONS[m.group(1)]
        # Skip the definition/declaration of the function itself.
        before = code[max(0, m.start() - 40):m.start()]
        if re.search(r"(WatchResult|\w+)\s+$", before) and not re.search(r"(return|=|\()\s*$", before):
            continue
        spans = split_args(code, m.end() - 1)
        arg = code[spans[index][0]:spans[index][1]].strip() if len(spans) > index else ""
        calls.append((verb, arg, m.start()))
    return calls


class ApiCallFinder:
    """Finds (group, resource, verb) the sources need, from the uses of the path builders."""

    def __init__(self, sources, builders):
        self.unknown = False  # set while tracing when a trail ends somewhere unrecognised
        self.bookkeeping = []  # builder uses that never reach an API call (map keys, messages)
        self.sources = sources  # [Source]
        self.builders = builders  # builder name -> (group, resource)
        self.builder_re = re.compile(r"(?<![\w.])(?:(?:iw::)?kube::)?(%s)\s*\(" % "|".join(
            sorted(builders, key=len, reverse=True)))

    def find(self):
        """Returns ({(group, resource, verb): [evidence]}, [errors]); also (False, ...) when no
        builder is used anywhere (client code not written yet)."""
        needed, errors, used = {}, [], False
        for src in self.sources:
            for m in self.builder_re.finditer(src.code):
                used = True
                group, resource = self.builders[m.group(1)]
                close = match_close(src.code, m.end() - 1)
                if re.match(r'\s*\+\s*"/status"', src.raw[close + 1:close + 40]):
                    resource += "/status"
                where = "%s:%d" % (src.name, line_of(src.code, m.start()))
                self.unknown = False
                verbs = self.verbs_for(src, m.start(), depth=0)
                if not verbs and not self.unknown:
                    self.bookkeeping.append(
                        "%s: kube::%s(...) reaches no API call (a key, a comparison, a log line or a "
                        "message, or on no path a call can take)" % (where, m.group(1)))
                elif not verbs:
                    errors.append(
                        "%s: kube::%s(...) is used, but no API verb could be connected to it; pass it "
                        "straight to api.Get/List/Create/Update/Patch/Delete/Watch or WatchFrom, or "
                        "see tests/chart/api-calls.md for the shapes the check follows"
                        % (where, m.group(1)))
                for verb in verbs:
                    needed.setdefault((group, resource, verb), []).append(where)
        return used, needed, errors

    # The verbs that use the path expression at `pos` of `src`: walk out through the enclosing
    # calls; at the statement level follow the variable it initialises, or the function it returns
    # from. A trail that ends where a path is only a key, compared or logged ends quietly; one that
    # ends anywhere else sets self.unknown, and an unconnected builder use is then an error.
    def verbs_for(self, src, pos, depth):
        if depth > 6:
            self.unknown = True
            return set()
        code = src.code
        func = src.function_at(pos)
        lower = func[1] + 1 if func else 0
        end = expression_end(code, pos)
        if re.match(r'\s*\+\s*"(?!/)', src.raw[end:end + 40]) or re.match(r"\s*[=!]=", code[end:end + 4]):
            return set()  # `path + ": "...` (a message) or a comparison
        if re.search(r"[=!]=\s*$", code[max(lower, pos - 4):pos]):
            return set()
        anchor = pos
        open_index = enclosing_open(code, pos, lower)
        while open_index >= 0:
            if code[open_index] == "{" and is_block(code, open_index):
                break  # a block, not a brace-initialiser: the statement starts inside it
            callee, kind = self.callee_at(code, open_index)
            spans = split_args(code, open_index) if code[open_index] == "(" else []
            arg_index = next((i for i, (a, b) in enumerate(spans) if a <= pos <= b), 0)
            if kind == "verb":
                return {API_VERBS[callee]} if arg_index == 0 else set()
            if kind == "pathfn":
                verb, index = PATH_FUNCTIONS[callee]
                return {verb} if arg_index == index else set()
            short = callee.split("::")[-1]
            if kind == "function" and short in KEY_OPERATIONS and code[max(0, open_index - len(short) - 2):open_index].rstrip().endswith(short):
                before = code[max(0, open_index - len(short) - 3):open_index - len(short)]
                if before.endswith(".") or before.endswith("->"):
                    return set()  # map.find(path), set.erase(path): a key
            if kind == "function" and (short in ("Info", "Warn", "Debug", "Error") or callee.startswith("log::")):
                return set()  # logged
            if kind == "function" and short not in WRAPPERS:
                verbs = self.verbs_of_callee(src, callee, open_index, depth)
                if verbs:
                    return verbs
                # `Type var(args)` / `Type var{args}`: the constructor of Type, then var's uses.
                decl = re.search(r"([A-Za-z_]\w*)\s*(?:<[^<>;()]*>)?\s*[&*]?\s+%s\s*$"
                                 % re.escape(short), code[max(0, open_index - 160):open_index])
                if decl and decl.group(1) not in NOT_TYPES:
                    verbs = self.verbs_of_callee(src, decl.group(1), open_index, depth)
                    if verbs:
                        return verbs
                var = self.declared_variable(code, open_index)
                if var:
                    verbs = self.verbs_of_variable(src, var, open_index, depth)
                    if verbs:
                        return verbs
                if not self.definitions(callee):
                    self.unknown = True  # handed to code we cannot see into
                    return set()
            elif code[open_index] == "[" or (code[open_index] == "(" and kind == "wrapper" and
                                             code[:open_index].rstrip().endswith("[")):
                return set()
            name = re.search(r"[\w:.>-]*\s*(?:<[^<>;()]*>)?\s*$", code[max(0, open_index - 200):open_index])
            anchor = open_index - (len(name.group(0)) if name else 0)
            open_index = enclosing_open(code, open_index, lower)
        if code[max(lower, anchor - 1):anchor] == "[":
            return set()  # versions[path]: a key
        # Statement level: the whole statement up to the expression.
        brace = enclosing_brace(code, anchor, lower - 1 if func else 0)
        start = statement_start(code, brace, anchor) if brace >= 0 else lower
        prefix = code[start:anchor]
        if re.match(r"\s*(?:else\s+)?return\b", prefix) and func:  # a function returning a path
            return self.verbs_of_path_function(src, func, anchor, depth)
        m = re.match(r"\s*(?:[\w:<>,&*\s]+?\s+)?(?:this->)?([A-Za-z_]\w*)((?:(?:\.|->)[A-Za-z_]\w*)*)\s*(?:=(?!=)|\{)", prefix)
        if m:  # `auto p = X(...)`, `p_ = X(...)`, `opts.path = X(...)` (-> the uses of opts)
            return self.verbs_of_variable(src, m.group(1), anchor, depth)
        self.unknown = True
        return set()

    def verbs_of_path_function(self, src, func, pos, depth):
        """Verbs at the call sites of `func`, which returns the path built at `pos`. When the path is
        chosen by `case E::kX:` labels (a dispatcher such as `Action::Path()` switching on a kind),
        only call sites the same kinds can reach count: `if (a.kind == E::kEvent) api.Create(a.Path())`
        gives kEvent's path `create` and no other path."""
        name = func[0].split("::")[-1]
        enum, all_kinds = self.enum_of_dispatcher(src, func)
        mine = reachable_kinds(src, pos, all_kinds) if enum else None
        member = "::" in func[0] or any(a < func[1] < b for a, b in src.classes.values())
        call_re = (r"(?:\.|->)\s*%s\s*\(" if member else r"(?<![\w.>])(?:\w+::)*%s\s*\(") % re.escape(name)
        verbs = set()
        for s in self.sources:
            for call in re.finditer(call_re, s.code):
                if any(f[3] <= call.start() < f[1] for f in s.functions if f[0].split("::")[-1] == name):
                    continue  # the definition itself
                if mine is not None:
                    theirs = reachable_kinds(s, call.start(), all_kinds)
                    if not (mine & theirs):
                        continue
                verbs |= self.verbs_for(s, call.start(), depth + 1)
        return verbs

    def enum_of_dispatcher(self, src, func):
        """(enum name, its enumerators) when `func` switches on `case Enum::kX:` labels, else (None, None)."""
        body = src.code[func[1]:func[2]]
        labels = re.findall(r"\bcase\s+(?:\w+::)*?(\w+)::(\w+)\s*:(?!:)", body)
        if not labels:
            return None, None
        enum = labels[0][0]
        for s in self.sources:
            m = re.search(r"\benum\s+(?:class|struct)?\s*%s\b[^{;]*\{([^}]*)\}" % re.escape(enum), s.code)
            if m:
                return enum, frozenset(re.findall(r"\b([A-Za-z_]\w*)\s*(?:=[^,}]*)?(?:,|$)", m.group(1).strip()))
        return enum, frozenset(v for e, v in labels if e == enum)

    @staticmethod
    def callee_at(code, open_index):
        before = code[max(0, open_index - 200):open_index]
        m = re.search(r"(?:(\.|->)\s*)?((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)\s*(?:<([^<>;()]*)>)?\s*$", before)
        if not m:
            return "", "wrapper"
        name = m.group(2)
        short = name.split("::")[-1]
        if m.group(1) and short in API_VERBS:
            return short, "verb"
        if short in PATH_FUNCTIONS:
            return short, "pathfn"
        if short in ("make_unique", "make_shared", "emplace_back", "emplace") and m.group(3):
            return m.group(3).strip().split("::")[-1], "function"
        return name, "function"

    def definitions(self, name):
        """Function bodies named `name` (last component) and member functions of class `name`."""
        short = name.split("::")[-1]
        bodies = []
        for src in self.sources:
            for fname, start, end, _ in src.functions:
                parts = fname.split("::")
                if parts[-1] == short or (len(parts) > 1 and parts[-2] == short):
                    bodies.append((src, start, end))
            if short in src.classes:
                start, end = src.classes[short]
                bodies.append((src, start, end))
        return bodies

    def verbs_of_callee(self, src, callee, open_index, depth):
        """Verbs called in the bodies of function (or class) `callee` with a path that is not itself a
        builder call, and one level further in the free functions those bodies call."""
        verbs = set()
        short = callee.split("::")[-1]
        bodies = self.definitions(callee)
        # Member functions of the class are in `bodies` already; an unqualified call of one of them
        # from inside the class is that member, not a free function of the same name.
        members = {f[0].split("::")[-1] for s in self.sources for f in s.functions
                   if len(f[0].split("::")) > 1 and f[0].split("::")[-2] == short}
        for s in self.sources:
            if short in s.classes:
                a, b = s.classes[short]
                members |= {f[0].split("::")[-1] for f in s.functions if a < f[1] < b}
        for body_src, start, end in bodies:
            for verb, arg, _ in verb_calls(body_src, start, end):
                if not self.builder_re.search(arg):  # builder arguments are counted on their own
                    verbs.add(verb)
            # One level further: our own functions called from that body with its parameters.
            if depth < 2:
                for m in re.finditer(r"(?<![\w.>:])([A-Z]\w*)\s*\(", body_src.code[start:end]):
                    name = m.group(1)
                    if name in API_VERBS or name in PATH_FUNCTIONS or name == short or name in members:
                        continue
                    for inner_src, s2, e2 in self.definitions(name):
                        for verb, arg, _ in verb_calls(inner_src, s2, e2):
                            if not self.builder_re.search(arg):
                                verbs.add(verb)
        return verbs

    @staticmethod
    def declared_variable(code, open_index):
        m = re.search(r"([A-Za-z_][\w:<>,\s]*?)\s+([A-Za-z_]\w*)\s*$", code[max(0, open_index - 120):open_index])
        if m and m.group(1).split()[-1] not in ("return", "else", "new", "co_return"):
            return m.group(2)
        m = re.search(r"(?:^|[,:]\s*)([A-Za-z_]\w*_)\s*$", code[max(0, open_index - 80):open_index])
        return m.group(1) if m else None

    def verbs_of_variable(self, src, var, pos, depth):
        """Verbs that use variable `var` (declared or assigned at pos) later in the same function,
        or anywhere in the sources for a member (name ending in '_')."""
        verbs = set()
        scopes = []
        if var.endswith("_"):
            scopes = [(s, 0, len(s.code)) for s in self.sources]
        else:
            func = src.function_at(pos)
            scopes = [(src, pos, func[2] if func else len(src.code))]
        use = re.compile(r"(?<![\w.])%s\b(?!\s*(?:=[^=]|\{))" % re.escape(var))
        uses = 0
        for s, start, end in scopes:
            for m in use.finditer(s.code, start, end):
                if s is src and abs(m.start() - pos) < 2:
                    continue
                uses += 1
                verbs |= self.verbs_for(s, m.start(), depth + 1)
        if not uses:
            self.unknown = True  # a path built and never read here: say so rather than guess
        return verbs


def builders_from_header(text):
    return re.findall(r"std::string\s+(\w+Path)\s*\(", strip_cpp_comments(text))


BUILDER_RESOURCES = {
    "PodsPath": ("", "pods"), "PodPath": ("", "pods"), "PodStatusPath": ("", "pods/status"),
    "PodResizePath": ("", "pods/resize"),
    "DeploymentsPath": ("apps", "deployments"), "DeploymentPath": ("apps", "deployments"),
    "DeploymentStatusPath": ("apps", "deployments/status"),
    "ReplicaSetsPath": ("apps", "replicasets"), "ReplicaSetPath": ("apps", "replicasets"),
    "StatefulSetsPath": ("apps", "statefulsets"), "StatefulSetPath": ("apps", "statefulsets"),
    "ControllerRevisionPath": ("apps", "controllerrevisions"),
    "EventsPath": ("", "events"), "EventPath": ("", "events"),
    "LeasesPath": ("coordination.k8s.io", "leases"), "LeasePath": ("coordination.k8s.io", "leases"),
    "SecretPath": ("", "secrets"),
    "MutatingWebhookConfigurationPath": ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
    "ValidatingWebhookConfigurationPath": ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
}


# The binary talks to the API server once code outside the client itself builds a client.
# The client's own sources: the Client and its configuration (whose factories define, not call,
# ClientConfig::InCluster/FromUrl).
CLIENT_OWN = ("kube_client.", "client_config.")

CLIENT_CONSTRUCTION = re.compile(
    r"\bClientConfig::(?:InCluster|InClusterFrom|FromUrl)\s*\(|\bmake_(?:unique|shared)<\s*(?:iw::)?(?:kube::)?Client\s*>"
    r"|(?<![\w:])(?:iw::)?(?:kube::)?Client\s+[A-Za-z_]\w*\s*[({]")


def client_wired(sources):
    """Files (outside the client's own kube_client.* and client_config.*) that construct the API client."""
    return [s.name for s in sources
            if not os.path.basename(s.name).startswith(CLIENT_OWN) and CLIENT_CONSTRUCTION.search(s.code)]


def parse_routes(text):
    """[(path, mutating)] from hooks/routes.cpp's route table."""
    return [(m.group(1), m.group(2) == "true")
            for m in re.finditer(r'\{\s*"(/[^"]*)"\s*,\s*(true|false)\s*,', strip_cpp_comments(text))]


def cxxopts_flags(text):
    """Long option names declared with cxxopts add_options(...)(...) in a source file."""
    flags = set()
    code = strip_cpp_comments(text)
    for m in re.finditer(r"add_options\s*\([^)]*\)", code):
        j = m.end()
        while True:
            rest = code[j:]
            s = re.match(r"\s*\(", rest)
            if not s:
                break
            open_index = j + s.end() - 1
            f = re.match(r'\s*"(?:[A-Za-z0-9],)?([A-Za-z0-9][\w-]*)"', code[open_index + 1:])
            if f:
                flags.add(f.group(1))
            j = match_close(code, open_index) + 1
    return flags


