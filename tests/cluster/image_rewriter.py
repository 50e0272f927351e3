"""A mutating admission webhook on pods for the real cluster that rewrites container images, as a registry mirror
or a digest-pinning webhook does: on pod CREATE and UPDATE, every container image that starts with FROM is
rewritten to start with TO instead. It serves one set of rules per URL path (a MutatingWebhookConfiguration picks
the path, and with an objectSelector the pods). Run it inside the cluster's network namespace, where the API server
calls https://127.0.0.1:PORT/PATH:

    python3 image_rewriter.py --cert C --key K --port-file F --rule /mirror localhost/a: localhost/mirror/a: ...

It writes its port to F once it listens and serves until killed. Standard library only."""

import argparse

import mutating_webhook


def patch_for(pod, rules):
    """The JSON patch that rewrites the pod's container images by `rules` ([(FROM, TO)]), or None."""
    out = []
    for kind in ("initContainers", "containers"):
        for i, c in enumerate((pod.get("spec") or {}).get(kind) or []):
            image = c.get("image") or ""
            for old, new in rules:
                if image.startswith(old) and not image.startswith(new):
                    out.append({"op": "replace", "path": "/spec/%s/%d/image" % (kind, i),
                                "value": new + image[len(old):]})
                    break
    return out or None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--rule", nargs=3, action="append", metavar=("PATH", "FROM", "TO"), default=[])
    args = ap.parse_args()
    rules = {}
    for path, old, new in args.rule:
        rules.setdefault(path, []).append((old, new))

    mutating_webhook.serve(args.cert, args.key, args.port_file, lambda path, obj: patch_for(obj, rules.get(path, [])))


if __name__ == "__main__":
    main()
