#!/usr/bin/env python3
"""The curl suite: starts the real server with certificates from certs/, posts every AdmissionReview
under tests/fixtures/ with curl over HTTPS (certificate verified, no -k) and compares each answer with
the expected answer checked into the repository.

  run_cases.py BINARY SOURCE_DIR CERT_DIR

Cases: tests/fixtures/cases/<route>/<case>.json with <case>.expected.json beside it, where <route> is
mutate-deployments, validate-deployments, mutate-pods or validate-pods. Expected answers hold
  allowed, code, messageContains, warningsContain, patch (null: no patch; a list: the exact operations),
  patchedObject (a subset the patched request object must contain).
The string "<RFC3339>" in an expected value matches any RFC 3339 UTC timestamp.
Recorded samples: tests/fixtures/recorded/*.json, posted to the two routes of their kind, expected
answers in tests/fixtures/recorded/expected/<route>/<name>.expected.json.
"""
import base64
import glob
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webhook_process import Webhook, curl  # noqa: E402
import json_patch  # noqa: E402

RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"
ROUTES = ["mutate-deployments", "validate-deployments", "mutate-pods", "validate-pods"]


def matches(expected, actual, where="$"):
    """Returns a list of mismatch descriptions: expected is a subset of actual."""
    if isinstance(expected, str) and "<RFC3339>" in expected:
        pattern = "^" + re.escape(expected).replace(re.escape("<RFC3339>"), RFC3339) + "$"
        if isinstance(actual, str) and re.match(pattern, actual):
            return []
        return [f"{where}: expected {expected!r}, got {actual!r}"]
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object, got {actual!r}"]
        out = []
        for k, v in expected.items():
            if k not in actual:
                out.append(f"{where}.{k}: missing")
            else:
                out += matches(v, actual[k], f"{where}.{k}")
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: expected {json.dumps(expected)}, got {json.dumps(actual)}"]
        out = []
        for i, (e, a) in enumerate(zip(expected, actual)):
            out += exact(e, a, f"{where}[{i}]")
        return out
    if expected != actual:
        return [f"{where}: expected {expected!r}, got {actual!r}"]
    return []


def exact(expected, actual, where):
    """Like matches, but objects must have exactly the expected keys (used inside lists)."""
    if isinstance(expected, dict) and isinstance(actual, dict) and set(expected) != set(actual):
        return [f"{where}: keys {sorted(expected)} != {sorted(actual)}"]
    return matches(expected, actual, where)


def check(case_path, route, expected, status, body):
    problems = []
    request = json.load(open(case_path))
    if status != 200:
        return [f"HTTP {status}: {body[:300]!r}"]
    try:
        review = json.loads(body)
    except ValueError as e:
        return [f"answer is not JSON: {e}"]
    api_version = request.get("apiVersion", "admission.k8s.io/v1")
    if review.get("apiVersion") != api_version or review.get("kind") != "AdmissionReview":
        problems.append(f"answered as {review.get('apiVersion')}/{review.get('kind')}, sent {api_version}")
    resp = review.get("response", {})
    if resp.get("uid") != request["request"]["uid"]:
        problems.append(f"uid {resp.get('uid')!r} is not the request's {request['request']['uid']!r}")
    if ("patch" in resp) != ("patchType" in resp):
        problems.append("patch and patchType must come together")
    if "patch" in resp and not route.startswith("mutate-"):
        problems.append("a validating route answered with a patch")
    if "allowed" in expected and resp.get("allowed") != expected["allowed"]:
        problems.append(f"allowed={resp.get('allowed')}, expected {expected['allowed']}; "
                        f"message: {resp.get('status', {}).get('message')}")
    status_obj = resp.get("status", {})
    if "code" in expected and status_obj.get("code") != expected["code"]:
        problems.append(f"status.code={status_obj.get('code')}, expected {expected['code']}")
    if "messageContains" in expected and expected["messageContains"] not in status_obj.get("message", ""):
        problems.append(f"message {status_obj.get('message')!r} lacks {expected['messageContains']!r}")
    warnings = resp.get("warnings", [])
    for w in warnings:
        if len(w) > 120:
            problems.append(f"warning longer than 120 characters: {w!r}")
    for want in expected.get("warningsContain", []):
        if not any(want in w for w in warnings):
            problems.append(f"no warning contains {want!r}; warnings: {warnings}")
    patch = None
    if "patch" in resp:
        try:
            patch = json.loads(base64.b64decode(resp["patch"], validate=True))
        except ValueError as e:
            return problems + [f"patch is not base64 JSON: {e}"]
        if not isinstance(patch, list):
            problems.append("patch is not a JSON array")
    if "patch" in expected:
        if expected["patch"] is None and patch is not None:
            problems.append(f"expected no patch, got {json.dumps(patch)}")
        elif expected["patch"] is not None:
            if patch is None:
                problems.append("expected a patch, got none")
            else:
                problems += matches(expected["patch"], patch, "patch")
    if patch is not None:
        obj = request["request"]["object"]
        try:
            patched = json_patch.apply(obj, patch)
        except (KeyError, IndexError, ValueError, TypeError) as e:
            return problems + [f"patch does not apply to the request object: {e}"]
        for key in ("apiVersion", "kind"):
            if key in obj and patched.get(key) != obj[key]:
                problems.append(f"patch changed {key}")
        if "metadata" in obj and not isinstance(patched.get("metadata"), dict):
            problems.append("patched object has no metadata")
        json.loads(json.dumps(patched))
        if "patchedObject" in expected:
            problems += matches(expected["patchedObject"], patched, "patchedObject")
    return problems


def main():
    binary, source, cert_dir = sys.argv[1:4]
    fixtures = os.path.join(source, "tests", "fixtures")
    jobs = []
    for route in ROUTES:
        for path in sorted(glob.glob(os.path.join(fixtures, "cases", route, "*.json"))):
            if path.endswith(".expected.json"):
                continue
            jobs.append((route, path, path[:-5] + ".expected.json"))
    for path in sorted(glob.glob(os.path.join(fixtures, "recorded", "*.json"))):
        kind = json.load(open(path))["request"]["kind"]["kind"]
        name = os.path.basename(path)[:-5]
        routes = {"Deployment": ROUTES[:2], "Pod": ROUTES[2:]}.get(kind, [])
        for route in routes:
            jobs.append((route, path, os.path.join(fixtures, "recorded", "expected", route,
                                                   name + ".expected.json")))
    passed = failed = 0
    log = tempfile.NamedTemporaryFile(prefix="iw-curl-", suffix=".log", delete=False).name
    with Webhook(binary, cert_dir, log_path=log) as hook:
        for route, case, expected_path in jobs:
            label = f"{route}/{os.path.basename(case)}"
            if not os.path.exists(expected_path):
                print(f"FAIL {label}: no expected answer at {os.path.relpath(expected_path, source)}")
                failed += 1
                continue
            expected = json.load(open(expected_path))
            status, body = curl(hook, "/" + route.replace("-", "/", 1), body_path=case)
            problems = check(case, route, expected, status, body)
            if problems:
                failed += 1
                print(f"FAIL {label}")
                for p in problems:
                    print(f"     {p}")
            else:
                passed += 1
                print(f"ok   {label}")
        if not hook.alive():
            print("FAIL the server died during the suite")
            failed += 1
    if passed == 0:
        print("no case ran")
        failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
