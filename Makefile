# firstpass: top-level build.
#
#   make            build build/firstpass-server (and the collector where CUPTI is found)
#   make run        install missing Debian packages (as root), build, start the server on :8080
#   make test       install what the tests need (as root), build, run every test
#   make test-asan  the unit and integration tests again under ASan+UBSan (clang)
#   make bench      benchmarks (bench/README.md)
#   make install    PREFIX=/usr/local DESTDIR=
#
# Dependencies come through pkg-config; CUDA/CUPTI through CUDA_HOME (collector/collector.mk).

CC      ?= cc
BUILD   ?= build
PREFIX  ?= /usr/local
PKGS    := libmicrohttpd jansson sqlite3 zlib yajl
OPT     ?= -O2 -g
SAN     ?=
CFLAGS_ALL := -std=c11 -D_DEFAULT_SOURCE -D_GNU_SOURCE -Wall -Wextra -Werror $(OPT) $(SAN) \
              -Iapi -Iserver $(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(CFLAGS)
LDLIBS_ALL := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm $(LDLIBS)
LDFLAGS_ALL := $(SAN) $(LDFLAGS)

API_SRCS    := $(wildcard api/*.c)
SERVER_SRCS := $(filter-out server/main.c,$(wildcard server/*.c))
SERVER_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(SERVER_SRCS) $(API_SRCS))
UNIT_TESTS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
SERVER      := $(BUILD)/firstpass-server

.PHONY: all server deps deps-test run test test-unit test-integration test-asan bench install clean
all: server collector

server: $(SERVER)

deps:
	@scripts/install-deps.sh build

deps-test:
	@scripts/install-deps.sh test

# The schema is embedded into the binary so that the file on disk and the DDL that runs are one.
$(BUILD)/gen/schema_sql.h: server/schema.sql
	@mkdir -p $(dir $@)
	@{ echo 'static const char schema_sql[] ='; sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; echo ';'; } > $@

$(BUILD)/obj/server/store.o: $(BUILD)/gen/schema_sql.h

$(BUILD)/obj/%.o: %.c $(wildcard server/*.h api/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -I$(BUILD)/gen -c $< -o $@

$(SERVER): $(BUILD)/obj/server/main.o $(SERVER_OBJS)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/tests/%: tests/unit/%.c $(SERVER_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -I$(BUILD)/gen -o $@ $^ $(LDFLAGS_ALL) $(LDLIBS_ALL) -lcmocka

include collector/collector.mk

run: deps server
	@mkdir -p var
	$(SERVER) --bind 127.0.0.1 --port 8080 --db var/firstpass.db --static static

test-unit: $(UNIT_TESTS)
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t"; $$t; done

test-integration: server
	@tests/integration/run.sh $(SERVER)

test: deps-test
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory test-unit
	@$(MAKE) --no-print-directory test-collector
	@$(MAKE) --no-print-directory test-integration
	@$(MAKE) --no-print-directory test-browser
	@echo "make test: all suites passed"

test-browser: server
	@tests/browser/run.sh $(SERVER)

test-asan:
	@$(MAKE) --no-print-directory BUILD=build-asan CC=clang OPT="-O1 -g -fno-omit-frame-pointer" \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined" test-unit test-integration

bench: server
	@bench/run.sh $(SERVER)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/firstpass/static
	install -m 755 $(SERVER) $(DESTDIR)$(PREFIX)/bin/
	cp -r static/. $(DESTDIR)$(PREFIX)/share/firstpass/static/

clean:
	rm -rf $(BUILD) build-asan
