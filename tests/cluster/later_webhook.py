"""A second mutating admission webhook for the real cluster, ordered after ours (its configuration's name sorts
later): for a Deployment whose first container is at the image given, it adds an env var to that container (a
change that is not in-place eligible), once. Run it inside the cluster's network namespace, where the API server
calls https://127.0.0.1:PORT/mutate:

    python3 later_webhook.py --cert C --key K --image IMG --port-file F

It writes its port to F once it listens and serves until killed. Standard library only."""

import argparse

import mutating_webhook

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

    mutating_webhook.serve(args.cert, args.key, args.port_file, lambda path, obj: patch_for(obj, args.image))


if __name__ == "__main__":
    main()
