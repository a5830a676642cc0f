# SPDX-License-Identifier: MIT
#
# kvblk top-level Makefile. The two commands a newcomer needs:
#   make demo    install what is missing, build, run kvblk-bench on a default store
#   make check   install what is missing, build, run every test (CI runs this)
#   make bench   the benchmark: every workload against its searched ceiling, the goal
#                table, build/bench/<date>.json and .png (not a test; exits 1 on a missed goal)
# Everything else is a building block of those.

BUILD    ?= build
PYTHON   ?= /usr/bin/python3
JOBS     ?= $(shell nproc)
CMAKE    ?= cmake
DEPS      = scripts/install-deps.sh

.PHONY: all deps deps-user deps-deb deps-bench userspace demo bench check test unit clean help deb tsan asan

all: userspace

help:
	@sed -n 's/^#   //p' $(firstword $(MAKEFILE_LIST))

deps-user:
	@$(DEPS) user

deps:
	@$(DEPS) all

deps-deb:
	@$(DEPS) deb

deps-bench:
	@$(DEPS) bench

# Debian packages (debian/): kvblk-dkms, libkvblk0, libkvblk-dev, kvblk-tools, python3-kvblk
# into $(BUILD)/deb/, then lintian (errors fail). No tests in the package build (make check
# runs them), no -dbgsym packages; nothing changed since the last good build: nothing runs;
# else incremental (CMake's build folder kept). KVBLK_DEB_CLEAN=1: from scratch.
# Times: see packaging/build-deb.sh and docs/install.md, "Install on a serving host".
deb: deps-deb
	JOBS=$(JOBS) packaging/build-deb.sh $(BUILD)

$(BUILD)/build.ninja:
	$(CMAKE) -S . -B $(BUILD) -G Ninja

userspace: deps-user $(BUILD)/build.ninja
	$(CMAKE) --build $(BUILD) -j $(JOBS)

# Unit tests (GoogleTest via ctest) on this machine's files and disk.
unit: userspace
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# libkvblk and its unit tests built with a sanitizer, each in a build folder of its own (tools
# and the Python module are not built there), then run: kvblk_unit_tests (every test, the
# stress test of 8 threads on shared handles included) and, under ASan, kvblk_oom_tests.
#   make tsan    ThreadSanitizer ($(BUILD)-tsan); a race fails it
#   make asan    AddressSanitizer + UndefinedBehaviorSanitizer ($(BUILD)-asan)
# SAN_FILTER=<gtest filter> runs fewer tests; KVBLK_STRESS_SEED=N repeats a stress run.
# The store's tests (kvblk_kvstore_tests) run under both; under TSan without the crash, fork
# and 100,000-key suites (KVSTORE_TSAN_FILTER): their children open stores (threads, which
# TSan cannot start in a child of a multi-threaded fork), and the 100,000 keys take a minute.
# Children of fork() in the tests open handles (threads): TSan is told not to stop them.
SAN_FILTER ?= *
KVSTORE_TSAN_FILTER ?= -KvstoreCrash*:KvstoreFork*:KvstoreScale*
# -O1 -g1: what the sanitizers' docs advise (reports keep file:line), and half the compile time
# of -O2 -g: make tsan from scratch took about 6 minutes with -O2 -g and 3 min 48 s with these
# (2026-12-05, 2 cores; make check runs it).
SAN_FLAGS = -O1 -g1 -DNDEBUG
SAN_CMAKE = $(CMAKE) -S . -G Ninja -DKVBLK_WITH_TOOLS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DCMAKE_C_FLAGS_RELWITHDEBINFO='$(SAN_FLAGS)' -DCMAKE_CXX_FLAGS_RELWITHDEBINFO='$(SAN_FLAGS)'
TSAN_OPTIONS ?= die_after_fork=0 halt_on_error=1 second_deadlock_stack=1
ASAN_OPTIONS ?= detect_leaks=1 abort_on_error=0
UBSAN_OPTIONS ?= print_stacktrace=1

tsan: deps-user
	$(SAN_CMAKE) -B $(BUILD)-tsan -DKVBLK_SANITIZE=thread
	$(CMAKE) --build $(BUILD)-tsan -j $(JOBS) --target kvblk_unit_tests kvblk_kvstore_tests
	TSAN_OPTIONS='$(TSAN_OPTIONS)' $(BUILD)-tsan/tests/unit/kvblk_unit_tests --gtest_brief=1 --gtest_filter='$(SAN_FILTER)'
	TSAN_OPTIONS='$(TSAN_OPTIONS)' $(BUILD)-tsan/tests/unit/kvblk_kvstore_tests --gtest_brief=1 --gtest_filter='$(KVSTORE_TSAN_FILTER)'

asan: deps-user
	$(SAN_CMAKE) -B $(BUILD)-asan -DKVBLK_SANITIZE=address,undefined
	$(CMAKE) --build $(BUILD)-asan -j $(JOBS) --target kvblk_unit_tests kvblk_oom_tests kvblk_kvstore_tests
	ASAN_OPTIONS='$(ASAN_OPTIONS)' UBSAN_OPTIONS='$(UBSAN_OPTIONS)' \
		$(BUILD)-asan/tests/unit/kvblk_unit_tests --gtest_brief=1 --gtest_filter='$(SAN_FILTER)'
	ASAN_OPTIONS='$(ASAN_OPTIONS)' UBSAN_OPTIONS='$(UBSAN_OPTIONS)' \
		$(BUILD)-asan/tests/unit/kvblk_oom_tests --gtest_brief=1
	ASAN_OPTIONS='$(ASAN_OPTIONS)' UBSAN_OPTIONS='$(UBSAN_OPTIONS)' \
		$(BUILD)-asan/tests/unit/kvblk_kvstore_tests --gtest_brief=1 --gtest_filter='$(SAN_FILTER)'

# One workload (large), the quick ceiling search, 3 rounds: about a minute.
# --allow-no-ceiling: a newcomer's run ends with exit 0 and the table; a leg above 1.05 x the
# searched ceiling still prints "ceiling not found", never a ratio (scripts leave it out: exit 3).
# As root, --reserve-hugepages: fio's buffers in huge pages (as kvblk-bench's buffer gets transparent
# huge pages), vm.nr_hugepages set back at the end; otherwise only the huge pages already free.
demo: userspace
	$(BUILD)/tools/kvblk-bench/kvblk-bench --allow-no-ceiling $(if $(filter 0,$(shell id -u)),--reserve-hugepages) $(DEMO_ARGS)

# Every workload (large, small, mixed, chunks), the thorough search, 3 rounds:
# about 10 minutes on a 2-core VM. BENCH_ARGS go to tools/kvblk-bench/bench.py
# (e.g. --workloads large,small); see docs/kvblk-bench.md. make check does not run it.
# Then the kvblk store against raw libkvblk on the same disk (tools/kvstore-bench: 4 MiB and 32 MiB
# chunks, batches of 32, 3 interleaved rounds; goals get >= 0.95 x raw, put >= 0.90 x raw), and
# kvblk.KVStore against the store's C API (python/bench/bench_kvstore.py; goal >= 0.95 x C).
bench: deps-bench userspace
	rc=0; $(PYTHON) tools/kvblk-bench/bench.py --bench $(BUILD)/tools/kvblk-bench/kvblk-bench --out-dir $(BUILD)/bench $(BENCH_ARGS) || rc=$$?; \
	mkdir -p $(BUILD)/bench; \
	$(BUILD)/tools/kvstore-bench/kvblk-kvstore-bench --json $(BUILD)/bench/kvstore.json $(KVSTORE_BENCH_ARGS) || { r=$$?; [ $$r -gt $$rc ] && rc=$$r; }; \
	PYTHONPATH=$(BUILD)/python $(PYTHON) python/bench/bench_kvstore.py || { r=$$?; [ $$r -gt $$rc ] && rc=$$r; }; \
	exit $$rc

# The README's test command: every test this machine can run. Sequential on
# purpose: the VM suite runs binaries that the userspace build produced.
test check: deps
	$(MAKE) unit
	$(MAKE) tsan
	$(MAKE) kmod
	$(MAKE) kmod-check
	$(MAKE) dkms-build
	$(MAKE) vmtest-matrix

clean:
	rm -rf $(BUILD) $(BUILD)-tsan $(BUILD)-asan

# Kernel-module tests in QEMU (TCG) on Debian's kernels; see tests/vm/README.md.
#   make vmtest  [CASES=regex] [VARIANTS=lba4k,...] [KERNEL=6.1|6.12|7.2]
#                boot each variant on one kernel (default 6.1, this machine's), run its cases
#   make vmtest-matrix [KERNELS="6.1 6.12 7.2"] [CASES=..] [VARIANTS=..]
#   make vmtest-fuzz [KERNEL=..] [FUZZ_ARGS="--seed N --iterations N ..."]
#   make vmtest-debug [CASES=..] [VARIANTS=..] [FUZZ_ARGS=..]   the debug kernel (below)
#                the suite on each kernel (6.12, 7.2: Debian trixie/sid in build/kroots/)
#   make vmshell [VARIANT=lba4k] [KERNEL=..]         interactive shell in a test VM
.PHONY: deps-vm vmtest vmtest-matrix vmtest-fuzz vmtest-debug vmshell vmtest-install
KERNELS ?= 6.1 6.12 7.2

deps-vm:
	@$(DEPS) vm

vmtest: deps-vm
	$(if $(KERNEL),KVBLK_VM_KERNEL='$(KERNEL)') tests/vm/run-suite.sh $(if $(CASES),--cases '$(CASES)') $(if $(VARIANTS),--variants '$(VARIANTS)')

vmtest-matrix: deps-vm
	tests/vm/run-matrix.sh $(if $(CASES),--cases '$(CASES)') $(if $(VARIANTS),--variants '$(VARIANTS)') $(KERNELS)

# Default variant lists: in variables, because $(or) splits a literal list at its commas.
LBA4K_IOMMU = lba4k,iommu
DEBUG_VARIANTS = lba4k,iommu,blkdebug

# The ioctl fuzzer and kill/close storms run long (about 6 minutes a variant under TCG);
# the README's test command runs them short (case fuzz, about 30 s).
vmtest-fuzz: deps-vm
	KVBLK_FUZZ_ARGS='$(or $(FUZZ_ARGS),--iterations 30000 --kills 1000 --closes 1000)' \
	$(if $(KERNEL),KVBLK_VM_KERNEL='$(KERNEL)') tests/vm/run-suite.sh --cases '^fuzz$$' --variants '$(or $(VARIANTS),$(LBA4K_IOMMU))'

# The debug kernel's leg: Debian's 6.1 source with KASAN, kmemleak, lockdep, atomic-sleep
# checks, debug objects, DMA-API debugging and fault injection (tests/vm/kernels/mkdebug.sh
# builds it once into build/kroots/debug, about an hour on 2 cores); the suite on the lba4k,
# iommu and blkdebug (media errors) variants, a kmemleak scan after every case, case timeouts
# x3, then the fuzzer for 10 minutes under fault injection (tests/vm/debug.list; lba4k and
# iommu). Any report fails the case. About 80 minutes under TCG (2026-12-03: lba4k 30, iommu 17,
# blkdebug 6, each fuzz 14): not in make check.
vmtest-debug: deps-vm
	@$(DEPS) debug
	KVBLK_VM_KERNEL=debug tests/vm/run-suite.sh $(if $(CASES),--cases '$(CASES)') --variants '$(or $(VARIANTS),$(DEBUG_VARIANTS))'
	KVBLK_FUZZ_ARGS='$(or $(FUZZ_ARGS),--seconds 600 --kills 1000 --closes 1000)' \
	KVBLK_VM_KERNEL=debug tests/vm/run-suite.sh --manifest tests/vm/debug.list --variants '$(or $(VARIANTS),$(LBA4K_IOMMU))'

# The packages of `make deb` installed with apt in a guest (writable overlay over its root),
# kvblk.ko built there by DKMS, loaded, used by a user of the kvblk group, purged.
# [KERNEL=6.1|6.12|7.2]: on 6.12 and 7.2 kvblk-dkms alone, in that kernel's root with its
# compiler, with dkms and adduser of that release (packaging/kroot-deps.sh fetches them once).
# Minutes under TCG (the DKMS build): not part of make check; see tests/vm/README.md.
KROOTS = $(or $(KVBLK_VM_KROOTS),$(BUILD)/kroots)
kroot_rel = $(if $(filter 6.12 trixie,$(1)),trixie,$(if $(filter 7.2 sid,$(1)),sid))
vmtest-install: deb deps-vm
	$(if $(call kroot_rel,$(KERNEL)),packaging/kroot-deps.sh $(call kroot_rel,$(KERNEL)) $(KROOTS)/$(call kroot_rel,$(KERNEL)) $(BUILD)/deb-deps/$(call kroot_rel,$(KERNEL)))
	$(if $(KERNEL),KVBLK_VM_KERNEL='$(KERNEL)') tests/vm/run-suite.sh --manifest tests/vm/install.list --no-build $(if $(VARIANTS),--variants '$(VARIANTS)')

vmshell: deps-vm
	$(if $(KERNEL),KVBLK_VM_KERNEL='$(KERNEL)') tests/vm/run-vm.sh --shell $(or $(VARIANT),lba4k)

# VM benchmark (tests/vm/bench/): libkvblk kmod vs uring vs uring_cmd vs fio io_uring
# (block device) and io_uring_cmd (/dev/ng0n1) on one emulated namespace, one table.
#   make vmbench [KVBLK_BENCH_QD=32] [KVBLK_BENCH_CMD=131072]
.PHONY: vmbench
vmbench: deps-vm userspace
	tests/vm/bench/run.sh

# kvblk.ko's engines (tests/vm/bench/guest-engines-bench.sh): block-layer vs PRP engine vs fio
# io_uring (and libkvblk uring if built) on one namespace and on md RAID-0 of 4 (variant stripe4).
.PHONY: vmbench-engines
vmbench-engines: deps-vm
	$(if $(KERNEL),KVBLK_VM_KERNEL='$(KERNEL)') tests/vm/bench/run.sh --engines

# Software cost per command and per byte (tests/vm/bench/guest-cpu-bench.sh): null_blk
# (memory_backed 0 and 1), 4 KiB, 128 KiB and 1 MiB commands, one and two guest CPUs;
# kvblk.ko ioctl and uring_cmd, libkvblk uring and threadpool, fio io_uring at four points
# and the bare io_uring loop (kvblk_bareloop); IOPS and GB/s per busy guest CPU second, goal
# lines. One VM per kernel, 6.1 then 7.2
# (KERNEL=6.1 or 7.2: that one only). About 7.5 minutes per kernel under TCG. Not in make check.
VMBENCH_CPU_KERNELS = 6.1 7.2
.PHONY: vmbench-cpu
vmbench-cpu: deps-vm $(BUILD)/build.ninja
	$(CMAKE) --build $(BUILD) -j $(JOBS) --target kvblk kvblk_loadloop kvblk_bareloop
	$(MAKE) -C tests/kmod-smoke kmod_bench
	for k in $(or $(KERNEL),$(VMBENCH_CPU_KERNELS)); do \
		KVBLK_VM_KERNEL=$$k tests/vm/bench/run.sh --cpu || exit 1; done

# P2PDMA bench on Debian's 7.2 kernel: kmod into another controller's CMB (a PCI BAR)
# vs kmod and uring into host memory, same namespace, same run.
.PHONY: vmbench-p2p
vmbench-p2p: deps-vm userspace
	$(if $(KERNEL),KVBLK_VM_KERNEL='$(KERNEL)') tests/vm/bench/run.sh --p2p

# kvblk.ko against installed kernel headers (W=1, must print no warnings);
# KVER=<version> picks a kernel, default the newest installed headers.
#   make kmod        build kmod/kvblk.ko
#   make kmod-check  checkpatch --strict, kernel-doc and sparse over its sources
#   make dkms-build  prove `dkms add/build` works, then remove it again
.PHONY: kmod kmod-check dkms-build

kmod:
	$(MAKE) -C kmod $(if $(KVER),KVER=$(KVER))

# checkpatch --strict, kernel-doc and sparse over kvblk.ko's sources (kmod/Makefile).
kmod-check: deps-vm
	$(MAKE) -C kmod check $(if $(KVER),KVER=$(KVER))

dkms-build: deps-vm
	kmod/dkms-check.sh $(KVER)
