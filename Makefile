# idem_etl: PGXS build.  `make demo` and `make test` also work on a machine
# that does not have the server headers yet: they install them first.

EXTENSION  = idem_etl
MODULE_big = idem_etl
OBJS = \
	src/idem_etl.o \
	src/util/args.o \
	src/util/settings.o \
	src/util/sql.o \
	src/util/target.o \
	src/stage/stage.o \
	src/stage/keycheck.o \
	src/stage/bulkload.o \
	src/stage/collapse.o \
	src/stage/ordering.o \
	src/stage/compare.o \
	src/stage/source_rights.o \
	src/stage/evolve.o \
	src/citus/citus_replace.o \
	src/citus/citus_ranges.o \
	src/citus/citus_rows.o \
	src/citus/citus_target.o \
	src/citus/citus_upsert.o \
	src/upsert/dedup.o \
	src/upsert/upsert.o \
	src/snapshot/snapshot.o \
	src/snapshot/snapshot_versions.o \
	src/snapshot/snapshot_write.o \
	src/snapshot/snapshot_ddl.o \
	src/state/ledger.o \
	src/state/audit.o \
	src/state/progress.o \
	src/replace/partmap.o \
	src/replace/newpart.o \
	src/replace/swap.o \
	src/replace/kept.o \
	src/replace/rebuild.o \
	src/replace/replace_where.o \
	src/replace/replace.o \
	src/worker/jobs.o \
	src/worker/worker_common.o \
	src/worker/worker_shmem.o \
	src/worker/worker_launcher.o \
	src/worker/worker_dispatcher.o \
	src/worker/worker_status.o \
	src/worker/worker_job.o \
	src/pipeline/period.o \
	src/pipeline/pipeline.o \
	src/pipeline/pipeline_run.o \
	src/pipeline/sequence.o

DATA = $(wildcard idem_etl--*.sql)

PG_CPPFLAGS = -I$(srcdir)/src
# -Wextra, less what PostgreSQL's own style trips: callbacks (executor
# receivers, hooks) take parameters they do not use.
PG_CFLAGS = -Werror -Wall -Wextra -Wno-unused-parameter

REGRESS = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
ISOLATION = $(patsubst test/isolation/specs/%.spec,%,$(sort $(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test/isolation
TAP_TESTS = 1
PROVE_TESTS = $(sort $(wildcard test/t/*.pl))
EXTRA_CLEAN = output_iso tmp_check results regression.diffs regression.out

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)

ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
# PGXS tracks no header dependencies: rebuild everything when a header changes.
$(OBJS): $(wildcard src/*.h src/*/*.h)
else
# Without postgresql-server-dev-15 only the self-installing targets work.
all install installcheck:
	@echo "PGXS not found ($(PGXS)): run 'make demo' or 'make test' (they install postgresql-server-dev-15), or install it with apt" >&2
	@exit 1
endif

.PHONY: deps demo test test-all test-citus lint bench test-assert test-valgrind deb deb-17 deb-18 deb-19 test-deb

deps:
	./test/install-deps

demo: deps
	./demo/run-demo

test: deps
	./test/run-all

# test-all: every suite on every supported major (15 packaged and with
# assertions, 17, 18 with assertions and its packaged pg_cron, 19), counts
# per major, then the overall "N passed, N failed" (CI).  As root: 17, 18's
# pg_cron and 19 run in debootstrap chroots (test/majors/).
test-all: deps
	./test/majors/all

# lint: the static checks (qualified SQL, layers, pgindent's formatting;
# the last needs PostgreSQL 18's source, fetched and built like test-assert's)
lint: deps
	./test/lint/check-qualified
	./test/lint/check-layers
	./test/lint/check-format

bench: deps
	./test/bench/run-bench

# test-citus: test/citus/*.pl against a Citus coordinator and two workers
# in throwaway clusters, for the PostgreSQL of IDEM_PG_CONFIG (or PG_CONFIG,
# or the packaged 15); one line "skipped" when Citus is not installed there.
test-citus: deps
	./test/citus/run

# test-assert: every suite against PostgreSQL 15 built with assertions (CI
# runs it as test-all's 15-assert leg, and 18's as 18-assert).
# test-valgrind: the pg_regress suite with the server under Valgrind (slow,
# not in CI).  The first run of each builds PostgreSQL into
# /var/cache/idem_etl/pg-15/ (test/assert/build-pg); later runs reuse it.
test-assert: deps
	./test/assert/run assert

test-valgrind: deps
	./test/assert/run valgrind
# deb: the Debian package postgresql-15-idem-etl (debian/, pg_buildext) in
# dist/; deb-17, deb-18, deb-19: postgresql-N-idem-etl, built in that major's
# chroot (as root), installed and tested there, copied to dist/.  test-deb: builds it, installs it with dpkg -i and runs pg_regress
# against the installed package (only with CI=true or IDEM_DEB_INSTALL=1;
# elsewhere it checks the package's contents).
deb:
	./test/deb/build-deb

deb-17 deb-18 deb-19:
	./test/majors/run $@

test-deb:
	./test/deb/test-deb
