# Builds the single `scorer` binary (scorer/ + reference/ + submission/ + dev/) and
# the doctest suites. `make score` and `make test` are the whole set-up on a fresh
# machine: both first install what is missing. Every core by default (make -jN
# overrides); `make compile_commands.json` for editors, `make sanitize` for
# compute-sanitizer on the GPU suites.

# Parallel unless the command line gave -j; only the top-level make sets it, the
# recursive ones share its jobs.
ifeq ($(MAKELEVEL)$(filter -j%,$(MAKEFLAGS)),0)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif

CUDA_HOME ?= $(firstword $(wildcard /usr/local/cuda) $(patsubst %/bin/nvcc,%,$(shell command -v nvcc 2>/dev/null)))
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CXX       ?= g++
GPU_ARCH  ?= -gencode=arch=compute_90a,code=sm_90a
BUILD     ?= build
SCORE_ARGS ?=
PACKAGE_ARGS ?=

# Header-only dependencies: Debian's packages, or a bundled copy in .deps/include
# for machines without a package registry (see scripts/install-deps).
DEPS_INC  := $(if $(wildcard .deps/include),-I.deps/include)
INCLUDES  := -I. -I$(BUILD)/gen $(DEPS_INC) -I$(CUDA_HOME)/include

# -g1: line tables for backtraces and sanitizers; full -g made toml++ files 1.5x slower.
CXXFLAGS  ?= -std=c++17 -O2 -g1 -Wall -Wextra
NVCCFLAGS ?= -std=c++17 -O3 -lineinfo $(GPU_ARCH) --expt-relaxed-constexpr -Xcompiler -Wall
LDLIBS    := -lcublasLt -lcublas -lcrypto -lpthread

LIB_CPP := $(wildcard scorer/*.cpp reference/*.cpp submission/*.cpp dev/*.cpp)
LIB_CU  := $(wildcard scorer/*.cu reference/*.cu submission/*.cu dev/*.cu)
MAIN    := scorer/main.cpp
# The heaviest translation units first (the kernels' instantiations), so that a parallel
# build does not end on one of them alone.
LIB_CU_FIRST := $(filter dev/%,$(LIB_CU)) $(filter submission/%,$(LIB_CU)) $(filter-out dev/% submission/%,$(LIB_CU))
LIB_OBJ := $(patsubst %,$(BUILD)/obj/%.o,$(LIB_CU_FIRST) $(filter-out $(MAIN),$(LIB_CPP)))
# doctest's implementation: one object linked into both suites.
DOCTEST_OBJ := $(BUILD)/obj/tests/doctest_impl.cpp.o
CPU_TEST_OBJ := $(patsubst %,$(BUILD)/obj/%.o,$(wildcard tests/cpu_*.cpp))
GPU_TEST_OBJ := $(patsubst %,$(BUILD)/obj/%.o,$(wildcard tests/gpu_*.cu tests/gpu_*.cpp))
TEST_KERNEL_OBJ := $(patsubst %,$(BUILD)/obj/%.o,$(wildcard tests/bad_kernels/*.cu tests/bad_kernels/*.cpp))

# The suites' asserts without a try/catch each: a fifth less compile time; an
# exception an assert throws still fails its test case, it just ends it too.
TEST_DEFS := -DDOCTEST_CONFIG_SUPER_FAST_ASSERTS
defs_of = $(if $(filter tests/%,$(1)),$(TEST_DEFS))

.PHONY: all deps score test check sanitize package clean print-nvccflags FORCE
all: $(BUILD)/scorer $(BUILD)/tests/cpu_tests $(BUILD)/tests/gpu_tests

deps:
	@scripts/install-deps

# Identifies the compiled submission and scorer in every results file.
$(BUILD)/gen/build_info.h: FORCE
	@mkdir -p $(@D)
	@scripts/build-info > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@

$(BUILD)/obj/%.cpp.o: %.cpp | $(BUILD)/gen/build_info.h
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) $(call defs_of,$<) $(INCLUDES) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu | $(BUILD)/gen/build_info.h
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(call defs_of,$<) $(INCLUDES) -MMD -MP -c $< -o $@

$(BUILD)/libscorer.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/scorer: $(BUILD)/obj/$(MAIN).o $(BUILD)/libscorer.a
	$(NVCC) $(GPU_ARCH) $^ $(LDLIBS) -o $@

$(BUILD)/tests/cpu_tests: $(CPU_TEST_OBJ) $(DOCTEST_OBJ) $(BUILD)/libscorer.a
	@mkdir -p $(@D)
	$(NVCC) $(GPU_ARCH) $^ $(LDLIBS) -o $@

$(BUILD)/tests/gpu_tests: $(GPU_TEST_OBJ) $(TEST_KERNEL_OBJ) $(DOCTEST_OBJ) $(BUILD)/libscorer.a
	@mkdir -p $(@D)
	$(NVCC) $(GPU_ARCH) $^ $(LDLIBS) -o $@

score: deps
	@$(MAKE) --no-print-directory $(BUILD)/scorer
	$(BUILD)/scorer run $(SCORE_ARGS)

check: deps
	@$(MAKE) --no-print-directory $(BUILD)/scorer
	$(BUILD)/scorer check $(SCORE_ARGS)

test: deps
	@$(MAKE) --no-print-directory all
	@scripts/run-tests $(BUILD)/tests/cpu_tests $(BUILD)/tests/gpu_tests

# The GPU suites' "sanitize" cases (one shape per op, default variants only) under
# compute-sanitizer's memcheck and racecheck; a finding fails the target.
SANITIZER ?= $(CUDA_HOME)/bin/compute-sanitizer
sanitize: deps
	@$(MAKE) --no-print-directory $(BUILD)/tests/gpu_tests
	GPU_TESTS_DEFAULT_ONLY=1 $(SANITIZER) --tool memcheck --error-exitcode 1 $(BUILD)/tests/gpu_tests -ts=sanitize
	GPU_TESTS_DEFAULT_ONLY=1 $(SANITIZER) --tool racecheck --error-exitcode 1 $(BUILD)/tests/gpu_tests -ts=sanitize

# One entry per source with the flags its rule compiles it with, for clangd and
# clang-tidy (no build needed).
ALL_SRC := $(LIB_CPP) $(MAIN) $(LIB_CU) $(wildcard tests/*.cpp tests/gpu_*.cu tests/bad_kernels/*.cu tests/bad_kernels/*.cpp)
compile_commands.json: Makefile
	@{ echo '['; sep=''; \
	  for f in $(ALL_SRC); do \
	    case $$f in tests/*) defs='$(TEST_DEFS)';; *) defs='';; esac; \
	    case $$f in *.cu) cmd="$(NVCC) $(NVCCFLAGS) $$defs $(INCLUDES)";; *) cmd="$(CXX) $(CXXFLAGS) $$defs $(INCLUDES)";; esac; \
	    printf '%s  {"directory": "%s", "file": "%s", "command": "%s -c %s -o %s"}' "$$sep" "$(CURDIR)" "$$f" "$$cmd" "$$f" "$(BUILD)/obj/$$f.o"; \
	    sep=$$(printf ',\n'); \
	  done; echo; echo ']'; } > $@

# The flags a .cu file compiles with (scripts/kernel-cubins): make print-nvccflags F=FILE.
print-nvccflags:
	@echo $(NVCCFLAGS) $(call defs_of,$(F)) $(INCLUDES)

package: deps
	@$(MAKE) --no-print-directory $(BUILD)/scorer
	$(BUILD)/scorer package $(PACKAGE_ARGS)

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
