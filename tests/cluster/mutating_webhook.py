"""The serving half of the test's own mutating admission webhooks (later_webhook.py, image_rewriter.py): HTTPS on
127.0.0.1, one AdmissionReview per POST, answered allowed with the JSON patch a function gives for the request's
path and object. Standard library only."""

import base64
import http.server
import json
import os
import ssl


def serve(cert, key, port_file, patch_for):
    """Serves until killed; writes the port to `port_file` once listening. `patch_for(path, object)` returns a JSON
    patch (a list) or None."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            req = review["request"]
            response = {"uid": req["uid"], "allowed": True}
            patch = patch_for(self.path.split("?")[0], req.get("object") or {})
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
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()
