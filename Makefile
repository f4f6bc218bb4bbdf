# firstpass: top-level build.
#
#   make            build build/firstpass-server (and the collector where CUPTI is found)
#   make run        install missing Debian packages (as root), build, start the server on :8080 (or FIRSTPASS_PORT)
#   make test       install what the tests need (as root), build, run every test
#   make test-asan  the unit and integration tests again under ASan+UBSan (clang)
#   make test-pg    the integration suite and the replica test against PostgreSQL (tests/pg/)
#   make test-valgrind  the unit tests under valgrind (CI runs it after test-asan)
#   make test-reliability / test-fuzz   short runs (part of make test; knobs below)
#   make test-hostile  hostile uploads and slow clients under resource bounds (~60-90 s idle, not in make test)
#   make fuzz-long  exploratory fuzzing, random seed, 300 s a target (tests/fuzz/run.sh)
#   make bench      benchmarks (bench/README.md)
#   make install    PREFIX=/usr/local DESTDIR= (server, static/, and the collector's files when built)
#   make test-docker  docker/ checked without a Docker engine (tests/docker/check.sh)
#   make test-python  the Python package (python/, docs/python.md) against the server and firstpass-upload
#
# Dependencies come through pkg-config; CUDA/CUPTI through CUDA_HOME (collector/collector.mk).

CC      ?= cc
BUILD   ?= build
PREFIX  ?= /usr/local
PKGS    := libmicrohttpd jansson sqlite3 zlib libzstd yajl nettle libpq
OPT     ?= -O2 -g
SAN     ?=
CFLAGS_ALL := -std=c11 -D_DEFAULT_SOURCE -D_GNU_SOURCE -Wall -Wextra -Werror $(OPT) $(SAN) \
              -Iapi -Iserver $(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(CFLAGS)
LDLIBS_ALL := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm $(LDLIBS)
LDFLAGS_ALL := $(SAN) $(LDFLAGS)

API_SRCS    := $(wildcard api/*.c)
SERVER_SRCS := $(filter-out server/http/main.c,$(wildcard server/*/*.c))
SERVER_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(SERVER_SRCS) $(API_SRCS))
UNIT_TESTS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
SERVER      := $(BUILD)/firstpass-server

.PHONY: all server deps deps-test run test test-unit test-integration test-openapi test-browser-perf test-asan bench bench-pg install clean \
        bench-floor test-reliability test-hostile test-fuzz fuzz-long test-valgrind test-docker test-layers test-python test-pg
.PHONY: test-agent
all: server collector static/docs/serving.md

# The serving guide the Targets page links (GET /docs/serving.md): a copy of docs/serving.md
# made at build, not tracked, so that the one served is never older than the one in docs/.
static/docs/serving.md: docs/serving.md
	@mkdir -p $(dir $@)
	cp $< $@

server: $(SERVER)

deps:
	@scripts/install-deps.sh build

deps-test:
	@scripts/install-deps.sh test

# The schema is embedded into the binary so that the file on disk and the DDL that runs are one.
$(BUILD)/gen/schema_sql.h: server/store/schema.sql
	@mkdir -p $(dir $@)
	@{ echo 'static const char schema_sql[] ='; sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; echo ';'; } > $@

$(BUILD)/gen/schema_pg_sql.h: server/store/schema_pg.sql
	@mkdir -p $(dir $@)
	@{ echo 'static const char schema_pg_sql[] ='; sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; echo ';'; } > $@

$(BUILD)/obj/server/store/store.o: $(BUILD)/gen/schema_sql.h $(BUILD)/gen/schema_pg_sql.h

# The git revision compiled into the server (server/lib/version.h; --version, GET /livez):
# the checkout's commit, "-dirty" with uncommitted changes to tracked files. The images pass
# FP_REVISION=... (their build context has no .git). revision.h is rewritten only when the
# text changes, so an unchanged checkout recompiles nothing.
ifndef FP_REVISION
FP_REVISION := $(shell r=$$(git rev-parse --short=12 HEAD 2>/dev/null) && { git diff --quiet HEAD -- 2>/dev/null || r=$$r-dirty; echo $$r; })
endif
$(BUILD)/gen/revision.h: FORCE
	@mkdir -p $(dir $@)
	@echo '#define FP_REVISION "$(shell printf %s '$(FP_REVISION)' | tr -cd 'A-Za-z0-9._+-')"' >$@.tmp && { cmp -s $@.tmp $@ || mv -f $@.tmp $@; }; rm -f $@.tmp
$(BUILD)/obj/server/lib/version.o: $(BUILD)/gen/revision.h
.PHONY: FORCE
FORCE:

# The scratch schema (server/analysis/scratch.sql): one C string per "-- @name" section,
# scratch_<name>_sql, comment lines left out.
$(BUILD)/gen/scratch_sql.h: server/analysis/scratch.sql
	@mkdir -p $(dir $@)
	@awk '/^-- @/ { if (n) print ";"; n = substr($$2, 2); printf "static const char scratch_%s_sql[] =\n", n; next } \
	      /^--/ || !n { next } { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); printf "\"%s\\n\"\n", $$0 } \
	      END { if (n) print ";" }' $< > $@

$(BUILD)/obj/server/ingest/load.o $(BUILD)/obj/server/analysis/analyze.o: $(BUILD)/gen/scratch_sql.h

$(BUILD)/obj/%.o: %.c $(wildcard server/*/*.h api/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -I$(BUILD)/gen -c $< -o $@

$(SERVER): $(BUILD)/obj/server/http/main.o $(SERVER_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/tests/%: tests/unit/%.c $(SERVER_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -I$(BUILD)/gen -o $@ $^ $(LDFLAGS_ALL) $(LDLIBS_ALL) -lcmocka

include collector/collector.mk

# No flags: the server's defaults (127.0.0.1:8080, var/firstpass.db, static/) are what this
# target used to spell out, and every FIRSTPASS_* variable applies (FIRSTPASS_PORT=9000 make run).
run: deps server
	@mkdir -p var
	$(SERVER)

test-unit: $(UNIT_TESTS)
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t"; $$t; done

# server/ in layers (lib, analysis | store, ingest, http): every include runs down, no include
# circle (tests/layers.py reads the compiler's -MM output; docs/architecture.md).
test-layers:
	@python3 tests/layers.py $(CC)

test-integration: server $(COL_UPLOAD) static/docs/serving.md
	@tests/integration/run.sh $(SERVER)

# The same integration suite against PostgreSQL (a throwaway cluster of its own, tests/pg/),
# then the multi-replica test; skipped with a message where postgresql-15 is not installed.
test-pg: server $(COL_UPLOAD)
	@tests/pg/run.sh $(SERVER)

# The firstpass Python package with Debian's torch: a real torch.profiler run uploaded by
# trace_handler, its spool sent by the real firstpass-upload, the client, pip install offline.
test-python: server $(COL_UPLOAD)
	@tests/python/run.sh $(SERVER) $(COL_UPLOAD)

# The serving agent (firstpass-upload --watch / --target, docs/serving.md) against the server
# and a stand-in vLLM/SGLang engine (tests/agent/engine.py), no GPU: ~30 s, its files side by side.
test-agent: server $(COL_UPLOAD)
	@tests/agent/run.sh $(SERVER) $(COL_UPLOAD)

test: deps-test
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory test-layers
	@$(MAKE) --no-print-directory test-unit
	@$(MAKE) --no-print-directory test-collector
	@$(MAKE) --no-print-directory test-integration
	@$(MAKE) --no-print-directory test-triage
	@$(MAKE) --no-print-directory test-python
	@$(MAKE) --no-print-directory test-agent
	@$(MAKE) --no-print-directory test-reliability
	@$(MAKE) --no-print-directory test-fuzz
	@$(MAKE) --no-print-directory test-openapi
	@$(MAKE) --no-print-directory test-browser
	@$(MAKE) --no-print-directory test-docker
	@echo "make test: all suites passed"

# Real replies of a running server validated against api/openapi.yaml (ajv from npm).
test-openapi: server
	@tests/openapi/run.sh $(SERVER)

test-browser: server $(COL_UPLOAD) static/docs/serving.md
	@FP_UPLOAD_BIN=$(abspath $(COL_UPLOAD)) tests/browser/run.sh $(SERVER)

# The dashboard on a generated 1M-event LLM trace (bench/gen_trace.c): time to usable, timeline
# drawn, zoom, pan, search (tests/browser/perf.test.mjs; numbers in docs/dashboard.md). Minutes.
PERF_TRACE ?= bench/out/llm-1m.json.gz
test-browser-perf: server
	@mkdir -p bench/out
	@[ bench/out/gen_trace -nt bench/gen_trace.c ] || $(CC) -O2 -o bench/out/gen_trace bench/gen_trace.c
	@[ -f $(PERF_TRACE) ] || bench/out/gen_trace -n 1000000 -z -o $(PERF_TRACE)
	@FP_PERF=1 FP_PERF_TRACE=$(abspath $(PERF_TRACE)) FP_BROWSER_TESTS=tests/browser/perf.test.mjs tests/browser/run.sh $(SERVER)

# The suspect list against labelled traces with known causes (tests/triage/README.md): generated
# cases, the tb_plugin ResNet50 samples, HTA traces, real torch recordings; oracle.py's numbers.
test-triage: server
	@python3 tests/triage/run.py $(SERVER)

# Short runs of tests/reliability/ (each script documents its knobs; the issue's long
# figures are KILL9_ROUNDS=6, LOAD_N=50, SIGTERM_TRIALS=10): crash safety under SIGKILL,
# uploads under read load, SIGTERM while connections arrive. (regress.sh is not here yet: its
# empty_label_key case fails until api/session.c refuses an empty key in "firstpass".labels.)
# Hostile inputs and clients (issue 22): peak RSS, CPU and stored bytes under stated
# bounds, slow clients cut off (tests/reliability/hostile.sh; 22 cases, each a fresh
# server: ~60-90 s on an idle 2-core VM, 4 min under load, so not in make test).
test-hostile: server
	@tests/reliability/hostile.sh $(SERVER)

test-reliability: server
	@KILL9_ROUNDS=$(or $(KILL9_ROUNDS),3) tests/reliability/kill9.sh $(SERVER)
	@LOAD_N=$(or $(LOAD_N),2) LOAD_UPLOADERS=8 tests/reliability/load.sh $(SERVER)
	@SIGTERM_TRIALS=$(or $(SIGTERM_TRIALS),5) tests/reliability/sigterm.sh $(SERVER)
	@tests/reliability/regress.sh $(SERVER)

# libFuzzer (clang-14) on the trace parser, the session codec and the chunk codec: the
# regression inputs, then FUZZ_RUNS (default 50000) inputs per target from seed 1 over the kept
# corpus: the same commit gives the same result (tests/fuzz/run.sh). Findings go to $(BUILD)/fuzz/.
test-fuzz:
	@FUZZ_OUT=$(BUILD)/fuzz tests/fuzz/run.sh --runs $(or $(FUZZ_RUNS),50000) --seed 1

# Exploration, not part of make test: a random seed, FUZZ_SECONDS (default 300) per target;
# new coverage is merged into tests/fuzz/corpus/ (commit it), findings fixed go to regress/.
fuzz-long:
	@FUZZ_OUT=$(BUILD)/fuzz tests/fuzz/run.sh --seconds $(or $(FUZZ_SECONDS),300) --seed random --merge

# The cmocka unit tests under valgrind's memcheck: leaks and invalid accesses fail.
test-valgrind: $(UNIT_TESTS)
	@set -e; for t in $(UNIT_TESTS); do echo "== valgrind $$t"; 	  valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect $$t; done

test-asan:
	@$(MAKE) --no-print-directory BUILD=build-asan CC=clang OPT="-O1 -g -fno-omit-frame-pointer" \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined" build-asan/firstpass-upload test-unit test-integration

bench: server bench-floor
	@bench/shapes.sh $(SERVER)
	@bench/run.sh $(SERVER)

# The parse-only floor (issue 24): C++ on Debian's libsimdjson-dev, bench/ only, not in `all`.
CXX ?= c++
# bench/out/yajl_floor: the same work with YAJL, the server's own parser (bench/floor/yajl_floor.c).
bench-floor: bench/out/floor bench/out/yajl_floor
bench/out/floor: bench/floor/floor.cc
	@mkdir -p $(dir $@)
	$(CXX) -O2 -march=native -std=c++17 -Wall -Wextra -Werror $(shell pkg-config --cflags simdjson) -o $@ $< $(shell pkg-config --libs simdjson)
bench/out/yajl_floor: bench/floor/yajl_floor.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -std=c11 -Wall -Wextra -Werror $(shell pkg-config --cflags yajl) -o $@ $< $(shell pkg-config --libs yajl)

bench-cache: server
	@bench/cache.sh $(SERVER)

# SQLite and PostgreSQL side by side (bench/pg.sh; docs/scale.md quotes bench/out/pg-results.md).
bench-pg: server
	@bench/pg.sh $(SERVER)

# The collector's files go in when `all` built them: firstpass-upload always,
# libfirstpass-cupti.so only where CUPTI was found (collector/collector.mk). No pkg-config file:
# the library is loaded by path (CUDA_INJECTION64_PATH=$(PREFIX)/lib/libfirstpass-cupti.so).
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/firstpass/static
	install -m 755 $(SERVER) $(DESTDIR)$(PREFIX)/bin/
	cp -r static/. $(DESTDIR)$(PREFIX)/share/firstpass/static/
	@if [ -f $(COL_UPLOAD) ]; then set -x; install -m 755 $(COL_UPLOAD) $(DESTDIR)$(PREFIX)/bin/; fi
	@if [ -f $(COL_RUN) ]; then set -x; install -m 755 $(COL_RUN) $(DESTDIR)$(PREFIX)/bin/; fi
	@if [ -f $(COL_LIB) ]; then set -x; install -D -m 755 $(COL_LIB) $(DESTDIR)$(PREFIX)/lib/libfirstpass-cupti.so; \
	else echo "install: $(COL_LIB) was not built (no CUPTI): not installed"; fi

# docker/ checked without an engine (tests/docker/check.sh): reuses $(BUILD), grep lint only
# unless DOCKER_CHECK_LINT= is given (dockerfilelint through npx needs the network).
test-docker: all
	@DOCKER_CHECK_BUILD=$(BUILD) DOCKER_CHECK_LINT=$(if $(filter undefined,$(origin DOCKER_CHECK_LINT)),grep,$(DOCKER_CHECK_LINT)) tests/docker/check.sh

clean:
	rm -rf $(BUILD) build-asan
