# luna — build, test, run.  See README.md for the commands a user types.
#
# host/ is layered, one folder per layer (docs/internals.md); a folder
# includes only from the layers below it.  The core (every layer but main.c
# and devserver/) is compiled once per variant into libluna.a, which is linked
# both into the `luna` executable and into the Lua C module `luna.core`
# (core.so) that plain `luajit` can require.  The dev server has its own
# archive, libluna_devserver.a, linked into `luna` only.
#
# Variants:  build/       release (-O2), what `make` and `make run` use
#            build/test/  ASan + UBSan, what `make test` uses
#            build/fuzz/  clang, ASan + UBSan + libFuzzer, what `make fuzz` uses

VERSION   := 0.1.0
PREFIX    ?= /usr/local
CC        ?= cc
SPEC      ?= spec
BUSTED    := luajit /usr/bin/busted

PKGS      := luajit libcurl yaml-0.1 libmicrohttpd yajl jansson libcrypto
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# The Lua module gets the Lua API from the luajit process that loads it, so
# it must not link a second copy of LuaJIT.
MOD_LIBS  := $(filter-out -lluajit-5.1,$(PKG_LIBS)) -lev -ldl -lm
EXE_LIBS  := $(PKG_LIBS) -lev -ldl -lm

WARN      := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -fPIC -g $(WARN) $(PKG_CFLAGS) \
               -DLUNA_VERSION='"$(VERSION)"' -Ihost
REL_FLAGS := -O2
SAN_FLAGS := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
             -fno-sanitize-recover=undefined

# Debian package names `make deps` installs (build, test, bench and run).
DEB_PKGS  := build-essential pkg-config luajit libluajit-5.1-dev \
             libcurl4-openssl-dev libev-dev libyaml-dev libmicrohttpd-dev \
             libyajl-dev uthash-dev lua-busted lua-cjson libjansson-dev \
             libcjson-dev libjson-c-dev libssl-dev openssl ca-certificates procps \
             curl nghttp2-server libjsmn-dev clang libclang-rt-14-dev iproute2
# The subset the container's build stage installs (`make deps-build`): every
# package above except these, which only the specs, benchmarks and tools use.
# New packages therefore reach the build stage unless they are listed here;
# spec/16-deploy checks that every header, library and .pc file the build
# uses comes from DEB_BUILD_PKGS or what they depend on.
DEB_NOBUILD_PKGS := luajit lua-busted lua-cjson libcjson-dev libjson-c-dev \
             openssl ca-certificates procps curl nghttp2-server libjsmn-dev \
             clang libclang-rt-14-dev iproute2
DEB_BUILD_PKGS := $(filter-out $(DEB_NOBUILD_PKGS),$(DEB_PKGS))

CORE_LAYERS := base client cache queue lua script serve cluster controller api runtime testing
CORE_SRC  := $(foreach l,$(CORE_LAYERS),$(wildcard host/$(l)/*.c))
DEVSERVER_SRC := $(wildcard host/devserver/*.c)
FIXTURES  := $(patsubst spec/fixtures/%.c,%,$(wildcard spec/fixtures/*.c))
BENCHES   := $(patsubst bench/%.c,%,$(wildcard bench/*.c))

.PHONY: all deps deps-build deploy-sync test kube test-kube pbschema resources apischema run bench bench-peers clean install \
        install-runtime image test-container fuzz fuzz-smoke fuzz-build
all: build/luna build/lua/luna/core.so

# variant DIR FLAGS: object files, libluna.a, luna, core.so, fixtures, benches.
define variant
$(1)/obj/%.o: host/%.c
	@mkdir -p $$(@D)
	@echo '  CC    $$@'
	@$$(CC) $$(BASE_CFLAGS) $(2) -MMD -MP -c $$< -o $$@
$(1)/libluna.a: $$(patsubst host/%.c,$(1)/obj/%.o,$$(CORE_SRC))
	@rm -f $$@
	ar rcs $$@ $$^
$(1)/libluna_devserver.a: $$(patsubst host/%.c,$(1)/obj/%.o,$$(DEVSERVER_SRC))
	@rm -f $$@
	ar rcs $$@ $$^
$(1)/luna: $(1)/obj/main.o $(1)/libluna_devserver.a $(1)/libluna.a
	$$(CC) $(2) -rdynamic -o $$@ $$^ $$(EXE_LIBS)
$(1)/lua/luna/core.so: $(1)/libluna.a
	@mkdir -p $$(@D)
	$$(CC) $(2) -shared -o $$@ -Wl,--whole-archive $$< -Wl,--no-whole-archive $$(MOD_LIBS)
$(1)/fixtures/%: spec/fixtures/%.c $(1)/libluna.a
	@mkdir -p $$(@D)
	$$(CC) $$(BASE_CFLAGS) $(2) -o $$@ $$< $(1)/libluna.a $$(EXE_LIBS)
$(1)/bench/%: bench/%.c $(1)/libluna.a
	@mkdir -p $$(@D)
	$$(CC) $$(BASE_CFLAGS) $(2) -o $$@ $$< $(1)/libluna.a $$(EXE_LIBS) $$(BENCH_LIBS)
-include $$(wildcard $(1)/obj/*.d $(1)/obj/*/*.d)
endef

$(eval $(call variant,build,$(REL_FLAGS)))
$(eval $(call variant,build/test,$(SAN_FLAGS)))

BENCH_LIBS := -ljansson -lcjson -ljson-c

# apt_install LIST: apt-get installs the packages of LIST that are missing.
define apt_install
missing=$$(for p in $(1); do \
    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; \
  done); \
if [ -n "$$missing" ]; then \
  echo "installing:" $$missing; \
  export DEBIAN_FRONTEND=noninteractive; \
  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
fi
endef

deps:
	@$(call apt_install,$(DEB_PKGS))
	@command -v kubectl >/dev/null || { export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null || \
	  echo "kubectl not available: kubectl specs will fail"; }

# What the container's build stage runs: only the packages building needs.
deps-build:
	@$(call apt_install,$(DEB_BUILD_PKGS))

# Regenerates controllers/kustomization.yaml (the ConfigMap deploy/ mounts)
# from controllers/*.lua, and deploy/rbac-controllers.yaml (the ClusterRole
# they need, aggregated into luna's) with `luna rbac`, which runs their
# specs; spec/19-authoring/04-rbac_spec.lua checks the file is current.
RBAC_FLAGS := --label rbac.luna.dev/aggregate-to-luna=true
deploy-sync: build/luna
	deploy/sync-controllers.sh controllers
	build/luna rbac $(RBAC_FLAGS) controllers >deploy/rbac-controllers.yaml.tmp || \
	  { rm -f deploy/rbac-controllers.yaml.tmp; exit 1; }
	mv deploy/rbac-controllers.yaml.tmp deploy/rbac-controllers.yaml

TEST_BIN := build/test/luna build/test/lua/luna/core.so \
            $(addprefix build/test/fixtures/,$(FIXTURES))

# The module runs inside luajit, which is not built with ASan, so the ASan
# runtime is preloaded.  LeakSanitizer checks the luajit process at exit
# too: every C object reachable from Lua must be freed by its __gc.
test: $(TEST_BIN)
	@mkdir -p build/test
	LUNA_BUILD=build/test \
	LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	LUNA_SUMMARY_FILE=build/test/summary.txt \
	$(BUSTED) $(SPEC)

# The real control plane (docs/kube.md): kube-apiserver, kube-controller-
# manager, kubectl and etcd of the versions pinned in spec/kube/*/go.mod,
# built from Go modules into ${LUNA_KUBE_CACHE:-~/.cache/luna-kube} (once
# per pinned set; the first build takes minutes).
kube:
	@spec/kube/build.sh

# Regenerates the dev server's protobuf tables from the pinned k8s.io/api
# Go types (host/devserver/devserver_protobuf.h); needs Go, not `make kube`.
pbschema:
	cd spec/kube/kubernetes && GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
	  $${GO:-$$(command -v go || echo /usr/local/go/bin/go)} run ./pbschema > ../../../host/devserver/devserver_pbschema.c.tmp
	mv host/devserver/devserver_pbschema.c.tmp host/devserver/devserver_pbschema.c

# Regenerates the dev server's table of built-in resources
# (host/devserver/devserver_resources.c) from the aggregated discovery of the
# pinned kube-apiserver, started with its defaults (no feature gates, no
# runtime config) by spec/kube/cluster.sh; needs Go and `make kube`.
resources: kube
	@mkdir -p build/resources
	spec/kube/cluster.sh run --dir build/resources/cluster --feature-gates '' --runtime-config '' -- \
	  sh -c 'cd spec/kube/kubernetes && GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
	  $${GO:-$$(command -v go || echo /usr/local/go/bin/go)} run ./resources \
	  > ../../../host/devserver/devserver_resources.c.tmp'
	mv host/devserver/devserver_resources.c.tmp host/devserver/devserver_resources.c

# The dev server's validation tables (host/devserver/devserver_schema.h):
# every built-in kind's field types, required fields, enums and defaults,
# from the pinned release's Go types and generated OpenAPI definitions.
apischema:
	cd spec/kube/kubernetes && GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
	  $${GO:-$$(command -v go || echo /usr/local/go/bin/go)} run ./apischema > ../../../host/devserver/devserver_apischema.c.tmp
	mv host/devserver/devserver_apischema.c.tmp host/devserver/devserver_apischema.c

# Every API-facing spec folder against that control plane (etcd, then
# kube-apiserver with TLS, a token and RBAC, then kube-controller-manager,
# on loopback; KUBECONFIG points at it, the same-version kubectl is first on
# PATH).  Dev-server-only specs report `pending` with their reason.
# spec/14-controllers/05 runs `luna test --kube controllers` there (the
# shipped controllers' own tests, a namespace a test).
# KUBE_FEATURE_GATES / KUBE_RUNTIME_CONFIG go to the control plane;
# SPEC=path runs one folder or file.
KUBE_SPECS := spec/07-informer spec/08-apiserver spec/11-runtime spec/12-isolation \
              spec/13-reload spec/14-controllers spec/15-production \
              spec/16-deploy/06-apply_dry_run_spec.lua spec/16-deploy/07-rbac_kube_spec.lua \
              spec/16-deploy/08-team_controllers_kube_spec.lua spec/19-authoring/10-luna_test_kube_spec.lua
# KEP-5866 (alpha, off by default) on, so the sharding specs run against the
# real server's filtering; the dev server's ignore-shard-selector fault
# covers a server without it (docs/sharding.md).  KUBE_FEATURE_GATES= turns
# it off.
KUBE_FEATURE_GATES ?= ShardedListAndWatch=true
KUBE_RUNTIME_CONFIG ?=
test-kube: kube $(TEST_BIN)
	@mkdir -p build/test-kube
	@rm -f build/test-kube/summary.txt
	spec/kube/cluster.sh run --dir build/test-kube/cluster \
	  --feature-gates '$(KUBE_FEATURE_GATES)' --runtime-config '$(KUBE_RUNTIME_CONFIG)' -- \
	env LUNA_BUILD=build/test \
	LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	LUNA_SUMMARY_FILE=build/test-kube/summary.txt \
	$(BUSTED) $(if $(filter command line,$(origin SPEC)),$(SPEC),$(KUBE_SPECS))

# The container suite (spec/17-container, docs/container.md): the image run
# as deploy/'s Deployment runs it, against the dev server and then against
# a real control plane (KUBECONFIG's, else the one `make kube` built) when
# there is one; build/test-container/summary.txt sums both runs.  Without
# a Docker engine its specs are skipped, saying why.
CONTAINER_SPEC ?= spec/17-container
test-container: all build/fixtures/tcp_relay
	@mkdir -p build/test-container
	@if docker version >/dev/null 2>&1; then $(MAKE) --no-print-directory image; \
	 else echo "test-container: no Docker engine reachable: skipping the container suite"; fi
	spec/17-container/run.sh build/test-container/summary.txt \
	  env LUNA_BUILD=build LUNA_IMAGE=$(IMAGE) $(BUSTED) --run=container $(CONTAINER_SPEC)

# The example controllers against the cluster in KUBECONFIG, or else against
# an embedded dev server seeded with demo objects (kubectl can talk to it
# through the kubeconfig luna logs; /metrics, the probes and the admin
# endpoints on free loopback ports, each logged with how to call it, with
# the dev server's own token).  At info: the reconciles, not the debug noise.
run: all
	@if [ -n "$$KUBECONFIG" ]; then \
	  exec build/luna run --log-level info controllers; \
	else \
	  exec build/luna run --log-level info --dev-server \
	    --seed deploy/crd-widgets.yaml --seed deploy/demo-objects.yaml controllers; \
	fi

# libFuzzer targets (spec/fuzz/*.c, docs/fuzzing.md): the core and the dev
# server compiled by Debian's clang with ASan, UBSan and coverage into
# build/fuzz/; each target starts from its seed corpus spec/fuzz/corpus/NAME/
# (and its dictionary spec/fuzz/NAME.dict when there is one) and keeps what
# it finds in build/fuzz/corpus/NAME/.  `make fuzz` runs each
# target FUZZ_SECONDS; `make fuzz-smoke` (CI) replays every seed, then
# fuzzes each target 20 seconds.  Leaks fail a run (LeakSanitizer).
FUZZ_CC      ?= clang
FUZZ_TARGETS ?= $(patsubst spec/fuzz/%.c,%,$(wildcard spec/fuzz/*.c))
FUZZ_SECONDS ?= 60
FUZZ_SAN     := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
                -fno-sanitize-recover=undefined
FUZZ_OPTS    ?= -rss_limit_mb=2048 -max_len=65536 -timeout=25
FUZZ_ENV     := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
                UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
build/fuzz/obj/%.o: host/%.c
	@mkdir -p $(@D)
	@echo '  CLANG $@'
	@$(FUZZ_CC) $(BASE_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@
build/fuzz/libluna.a: $(patsubst host/%.c,build/fuzz/obj/%.o,$(CORE_SRC))
	@rm -f $@
	ar rcs $@ $^
build/fuzz/libluna_devserver.a: $(patsubst host/%.c,build/fuzz/obj/%.o,$(DEVSERVER_SRC))
	@rm -f $@
	ar rcs $@ $^
build/fuzz/%: spec/fuzz/%.c spec/fuzz/fuzz_input.h build/fuzz/libluna_devserver.a build/fuzz/libluna.a
	$(FUZZ_CC) $(BASE_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $< \
	  build/fuzz/libluna_devserver.a build/fuzz/libluna.a $(EXE_LIBS)
-include $(wildcard build/fuzz/obj/*/*.d)
fuzz-build: $(addprefix build/fuzz/,$(FUZZ_TARGETS))
fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do mkdir -p build/fuzz/corpus/$$t build/fuzz/crashes/$$t; \
	  echo "fuzz $$t: $(FUZZ_SECONDS) s"; \
	  dict=; [ -f spec/fuzz/$$t.dict ] && dict=-dict=spec/fuzz/$$t.dict; \
	  $(FUZZ_ENV) build/fuzz/$$t $(FUZZ_OPTS) $$dict -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -artifact_prefix=build/fuzz/crashes/$$t/ build/fuzz/corpus/$$t spec/fuzz/corpus/$$t || exit 1; \
	done
fuzz-smoke: fuzz-build
	@for t in $(FUZZ_TARGETS); do mkdir -p build/fuzz/crashes/$$t; \
	  echo "fuzz-smoke $$t: replaying spec/fuzz/corpus/$$t"; \
	  $(FUZZ_ENV) build/fuzz/$$t $(FUZZ_OPTS) -runs=0 -artifact_prefix=build/fuzz/crashes/$$t/ \
	    spec/fuzz/corpus/$$t || exit 1; \
	  rm -rf build/fuzz/smoke/$$t; mkdir -p build/fuzz/smoke/$$t; \
	  dict=; [ -f spec/fuzz/$$t.dict ] && dict=-dict=spec/fuzz/$$t.dict; \
	  $(FUZZ_ENV) build/fuzz/$$t $(FUZZ_OPTS) $$dict -max_total_time=20 -print_final_stats=1 \
	    -artifact_prefix=build/fuzz/crashes/$$t/ build/fuzz/smoke/$$t spec/fuzz/corpus/$$t || exit 1; \
	done

bench: all $(addprefix build/bench/,$(BENCHES))
	@for b in $(BENCHES); do build/bench/$$b || exit 1; done
	@for b in bench/*.lua; do [ -f "$$b" ] || continue; \
	  [ "$$b" = bench/peers.lua ] && continue; \
	  LUNA_BUILD=build luajit $$b || exit 1; done

# luna against a client-go and a controller-runtime controller doing the
# same work, then luna's admission webhooks against controller-runtime's
# (bench/peers/, built from Go modules into ~/.cache/luna-peers by
# bench/peers/build.sh; docs/performance.md): the dev server first, then the
# cluster in KUBECONFIG if set, else the control plane `make kube` built if
# it is there.  BENCH_PEERS_ARGS passes options, e.g. objects=5000 rounds=1
# or phases=webhook;
# a real API server takes writes ~10x slower than the dev server, so the
# second pass writes less (BENCH_PEERS_KUBE_ARGS, added after them).
BENCH_PEERS_ARGS ?=
BENCH_PEERS_KUBE_ARGS ?= watch=5000 items=5000
bench-peers: all
	@bench/peers/build.sh >/dev/null
	env -u KUBECONFIG LUNA_BUILD=build luajit bench/peers.lua $(BENCH_PEERS_ARGS)
	@if [ -n "$$KUBECONFIG" ]; then \
	  LUNA_BUILD=build luajit bench/peers.lua $(BENCH_PEERS_ARGS) $(BENCH_PEERS_KUBE_ARGS); \
	elif [ -f "$$(spec/kube/build.sh --print-dir)/complete" ]; then \
	  spec/kube/cluster.sh run --dir build/bench-peers/cluster -- \
	    env LUNA_BUILD=build luajit bench/peers.lua $(BENCH_PEERS_ARGS) $(BENCH_PEERS_KUBE_ARGS); \
	else echo "bench-peers: no KUBECONFIG and no \`make kube\` control plane: the dev server only"; fi

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/lua/5.1/luna \
	           $(DESTDIR)$(PREFIX)/share/lua/5.1/luna
	install -m 755 build/luna $(DESTDIR)$(PREFIX)/bin/luna
	install -m 644 build/lua/luna/core.so $(DESTDIR)$(PREFIX)/lib/lua/5.1/luna/core.so
	install -m 644 lua/luna/*.lua $(DESTDIR)$(PREFIX)/share/lua/5.1/luna/
	install -d $(DESTDIR)$(PREFIX)/share/lua/5.1/luna/stubs
	install -m 644 lua/luna/stubs/*.lua $(DESTDIR)$(PREFIX)/share/lua/5.1/luna/stubs/

# What `luna run` (and `luna test`, `luna stubs`) needs and nothing else, as the container image installs
# it: the stripped executable (luna.core is built into it) and the Lua
# library.  `make install` also installs core.so for plain luajit.
install-runtime: build/luna
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/lua/5.1/luna
	install -s -m 755 build/luna $(DESTDIR)$(PREFIX)/bin/luna
	install -m 644 lua/luna/*.lua $(DESTDIR)$(PREFIX)/share/lua/5.1/luna/
	install -d $(DESTDIR)$(PREFIX)/share/lua/5.1/luna/stubs
	install -m 644 lua/luna/stubs/*.lua $(DESTDIR)$(PREFIX)/share/lua/5.1/luna/stubs/

# The container image, built from the Dockerfile as users build it.  Where
# no registry can be reached, deploy/image/base-images.sh first makes the
# debian:bookworm and debian:bookworm-slim base images from Debian's
# packages (cached in $(LUNA_CACHE)); docker's layer cache makes a second
# build of unchanged sources take seconds.
IMAGE      ?= luna:$(VERSION)
LUNA_CACHE ?= $(HOME)/.cache/luna
DOCKER_BUILD_FLAGS ?=
image:
	@LUNA_CACHE=$(LUNA_CACHE) deploy/image/base-images.sh
	docker build $(DOCKER_BUILD_FLAGS) -t $(IMAGE) .

clean:
	rm -rf build
