"""Defaulting, registry strategies and validation of the served kinds, after kube-apiserver's
pkg/apis/*/v1/defaults.go, pkg/registry/*/strategy.go and pkg/apis/*/validation.

Only the rules our code could trip over are implemented; each error is a kerrors.FieldError whose
text matches the real one.
"""

import copy
import json
import re
import secrets

import klabels
from kerrors import FieldError

# ----------------------------------------------------------------------------------------------
# Semantic equality (apiequality.Semantic.DeepEqual): nil and empty slices/maps are equal.


def semantic_normalize(v):
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            nx = semantic_normalize(x)
            if nx is None or nx == [] or nx == {}:
                continue
            out[k] = nx
        return out
    if isinstance(v, list):
        return [semantic_normalize(x) for x in v]
    return v


def semantic_equal(a, b):
    return semantic_normalize(a) == semantic_normalize(b)


# ----------------------------------------------------------------------------------------------
# Defaulting (pkg/apis/core/v1/defaults.go, pkg/apis/apps/v1/defaults.go)

def _image_pull_policy(image):
    ref = image or ""
    if "@" in ref:
        return "IfNotPresent"
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        return "Always"
    if last.rsplit(":", 1)[1] == "latest":
        return "Always"
    return "IfNotPresent"


def _default_probe(p):
    if not isinstance(p, dict):
        return
    p.setdefault("timeoutSeconds", 1)
    p.setdefault("periodSeconds", 10)
    p.setdefault("successThreshold", 1)
    p.setdefault("failureThreshold", 3)
    hg = p.get("httpGet")
    if isinstance(hg, dict):
        hg.setdefault("path", "/")
        hg.setdefault("scheme", "HTTP")


def default_container(c):
    if not isinstance(c, dict):
        return
    c.setdefault("resources", {})
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    if "imagePullPolicy" not in c:
        c["imagePullPolicy"] = _image_pull_policy(c.get("image"))
    for p in c.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")
    for e in c.get("env") or []:
        if isinstance(e, dict):
            fr = (e.get("valueFrom") or {}).get("fieldRef")
            if isinstance(fr, dict):
                fr.setdefault("apiVersion", "v1")
    for name in ("livenessProbe", "readinessProbe", "startupProbe"):
        _default_probe(c.get(name))


def default_pod_spec(spec):
    if not isinstance(spec, dict):
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            default_container(c)
    for v in spec.get("volumes") or []:
        if not isinstance(v, dict):
            continue
        sources = [k for k in v if k != "name"]
        if not sources:
            v["emptyDir"] = {}
        for src in ("configMap", "secret", "projected", "downwardAPI"):
            if isinstance(v.get(src), dict):
                v[src].setdefault("defaultMode", 420)


def default_pod_template(t):
    if isinstance(t, dict):
        default_pod_spec(t.get("spec"))


def qos_class(spec):
    containers = list((spec or {}).get("containers") or []) + list((spec or {}).get("initContainers") or [])
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req = res.get("requests") or {}
        lim = res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim:
                guaranteed = False
            elif r in req and str(req[r]) != str(lim[r]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def default_deployment(d):
    spec = d.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy.get("type") == "RollingUpdate":
            ru = strategy.get("rollingUpdate")
            if ru is None:
                ru = strategy["rollingUpdate"] = {}
            if isinstance(ru, dict):
                ru.setdefault("maxUnavailable", "25%")
                ru.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    default_pod_template(spec.get("template"))


def default_replicaset(rs):
    spec = rs.setdefault("spec", {})
    if isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        default_pod_template(spec.get("template"))


def default_pod(pod):
    spec = pod.get("spec")
    if isinstance(spec, dict):
        default_pod_spec(spec)
        spec.setdefault("enableServiceLinks", True)


# Admission plugins that every real cluster runs on pod CREATE: ServiceAccount (service account
# name and token volume), DefaultTolerationSeconds, Priority.
SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def random_suffix(n=5):
    return "".join(secrets.choice(_NAME_ALPHABET) for _ in range(n))


def admit_pod_create(pod):
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    spec["serviceAccount"] = spec["serviceAccountName"]
    if spec.get("automountServiceAccountToken", True) is not False:
        mounted = any(isinstance(m, dict) and m.get("mountPath") == SERVICE_ACCOUNT_MOUNT
                      for c in spec.get("containers") or [] for m in (c.get("volumeMounts") or []))
        if not mounted:
            vname = "kube-api-access-" + random_suffix()
            spec.setdefault("volumes", []).append({
                "name": vname,
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                    ],
                    "defaultMode": 420,
                },
            })
            for key in ("containers", "initContainers"):
                for c in spec.get(key) or []:
                    if isinstance(c, dict):
                        c.setdefault("volumeMounts", []).append(
                            {"name": vname, "readOnly": True, "mountPath": SERVICE_ACCOUNT_MOUNT})
    tolerations = spec.setdefault("tolerations", [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(isinstance(t, dict) and t.get("key") == key for t in tolerations):
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")


# ----------------------------------------------------------------------------------------------
# ObjectMeta


def validate_object_meta(meta, namespaced=True, path="metadata"):
    errs = []
    if not isinstance(meta, dict):
        return [FieldError.required(path)]
    name = meta.get("name") or ""
    gen = meta.get("generateName") or ""
    if not name and not gen:
        errs.append(FieldError.required(path + ".name", "name or generateName is required"))
    if gen:
        for m in klabels.is_dns1123_subdomain(gen[:-1] if gen.endswith("-") else gen):
            errs.append(FieldError.invalid(path + ".generateName", gen, m))
    if name:
        for m in klabels.is_dns1123_subdomain(name):
            errs.append(FieldError.invalid(path + ".name", name, m))
    if namespaced:
        ns = meta.get("namespace") or ""
        if not ns:
            errs.append(FieldError.required(path + ".namespace"))
        else:
            for m in klabels.is_dns1123_label(ns):
                errs.append(FieldError.invalid(path + ".namespace", ns, m))
    errs.extend(klabels.validate_labels(meta.get("labels"), path + ".labels"))
    errs.extend(klabels.validate_annotations(meta.get("annotations"), path + ".annotations"))
    errs.extend(_validate_owner_references(meta.get("ownerReferences"), path + ".ownerReferences"))
    fins = meta.get("finalizers")
    if fins is not None:
        if not isinstance(fins, list):
            errs.append(FieldError.invalid(path + ".finalizers", fins, "must be a list of strings"))
        else:
            for f in fins:
                if not isinstance(f, str):
                    errs.append(FieldError.invalid(path + ".finalizers", f, "must be a string"))
                    continue
                for m in klabels.is_qualified_name(f):
                    errs.append(FieldError.invalid(path + ".finalizers", f, m))
    return errs


def _validate_owner_references(refs, path):
    """ValidateOwnerReferences (k8s.io/apimachinery v0.37 pkg/api/validation/objectmeta.go)."""
    errs = []
    if refs is None:
        return errs
    if not isinstance(refs, list):
        return [FieldError.invalid(path, refs, "must be a list")]
    first_controller = ""
    for i, r in enumerate(refs):
        p = "%s[%d]" % (path, i)
        if not isinstance(r, dict):
            errs.append(FieldError.invalid(p, r, "must be an object"))
            continue
        api_version = r.get("apiVersion") or ""
        parts = api_version.split("/")
        group, version = ("", parts[0]) if len(parts) == 1 else (parts[0], parts[1]) if len(parts) == 2 else ("", "")
        if not api_version:
            errs.append(FieldError.required(p + ".apiVersion", "must not be empty"))
        elif len(parts) > 2 or not version:
            errs.append(FieldError.invalid(p + ".apiVersion", api_version, "must be <group>/<version> or <version>"))
        for key in ("kind", "name", "uid"):
            if not r.get(key):
                errs.append(FieldError.required(p + "." + key, "must not be empty"))
        if (group, version, r.get("kind")) == ("", "v1", "Event"):  # BannedOwners
            errs.append(FieldError.invalid(p, r, "/v1, Kind=Event is disallowed from being an owner"))
        if r.get("controller") is True:
            current = "%s/%s" % (r.get("kind") or "", r.get("name") or "")
            if first_controller:
                errs.append(FieldError.invalid(path, refs, "Only one reference can have Controller set to true. "
                                                           "Found \"true\" in references for %s and %s"
                                                           % (first_controller, current)))
            else:
                first_controller = current
    return errs


def validate_object_meta_update(new, old, path="metadata"):
    errs = []
    nm, om = new.get("metadata") or {}, old.get("metadata") or {}
    if nm.get("uid") and nm.get("uid") != om.get("uid"):
        errs.append(FieldError.invalid(path + ".uid", nm.get("uid"), "field is immutable"))
    if om.get("deletionTimestamp"):
        added = [f for f in (nm.get("finalizers") or []) if f not in (om.get("finalizers") or [])]
        if added:
            errs.append(FieldError.forbidden(path + ".finalizers",
                                             "no new finalizers can be added if the object is being deleted, found "
                                             "new finalizers []string{%s}" % ", ".join('"%s"' % f for f in added)))
    return errs


def reset_system_meta_on_update(new, old):
    """rest.BeforeUpdate/FillObjectMetaSystemFields: system fields come from the stored object."""
    nm = new.setdefault("metadata", {})
    om = old.get("metadata") or {}
    for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
              "selfLink"):
        if k in om:
            nm[k] = om[k]
        else:
            nm.pop(k, None)
    if "generateName" in om and "generateName" not in nm:
        nm["generateName"] = om["generateName"]


# ----------------------------------------------------------------------------------------------
# Pods

_RESTART_POLICIES = ["Always", "OnFailure", "Never"]


def validate_pod_spec(spec, path, template=False):
    errs = []
    if not isinstance(spec, dict):
        return [FieldError.required(path)]
    vol_names = set()
    for i, v in enumerate(spec.get("volumes") or []):
        vp = "%s.volumes[%d]" % (path, i)
        n = (v or {}).get("name") or ""
        if not n:
            errs.append(FieldError.required(vp + ".name"))
        else:
            for m in klabels.is_dns1123_label(n):
                errs.append(FieldError.invalid(vp + ".name", n, m))
            if n in vol_names:
                errs.append(FieldError.duplicate(vp + ".name", n))
            vol_names.add(n)
    containers = spec.get("containers")
    if not containers:
        errs.append(FieldError.required(path + ".containers"))
    names = set()
    for key in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(key) or []):
            cp = "%s.%s[%d]" % (path, key, i)
            if not isinstance(c, dict):
                errs.append(FieldError.invalid(cp, c, "must be an object"))
                continue
            n = c.get("name") or ""
            if not n:
                errs.append(FieldError.required(cp + ".name"))
            else:
                for m in klabels.is_dns1123_label(n):
                    errs.append(FieldError.invalid(cp + ".name", n, m))
                if n in names:
                    errs.append(FieldError.duplicate(cp + ".name", n))
                names.add(n)
            image = c.get("image")
            if not image:
                errs.append(FieldError.required(cp + ".image"))
            elif image.strip() != image:
                errs.append(FieldError.invalid(cp + ".image", image, "must not have leading or trailing whitespace"))
            for j, p in enumerate(c.get("ports") or []):
                pp = "%s.ports[%d]" % (cp, j)
                port = (p or {}).get("containerPort")
                if not isinstance(port, int) or not 1 <= port <= 65535:
                    errs.append(FieldError.invalid(pp + ".containerPort", port if port is not None else 0,
                                                   "must be between 1 and 65535, inclusive"))
                proto = (p or {}).get("protocol", "TCP")
                if proto not in ("TCP", "UDP", "SCTP"):
                    errs.append(FieldError.not_supported(pp + ".protocol", proto, ["SCTP", "TCP", "UDP"]))
            for j, e in enumerate(c.get("env") or []):
                if not (e or {}).get("name"):
                    errs.append(FieldError.required("%s.env[%d].name" % (cp, j)))
            for j, m in enumerate(c.get("volumeMounts") or []):
                mn = (m or {}).get("name") or ""
                mp = "%s.volumeMounts[%d]" % (cp, j)
                if not mn:
                    errs.append(FieldError.required(mp + ".name"))
                elif mn not in vol_names:
                    errs.append(FieldError.not_found(mp + ".name", mn))
                if not (m or {}).get("mountPath"):
                    errs.append(FieldError.required(mp + ".mountPath"))
    rp = spec.get("restartPolicy")
    if rp not in _RESTART_POLICIES:
        errs.append(FieldError.not_supported(path + ".restartPolicy", rp, _RESTART_POLICIES))
    ads = spec.get("activeDeadlineSeconds")
    if ads is not None and (not isinstance(ads, int) or ads < 1):
        errs.append(FieldError.invalid(path + ".activeDeadlineSeconds", ads,
                                       "must be between 1 and 2147483647, inclusive"))
    for i, g in enumerate(spec.get("readinessGates") or []):
        ct = (g or {}).get("conditionType") or ""
        for m in klabels.is_qualified_name(ct):
            errs.append(FieldError.invalid("%s.readinessGates[%d].conditionType" % (path, i), ct, m))
    for i, t in enumerate(spec.get("tolerations") or []):
        op = (t or {}).get("operator", "Equal")
        if op not in ("Equal", "Exists", ""):
            errs.append(FieldError.not_supported("%s.tolerations[%d].operator" % (path, i), op, ["Equal", "Exists"]))
    errs.extend(klabels.validate_labels(spec.get("nodeSelector"), path + ".nodeSelector"))
    return errs


def validate_pod(pod):
    errs = validate_object_meta(pod.get("metadata"))
    errs.extend(validate_pod_spec(pod.get("spec"), "spec"))
    return errs


POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions "
    "to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it "
    "was previously negative)")


def _spec_diff(old, new, prefix="spec"):
    """A short, cmp.Diff-like description of what differs (kube-apiserver prints a Go diff)."""
    lines = []

    def walk(a, b, p):
        if len(lines) >= 20:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for k in list(a.keys()) + [k for k in b if k not in a]:
                walk(a.get(k), b.get(k), p + "." + k)
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, "%s[%d]" % (p, i))
        elif semantic_normalize(a) != semantic_normalize(b):
            lines.append("  \t%s:\n- \t\t%s,\n+ \t\t%s," % (p, json.dumps(a), json.dumps(b)))

    walk(old, new, prefix)
    return "  core.PodSpec{\n" + "\n".join(lines) + "\n  }\n"


def validate_pod_update(new, old):
    """ValidatePodUpdate: only images, activeDeadlineSeconds, toleration additions (and the
    negative→1 terminationGracePeriodSeconds case) may change in spec."""
    errs = validate_object_meta(new.get("metadata"))
    errs.extend(validate_object_meta_update(new, old))
    ns, os_ = new.get("spec") or {}, old.get("spec") or {}
    for key in ("containers", "initContainers"):
        nc, oc = ns.get(key) or [], os_.get(key) or []
        if len(nc) != len(oc):
            errs.append(FieldError.forbidden("spec." + key, "pod updates may not add or remove containers"))
            return errs
        for i, c in enumerate(nc):
            image = (c or {}).get("image")
            if not image:
                errs.append(FieldError.required("spec.%s[%d].image" % (key, i)))
            elif image.strip() != image:
                errs.append(FieldError.invalid("spec.%s[%d].image" % (key, i), image,
                                               "must not have leading or trailing whitespace"))
    nads, oads = ns.get("activeDeadlineSeconds"), os_.get("activeDeadlineSeconds")
    if nads is not None:
        if not isinstance(nads, int) or nads < 0 or nads > 2147483647:
            errs.append(FieldError.invalid("spec.activeDeadlineSeconds", nads,
                                           "must be between 0 and 2147483647, inclusive"))
            return errs
        if oads is not None and oads < nads:
            errs.append(FieldError.invalid("spec.activeDeadlineSeconds", nads,
                                           "must be less than or equal to previous value"))
            return errs
    elif oads is not None:
        errs.append(FieldError.invalid("spec.activeDeadlineSeconds", None,
                                       "must not update from a positive integer to a nil value"))
    # Tolerations: only additions (tolerationSeconds of existing ones may change).
    new_tols = [dict(t, tolerationSeconds=None) for t in (ns.get("tolerations") or []) if isinstance(t, dict)]
    for t in os_.get("tolerations") or []:
        if not isinstance(t, dict):
            continue
        probe = semantic_normalize(dict(t, tolerationSeconds=None))
        if not any(semantic_normalize(x) == probe for x in new_tols):
            errs.append(FieldError.forbidden("spec.tolerations",
                                             "existing toleration can not be modified except its tolerationSeconds"))
            break
    if semantic_equal(ns, os_):
        return errs
    munged = copy.deepcopy(ns)
    for key in ("containers", "initContainers"):
        for c, o in zip(munged.get(key) or [], os_.get(key) or []):
            if isinstance(c, dict) and isinstance(o, dict):
                if "image" in o:
                    c["image"] = o["image"]
                else:
                    c.pop("image", None)
    for key in ("activeDeadlineSeconds", "tolerations", "schedulingGates"):
        if key in os_:
            munged[key] = copy.deepcopy(os_[key])
        else:
            munged.pop(key, None)
    otg, ntg = os_.get("terminationGracePeriodSeconds"), munged.get("terminationGracePeriodSeconds")
    if isinstance(otg, int) and otg < 0 and ntg == 1:
        munged["terminationGracePeriodSeconds"] = otg
    if not semantic_equal(munged, os_):
        errs.append(FieldError.forbidden("spec", POD_UPDATE_FORBIDDEN + "\n" + _spec_diff(os_, munged)))
    return errs


_CONDITION_STATUSES = ["False", "True", "Unknown"]


def validate_pod_status_update(new, old):
    errs = validate_object_meta(new.get("metadata"))
    errs.extend(validate_object_meta_update(new, old))
    status = new.get("status") or {}
    gates = {g.get("conditionType") for g in ((new.get("spec") or {}).get("readinessGates") or [])
             if isinstance(g, dict)}
    for i, c in enumerate(status.get("conditions") or []):
        if not isinstance(c, dict):
            continue
        if not c.get("type"):
            errs.append(FieldError.required("status.conditions[%d].type" % i))
        if c.get("type") in gates and c.get("status") not in _CONDITION_STATUSES:
            errs.append(FieldError.not_supported("status.conditions[%d].status" % i, c.get("status"),
                                                 _CONDITION_STATUSES))
    return errs


# ----------------------------------------------------------------------------------------------
# Deployments and ReplicaSets (pkg/apis/apps/validation)

_PERCENT_RE = re.compile(r"^[0-9]+%$")


def _int_or_percent(v, path):
    errs = []
    if isinstance(v, bool):
        errs.append(FieldError.invalid(path, v, "must be an integer or percentage (e.g '5%')"))
    elif isinstance(v, int):
        if v < 0:
            errs.append(FieldError.invalid(path, v, "must be greater than or equal to 0"))
    elif isinstance(v, str):
        if not _PERCENT_RE.match(v):
            errs.append(FieldError.invalid(path, v, "a valid percent string must be a numeric string followed by an "
                                                    "ending '%' (e.g. '1%',  or '93%', regex used for validation is "
                                                    "'[0-9]+%')"))
    else:
        errs.append(FieldError.invalid(path, v, "must be an integer or percentage (e.g '5%')"))
    return errs


def _is_zero(v):
    return v == 0 or v == "0%"


def _non_negative(spec, key, path, errs):
    v = spec.get(key)
    if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
        errs.append(FieldError.invalid(path + "." + key, v, "must be greater than or equal to 0"))


def _validate_template_for_rs(template, selector, path, selector_path):
    errs = []
    if not isinstance(template, dict):
        return [FieldError.required(path)]
    meta = template.get("metadata") or {}
    labels = meta.get("labels") or {}
    errs.extend(klabels.validate_labels(meta.get("labels"), path + ".metadata.labels"))
    errs.extend(klabels.validate_annotations(meta.get("annotations"), path + ".metadata.annotations"))
    if selector is not None and not klabels.selector_struct_is_empty(selector):
        if not klabels.selector_struct_matches(selector, labels):
            errs.append(FieldError.invalid(path + ".metadata.labels", labels,
                                           "`selector` does not match template `labels`"))
    spec = template.get("spec")
    errs.extend(validate_pod_spec(spec, path + ".spec", template=True))
    if isinstance(spec, dict):
        if spec.get("restartPolicy") not in (None, "Always") and spec.get("restartPolicy") in _RESTART_POLICIES:
            errs.append(FieldError.not_supported(path + ".spec.restartPolicy", spec.get("restartPolicy"), ["Always"]))
        if spec.get("activeDeadlineSeconds") is not None:
            errs.append(FieldError.forbidden(path + ".spec.activeDeadlineSeconds",
                                             "activeDeadlineSeconds in ReplicaSet is not Supported"))
    return errs


def _validate_selector_present(spec, path):
    """The selector part of ValidateDeploymentSpec and ValidateReplicaSetSpec (worded alike)."""
    errs = []
    sel = spec.get("selector")
    if sel is None:
        errs.append(FieldError.required(path + ".selector"))
    else:
        errs.extend(klabels.validate_label_selector(sel, path + ".selector"))
        if klabels.selector_struct_is_empty(sel):
            errs.append(FieldError.invalid(path + ".selector", sel, "empty selector is invalid for deployment"))
    return errs


def validate_deployment(d):
    errs = validate_object_meta(d.get("metadata"))
    spec = d.get("spec")
    if not isinstance(spec, dict):
        return errs + [FieldError.required("spec")]
    _non_negative(spec, "replicas", "spec", errs)
    errs.extend(_validate_selector_present(spec, "spec"))
    errs.extend(_validate_template_for_rs(spec.get("template"), spec.get("selector"), "spec.template",
                                          "spec.selector"))
    strategy = spec.get("strategy") or {}
    stype = strategy.get("type")
    if stype not in ("Recreate", "RollingUpdate"):
        errs.append(FieldError.not_supported("spec.strategy.type", stype, ["Recreate", "RollingUpdate"]))
    elif stype == "Recreate":
        if strategy.get("rollingUpdate") is not None:
            errs.append(FieldError.forbidden("spec.strategy.rollingUpdate",
                                             "may not be specified when strategy `type` is 'Recreate'"))
    else:
        ru = strategy.get("rollingUpdate")
        if ru is None:
            errs.append(FieldError.required("spec.strategy.rollingUpdate",
                                            "this should be defaulted and never be nil"))
        else:
            mu, ms = ru.get("maxUnavailable"), ru.get("maxSurge")
            errs.extend(_int_or_percent(mu, "spec.strategy.rollingUpdate.maxUnavailable"))
            errs.extend(_int_or_percent(ms, "spec.strategy.rollingUpdate.maxSurge"))
            if _is_zero(mu) and _is_zero(ms):
                errs.append(FieldError.invalid("spec.strategy.rollingUpdate.maxUnavailable", mu,
                                               "may not be 0 when `maxSurge` is 0"))
            if isinstance(mu, str) and _PERCENT_RE.match(mu) and int(mu[:-1]) > 100:
                errs.append(FieldError.invalid("spec.strategy.rollingUpdate.maxUnavailable", mu,
                                               "must not be greater than 100%"))
    _non_negative(spec, "revisionHistoryLimit", "spec", errs)
    _non_negative(spec, "minReadySeconds", "spec", errs)
    pds = spec.get("progressDeadlineSeconds")
    if pds is not None:
        _non_negative(spec, "progressDeadlineSeconds", "spec", errs)
        if isinstance(pds, int) and pds <= (spec.get("minReadySeconds") or 0):
            errs.append(FieldError.invalid("spec.progressDeadlineSeconds", pds,
                                           "must be greater than minReadySeconds"))
    return errs


def validate_deployment_update(new, old):
    errs = validate_deployment(new)
    errs.extend(validate_object_meta_update(new, old))
    ns, os_ = new.get("spec") or {}, old.get("spec") or {}
    if not semantic_equal(ns.get("selector"), os_.get("selector")):
        errs.append(FieldError.invalid("spec.selector", ns.get("selector"), "field is immutable"))
    return errs


def validate_workload_status_update(new, old):
    errs = validate_object_meta(new.get("metadata"))
    errs.extend(validate_object_meta_update(new, old))
    status = new.get("status") or {}
    for k in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas",
              "fullyLabeledReplicas", "observedGeneration", "collisionCount"):
        _non_negative(status, k, "status", errs)
    return errs


def validate_replicaset(rs):
    errs = validate_object_meta(rs.get("metadata"))
    spec = rs.get("spec")
    if not isinstance(spec, dict):
        return errs + [FieldError.required("spec")]
    _non_negative(spec, "replicas", "spec", errs)
    _non_negative(spec, "minReadySeconds", "spec", errs)
    errs.extend(_validate_selector_present(spec, "spec"))
    errs.extend(_validate_template_for_rs(spec.get("template"), spec.get("selector"), "spec.template",
                                          "spec.selector"))
    return errs


def validate_replicaset_update(new, old):
    errs = validate_replicaset(new)
    errs.extend(validate_object_meta_update(new, old))
    if not semantic_equal((new.get("spec") or {}).get("selector"), (old.get("spec") or {}).get("selector")):
        errs.append(FieldError.invalid("spec.selector", (new.get("spec") or {}).get("selector"), "field is immutable"))
    return errs


# ----------------------------------------------------------------------------------------------
# Leases and Events

def validate_lease(lease):
    errs = validate_object_meta(lease.get("metadata"))
    spec = lease.get("spec") or {}
    lds = spec.get("leaseDurationSeconds")
    if lds is not None and (not isinstance(lds, int) or lds <= 0):
        errs.append(FieldError.invalid("spec.leaseDurationSeconds", lds, "must be greater than 0"))
    lt = spec.get("leaseTransitions")
    if lt is not None and (not isinstance(lt, int) or lt < 0):
        errs.append(FieldError.invalid("spec.leaseTransitions", lt, "must be greater than or equal to 0"))
    return errs


def validate_lease_update(new, old):
    return validate_lease(new) + validate_object_meta_update(new, old)


def validate_event(ev, events_api=False):
    """legacyValidateEvent (core/v1) plus the strict events.k8s.io/v1 create rules."""
    errs = []
    meta = ev.get("metadata") or {}
    ns = meta.get("namespace") or ""
    involved = ev.get("involvedObject") or {}
    ctrl_field = "reportingController" if events_api else "reportingComponent"
    if events_api:
        errs.extend(validate_object_meta(meta))
    elif not meta.get("name") and not meta.get("generateName"):
        errs.append(FieldError.required("metadata.name", "name or generateName is required"))
    if not ev.get("eventTime"):
        ins = involved.get("namespace") or ""
        if not ins:
            if ns not in ("", "default"):
                errs.append(FieldError.invalid("involvedObject.namespace", ins, "does not match event.namespace"))
        elif ns != ins:
            errs.append(FieldError.invalid("involvedObject.namespace", ins, "does not match event.namespace"))
    else:
        if not involved.get("namespace") and ns not in ("default", "kube-system"):
            errs.append(FieldError.invalid("involvedObject.namespace", involved.get("namespace") or "",
                                           "does not match event.namespace"))
        rc = ev.get("reportingComponent") or ""
        if not rc:
            errs.append(FieldError.required(ctrl_field))
        for m in klabels.is_qualified_name(rc) if rc else []:
            errs.append(FieldError.invalid(ctrl_field, rc, m))
        ri = ev.get("reportingInstance") or ""
        if not ri:
            errs.append(FieldError.required("reportingInstance"))
        if len(ri) > 128:
            errs.append(FieldError.invalid("reportingInstance", "", "can have at most 128 characters"))
        if not ev.get("action"):
            errs.append(FieldError.required("action"))
        if len(ev.get("action") or "") > 128:
            errs.append(FieldError.invalid("action", "", "can have at most 128 characters"))
        if not ev.get("reason"):
            errs.append(FieldError.required("reason"))
        if len(ev.get("reason") or "") > 128:
            errs.append(FieldError.invalid("reason", "", "can have at most 128 characters"))
        if len(ev.get("message") or "") > 1024:
            errs.append(FieldError.invalid("note" if events_api else "message", "", "can have at most 1024 characters"))
    if events_api:
        if not ev.get("eventTime"):
            errs.append(FieldError.required("eventTime"))
        if ev.get("type") not in ("Normal", "Warning"):
            errs.append(FieldError.invalid("type", "", "has invalid value: %s" % (ev.get("type") or "")))
    for m in klabels.is_dns1123_subdomain(ns) if ns else []:
        errs.append(FieldError.invalid("namespace", ns, m))
    return errs
