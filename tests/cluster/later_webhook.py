"""A second mutating admission webhook for the real cluster, ordered after ours (its configuration's name sorts
later): for a Deployment whose first container is at the image given, it adds an env var to that container (a
change that is not in-place eligible), once. Run it inside the cluster's network namespace, where the API server
calls https://127.0.0.1:PORT/mutate:

    python3 later_webhook.py --cert C --key K --image IMG --port-file F

It writes its port to F once it listens and serves until killed. Standard library only."""

import argparse
import base64
import http.server
import json
import os
import ssl

ENV = {"name": "ADDED_BY_LATER_WEBHOOK", "value": "1"}


def patch_for(obj, image):
    containers = ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
    if not containers or containers[0].get("image") != image:
        return None
    env = containers[0].get("env")
    if env and any(e.get("name") == ENV["name"] for e in env):
        return None
    if env is None:
        return [{"op": "add", "path": "/spec/template/spec/containers/0/env", "value": [ENV]}]
    return [{"op": "add", "path": "/spec/template/spec/containers/0/env/-", "value": ENV}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--port-file", required=True)
    args = ap.parse_args()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            req = review["request"]
            response = {"uid": req["uid"], "allowed": True}
            patch = patch_for(req.get("object") or {}, args.image)
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
