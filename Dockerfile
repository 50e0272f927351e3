# inplace-webhook image: build with Debian bookworm's packages, run on bookworm-slim as uid 65532.
#   docker build -t inplace-webhook:0.1.0 .
# Without Docker, `make image` builds the same runtime FROM scratch (cluster/images/product.sh) as an OCI archive
# for `ctr -n k8s.io images import`.
# The runtime stage installs only the shared libraries the binary links (ldd build/inplace-webhook):
# libcpp-httplib.so.0.11 (libcpp-httplib0.11, which pulls libbrotli1 and zlib1g), libssl.so.3 and
# libcrypto.so.3 (libssl3); libstdc++6, libgcc-s1 and libc6 are in the base image. ca-certificates is
# for --api-server URLs signed by a public CA (in cluster the service-account CA file is used).

FROM debian:bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      g++ cmake make pkg-config libcpp-httplib-dev libssl-dev rapidjson-dev libcxxopts-dev doctest-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Configuring needs the whole tree (CMakeLists.txt also declares the test targets); only the server is built.
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
 && cmake --build build --target inplace-webhook -j "$(nproc)" \
 && strip build/inplace-webhook

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libcpp-httplib0.11 libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/inplace-webhook /usr/local/bin/inplace-webhook
# 65532: the conventional "nonroot" uid; the chart's securityContext runs as the same uid.
USER 65532:65532
# 8443: HTTPS admission webhook (--port); 8080: /healthz, /readyz, /metrics (--probe-port).
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/inplace-webhook"]
CMD ["serve"]
