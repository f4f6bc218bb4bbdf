# collector/collector.mk -- build and tests for the CUPTI collector (included by ../Makefile).
#
#   make collector        build/libfirstpass-cupti.so (when CUPTI is found) + build/firstpass-upload
#   make test-collector   unit tests (cmocka), dlopen test, the CPU simulation of the injection
#                         path (tests/collector/sim), e2e.sh, the GPU bundle and its self-test
#   make gpu-bundle       build/gpu-bundle/: what tests/gpu/smoke.sh --prebuilt runs on a GPU
#
# CUPTI is looked up under CUDA_HOME (default $CUDA_PATH, else /usr/local/cuda): the header in
# include/ or extras/CUPTI/include, the library in lib64/, extras/CUPTI/lib64 or lib/. Without it
# the library and the CUPTI-dependent tests are skipped with one line; firstpass-upload and the
# aggregator/JSON/upload tests still build and run. HAVE_CUPTI=0 on the command line forces that.

CUDA_HOME    ?= $(or $(CUDA_PATH),/usr/local/cuda)
CUPTI_INC    := $(firstword $(foreach d,$(CUDA_HOME)/include $(CUDA_HOME)/extras/CUPTI/include,$(if $(wildcard $(d)/cupti.h),$(d))))
CUPTI_LIBDIR := $(firstword $(foreach d,$(CUDA_HOME)/lib64 $(CUDA_HOME)/extras/CUPTI/lib64 $(CUDA_HOME)/lib,$(if $(wildcard $(d)/libcupti.so),$(d))))
HAVE_CUPTI   ?= $(if $(and $(CUPTI_INC),$(CUPTI_LIBDIR)),1,0)
NVCC         ?= $(CUDA_HOME)/bin/nvcc

COL_DIR      := $(BUILD)/collector
COL_LIB      := $(BUILD)/libfirstpass-cupti.so
COL_UPLOAD   := $(BUILD)/firstpass-upload
COL_RUN      := $(BUILD)/firstpass-run
COL_HDRS     := $(wildcard collector/*.h) api/session.h
COL_CFLAGS   := $(CFLAGS_ALL) -Icollector -fPIC -fvisibility=hidden \
                $(shell pkg-config --cflags libcurl jansson zlib 2>/dev/null) \
                $(if $(filter 1,$(HAVE_CUPTI)),$(addprefix -I,$(sort $(CUPTI_INC) $(CUDA_HOME)/include)))
COL_LIBS     := $(shell pkg-config --libs libcurl jansson zlib 2>/dev/null) -lpthread -ldl
CUPTI_LIBS   := -L$(CUPTI_LIBDIR) -lcupti -Wl,-rpath,$(CUPTI_LIBDIR)
# --no-undefined cannot hold under sanitizers (their runtime comes with the executable).
COL_NOUNDEF  := $(if $(strip $(SAN)),,-Wl,--no-undefined)

# Modules without CUPTI (build and test everywhere) and with CUPTI headers/library.
COL_BASE_OBJS  := $(addprefix $(COL_DIR)/,agg.o demangle.o session_json.o membuf.o log.o upload.o pool.o wake.o api_session.o)
COL_CUPTI_OBJS := $(addprefix $(COL_DIR)/,record.o buffer.o meta.o)
COL_INJECT_OBJ := $(COL_DIR)/inject.o

COL_TESTS_BASE  := $(COL_DIR)/tests/test_agg $(COL_DIR)/tests/test_upload $(COL_DIR)/tests/test_pool $(COL_DIR)/tests/test_watch
COL_TESTS_CUPTI := $(COL_DIR)/tests/test_record $(COL_DIR)/tests/test_buffer $(COL_DIR)/tests/test_dlopen
COL_E2E_DRIVER  := $(COL_DIR)/tests/e2e_driver

# The CI simulation (tests/collector/sim/README.md): a fake libcupti.so.13 and libcuda.so.1
# that drive the real libfirstpass-cupti.so from a simulated application, no GPU needed.
SIM_SRC   := tests/collector/sim
SIM_DIR   := $(COL_DIR)/sim
SIM_BINS  := $(SIM_DIR)/libcupti.so.13 $(SIM_DIR)/libcuda.so.1 $(SIM_DIR)/sim_app
SIM_CFLAGS := $(COL_CFLAGS) -I$(SIM_SRC)

.PHONY: collector test-collector collector-tests collector-sim gpu-bundle

ifeq ($(HAVE_CUPTI),1)
collector: $(COL_LIB) $(COL_UPLOAD) $(COL_RUN)
collector-tests: $(COL_TESTS_BASE) $(COL_TESTS_CUPTI) $(COL_E2E_DRIVER) collector-sim
collector-sim: $(SIM_BINS)
else
collector: $(COL_UPLOAD)
	@echo "collector: CUPTI not found under CUDA_HOME=$(CUDA_HOME); skipping libfirstpass-cupti.so (firstpass-upload built)"
collector-tests: $(COL_TESTS_BASE)
endif

# firstpass-upload repairs labels and names to UTF-8 with the server's own utf8 module.
$(COL_DIR)/utf8.o: server/lib/utf8.c server/lib/utf8.h
	@mkdir -p $(dir $@)
	$(CC) $(COL_CFLAGS) -c $< -o $@

$(COL_DIR)/api_session.o: api/session.c api/session.h
	@mkdir -p $(dir $@)
	$(CC) $(COL_CFLAGS) -c $< -o $@

$(COL_DIR)/%.o: collector/%.c $(COL_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(COL_CFLAGS) -c $< -o $@

$(COL_LIB): $(COL_INJECT_OBJ) $(COL_CUPTI_OBJS) $(COL_BASE_OBJS)
	$(CC) $(LDFLAGS_ALL) -shared -fPIC $(COL_NOUNDEF) -o $@ $^ $(CUPTI_LIBS) $(COL_LIBS)

$(COL_UPLOAD): $(COL_DIR)/upload_main.o $(COL_DIR)/upload.o $(COL_DIR)/membuf.o $(COL_DIR)/log.o $(COL_DIR)/agent.o $(COL_DIR)/watch.o $(COL_DIR)/utf8.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(COL_LIBS)

# The launcher: sets CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH, then execs the program.
$(COL_RUN): $(COL_DIR)/run_main.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -ldl

# libstdc++ as in a CUDA C++ program: test_agg checks fp_demangle_full finds __cxa_demangle.
$(COL_DIR)/tests/test_agg: tests/collector/test_agg.c $(COL_BASE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(COL_CFLAGS) -o $@ $^ $(LDFLAGS_ALL) $(COL_LIBS) -lcmocka -Wl,--no-as-needed -lstdc++ -Wl,--as-needed

$(COL_DIR)/tests/test_pool: tests/collector/test_pool.c $(COL_DIR)/pool.o
	@mkdir -p $(dir $@)
	$(CC) $(COL_CFLAGS) -o $@ $^ $(LDFLAGS_ALL) -lpthread -lcmocka

$(COL_DIR)/tests/test_upload: tests/collector/test_upload.c $(COL_BASE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(COL_CFLAGS) -o $@ $^ $(LDFLAGS_ALL) $(COL_LIBS) -lcmocka

$(COL_DIR)/tests/test_watch: tests/collector/test_watch.c $(COL_DIR)/watch.o $(COL_DIR)/log.o
	@mkdir -p $(dir $@)
	$(CC) $(COL_CFLAGS) -o $@ $^ $(LDFLAGS_ALL) $(COL_LIBS) -lcmocka

$(COL_DIR)/tests/test_record: tests/collector/test_record.c $(COL_DIR)/record.o $(COL_BASE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(COL_CFLAGS) -o $@ $^ $(LDFLAGS_ALL) $(COL_LIBS) -lcmocka

$(COL_DIR)/tests/test_buffer: tests/collector/test_buffer.c $(COL_CUPTI_OBJS) $(COL_BASE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(COL_CFLAGS) -o $@ $^ $(LDFLAGS_ALL) $(CUPTI_LIBS) $(COL_LIBS) -lcmocka

$(COL_DIR)/tests/test_dlopen: tests/collector/test_dlopen.c | $(COL_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(COL_CFLAGS) -o $@ $< $(LDFLAGS_ALL) -ldl -lcmocka

$(COL_E2E_DRIVER): tests/collector/e2e_driver.c $(COL_DIR)/record.o $(COL_BASE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(COL_CFLAGS) -o $@ $^ $(LDFLAGS_ALL) $(COL_LIBS)

# The fake libcupti defines the real library's version node (fake_cupti.map), so the
# collector's versioned imports bind to it when LD_LIBRARY_PATH puts it first.
$(SIM_DIR)/libcupti.so.13: $(SIM_SRC)/fake_cupti.c $(SIM_SRC)/fake_cupti.map $(SIM_SRC)/sim.h
	@mkdir -p $(dir $@)
	$(CC) $(SIM_CFLAGS) -shared $(COL_NOUNDEF) -Wl,-soname,libcupti.so.13 \
	  -Wl,--version-script=$(SIM_SRC)/fake_cupti.map -o $@ $< $(LDFLAGS_ALL) -lpthread -ldl

$(SIM_DIR)/libcuda.so.1: $(SIM_SRC)/fake_cuda.c $(SIM_SRC)/sim.h
	@mkdir -p $(dir $@)
	$(CC) $(SIM_CFLAGS) -shared $(COL_NOUNDEF) -Wl,-soname,libcuda.so.1 -o $@ $< $(LDFLAGS_ALL) -lpthread -ldl

# libstdc++ is linked as in any CUDA C++ program (it brings __cxa_demangle).
$(SIM_DIR)/sim_app: $(SIM_SRC)/sim_app.c $(SIM_SRC)/sim.h $(SIM_DIR)/libcuda.so.1
	$(CC) $(SIM_CFLAGS) -o $@ $< $(LDFLAGS_ALL) -L$(SIM_DIR) -l:libcuda.so.1 -Wl,-rpath,'$$ORIGIN' \
	  -Wl,--no-as-needed -lstdc++ -Wl,--as-needed -ldl -lpthread

# Everything the GPU check needs, built here (tests/gpu/smoke.sh --prebuilt runs it there).
# The collector is relinked with DT_RPATH $ORIGIN:$ORIGIN/../cupti (not RUNPATH): the RPATH of
# the loading object also applies to its dependencies' dependencies, so libcurl's whole closure
# loads from the bundle with no LD_LIBRARY_PATH to leak into the programs under test.
GPU_BUNDLE := $(BUILD)/gpu-bundle
ifeq ($(HAVE_CUPTI),1)
gpu-bundle: $(COL_LIB) $(COL_RUN)
	@rm -rf $(GPU_BUNDLE) && mkdir -p $(GPU_BUNDLE)/lib
	$(CC) $(LDFLAGS_ALL) -shared -fPIC $(COL_NOUNDEF) -o $(GPU_BUNDLE)/lib/libfirstpass-cupti.so \
	  $(COL_INJECT_OBJ) $(COL_CUPTI_OBJS) $(COL_BASE_OBJS) -L$(CUPTI_LIBDIR) -lcupti \
	  -Wl,--disable-new-dtags -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../cupti' $(COL_LIBS)
	@BUILD=$(BUILD) CUDA_HOME=$(CUDA_HOME) NVCC=$(NVCC) tests/gpu/smoke.sh --bundle $(GPU_BUNDLE)
else
gpu-bundle:
	@echo "gpu-bundle: CUPTI not found under CUDA_HOME=$(CUDA_HOME)"; exit 1
endif

# Every suite runs even if an earlier one failed; the target fails if any did.
test-collector: collector collector-tests
	@fail=0; \
	for t in $(COL_TESTS_BASE); do echo "== $$t"; $$t || fail=1; done; \
	if [ "$(HAVE_CUPTI)" = 1 ]; then \
	  for t in $(filter-out %/test_dlopen,$(COL_TESTS_CUPTI)); do echo "== $$t"; $$t || fail=1; done; \
	  echo "== $(COL_DIR)/tests/test_dlopen $(COL_LIB)"; \
	  $(COL_DIR)/tests/test_dlopen $(COL_LIB) || fail=1; \
	  echo "== tests/collector/sim/run.sh"; \
	  BUILD=$(BUILD) tests/collector/sim/run.sh || fail=1; \
	  echo "== tests/collector/e2e.sh"; \
	  BUILD=$(BUILD) tests/collector/e2e.sh || fail=1; \
	else \
	  echo "skipping collector (no CUPTI): record, buffer, dlopen and e2e tests"; \
	fi; \
	echo "== tests/gpu/smoke.sh (bash -n; the bundle for a GPU machine)"; \
	bash -n tests/gpu/smoke.sh || fail=1; \
	if [ "$(HAVE_CUPTI)" = 1 ] && [ -x "$(NVCC)" ]; then \
	  $(MAKE) --no-print-directory gpu-bundle || fail=1; \
	else echo "skip: no CUPTI or no nvcc at $(NVCC): no GPU bundle"; fi; \
	if [ "$(HAVE_CUPTI)" = 1 ]; then \
	  echo "== tests/gpu/selftest.sh"; \
	  BUILD=$(BUILD) tests/gpu/selftest.sh || fail=1; \
	fi; \
	if [ $$fail = 0 ]; then echo "test-collector: all suites passed"; \
	else echo "test-collector: FAILED"; exit 1; fi
