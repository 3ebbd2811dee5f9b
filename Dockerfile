# luna container image.
#
#   docker build -t luna:0.1.0 .
#
# The build stage builds and installs with the Makefile (`make deps-build`,
# `make build/luna`, `make install-runtime`: the stripped executable and the
# Lua library); the runtime stage is debian:bookworm-slim with the shared
# libraries luna links, TLS roots, and nothing else. The image runs as uid 65532
# and writes nothing outside /tmp, so it runs with a read-only root
# filesystem (the Deployment in deploy/ mounts an emptyDir at /tmp).
# spec/16-deploy checks this file against the Makefile and `ldd build/luna`.

FROM debian:bookworm AS build
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends make \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile ./
RUN make deps-build \
 && rm -rf /var/lib/apt/lists/*
COPY host/ host/
COPY lua/ lua/
RUN make -j"$(nproc)" build/luna \
 && make install-runtime PREFIX=/usr/local DESTDIR=/out

FROM debian:bookworm-slim AS runtime
# One package per shared library `ldd build/luna` lists, except those
# debian:bookworm-slim already has (libc6, libgcc-s1, zlib1g, ...).
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates \
      libbrotli1 \
      libcurl4 \
      libev4 \
      libgssapi-krb5-2 \
      libjansson4 \
      libk5crypto3 \
      libkeyutils1 \
      libkrb5-3 \
      libkrb5support0 \
      libldap-2.5-0 \
      libluajit-5.1-2 \
      libmicrohttpd12 \
      libnghttp2-14 \
      libpsl5 \
      librtmp1 \
      libsasl2-2 \
      libssh2-1 \
      libssl3 \
      libyajl2 \
      libyaml-0-2 \
 && rm -rf /var/lib/apt/lists/* /var/log/apt/* /var/log/dpkg.log \
      /var/cache/debconf/*-old /var/lib/dpkg/*-old \
 && groupadd --system --gid 65532 luna \
 && useradd --system --uid 65532 --gid 65532 --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin luna \
 && mkdir -p /etc/luna/controllers
COPY --from=build /out/ /
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/luna", "run"]
CMD ["--watch", "/etc/luna/controllers"]
