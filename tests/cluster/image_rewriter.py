"""A mutating admission webhook on pods for the real cluster that rewrites container images, as a registry mirror
or a digest-pinning webhook does: on pod CREATE and UPDATE, every container image that starts with FROM is
rewritten to start with TO instead. It serves one set of rules per URL path (a MutatingWebhookConfiguration picks
the path, and with an objectSelector the pods). Run it inside the cluster's network namespace, where the API server
calls https://127.0.0.1:PORT/PATH:

    python3 image_rewriter.py --cert C --key K --port-file F --rule /mirror localhost/a: localhost/mirror/a: ...

It writes its port to F once it listens and serves until killed. Standard library only."""

import argparse
import base64
import http.server
import json
import os
import ssl


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

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            req = review["request"]
            response = {"uid": req["uid"], "allowed": True}
            patch = patch_for(req.get("object") or {}, rules.get(self.path.split("?")[0], []))
            if patch:
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
            body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                               "response": response}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
