#!/bin/sh
# conformance/run.sh BUILD — real software nobody here wrote, run bare and
# under the preload: what differs is a failure.  Stdout, stderr and the
# exit status are compared (our own "gpumemprof: " lines aside, where a
# case expects them), and an everyday program must leave no bundle and no
# ring file.  The cases:
#   pipelines   shell pipelines, SIGPIPE and SIGTERM deaths among them;
#               bash printing the message dlerror() gave it
#   git         a repository made, committed, packed, cloned, checked
#   gcc         the same object files, byte for byte
#   compilers-quoting-oom  gcc, clang, g++ and clang++ warnings that quote OOM
#               words from the source: the same stderr, no bundle, no word
#   allocators  python3 and sort with jemalloc, tcmalloc, mimalloc behind us
#   valgrind    its leak checker finds nothing of ours (exit status kept)
#   cpython     a subset of CPython's own regression tests (Debian's
#               libpython3.X-testsuite): the same result for every test case,
#               and no ring left but by a process a test SIGKILLed
#   cpython-frames  CPython 3.15's own tests of frames (generators,
#               coroutines, tracing, exceptions, signals, threads), every
#               allocation an event that reads the thread's Python frames:
#               the same, as above
#   runtimes    Node's WebAssembly bounds traps and the JVM's implicit null
#               checks (-Xcheck:jni), each after a caught allocation failure:
#               their own SIGSEGV handlers see every fault, stay their own,
#               and no crash bundle is made
#   go          a cgo program (so the preload is loaded): a recovered nil
#               dereference, goroutines, then the Go runtime's own "out of
#               memory" death, exit_group(2) past the C library: the same
#               output and status, and no ring left to read as a death
#   postgresql  queries past a server's RLIMIT_AS: the failed request is the
#               size PostgreSQL's own message states, with its DETAIL line;
#               the limit named at the 99% the failing call found; the
#               server survived
#   numpy       np.empty(10**13) from PyPI, in a venv made here: the same
#               MemoryError, and one bundle that names the failed malloc,
#               numpy's exception and words, and a request no host could give
#   numpy-held-by  a loop keeping each batch's 4 MiB array until a concatenate
#               fails under RLIMIT_AS: "Held by:" names the line that made
#               them and its caller, the bytes within 5% of what it kept
#   gevent      greenlets from PyPI keeping 4 MiB blocks, one refused 64 TiB:
#               the same output, one bundle held by the greenlets' line
#               (each greenlet's first call runs under another's stale
#               stack words, which the stack walk must not follow)
# Prints one line per case and "N passed, N failed"; exits 1 when any failed.
set -u
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
preload="$build/libgpumemprof_preload.so"
inspect="$build/gmp-inspect"
python=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/gmp-conformance-XXXXXX")
trap 'rm -rf "$work"' EXIT
export GMP_RUN_DIR="$work/run" GMP_DUMP_DIR="$work/dumps"
mkdir -m 700 "$GMP_RUN_DIR"
passed=0
failed=0

say() { printf '%s\n' "$*"; }
pass() { passed=$((passed + 1)); say "ok    $1"; }
fail() {
    failed=$((failed + 1))
    say "FAIL  $1: $2"
    [ -z "${GMP_TEST_FAILED_LOG:-}" ] || echo "$1" >>"$GMP_TEST_FAILED_LOG"
}
skip() { say "SKIP  $1: $2"; }

# run NAME MODE CMD: CMD by sh in $work/NAME.MODE.{out,err,rc}, with the
# preload in the shell and everything it starts when MODE is "pre".
run() {
    name=$1 mode=$2
    shift 2
    if [ "$mode" = pre ]; then
        (cd "$work/cwd" && LD_PRELOAD="$preload${LD_PRELOAD_AFTER:+ $LD_PRELOAD_AFTER}" \
            sh -c "$*" >"$work/$name.$mode.out" 2>"$work/$name.$mode.err")
    else
        (cd "$work/cwd" && LD_PRELOAD="${LD_PRELOAD_AFTER:-}" \
            sh -c "$*" >"$work/$name.$mode.out" 2>"$work/$name.$mode.err")
    fi
    echo $? >"$work/$name.$mode.rc"
}

# same NAME [ours-allowed]: the two runs agree; no bundle, no ring left.
same() {
    name=$1
    f="$work/$name"
    grep -v '^gpumemprof: ' "$f.pre.err" >"$f.pre.theirs" || true
    if ! cmp -s "$f.bare.rc" "$f.pre.rc"; then
        fail "$name" "exit status $(cat "$f.bare.rc") bare, $(cat "$f.pre.rc") under the preload"
    elif ! cmp -s "$f.bare.out" "$f.pre.out"; then
        fail "$name" "stdout differs: $(diff "$f.bare.out" "$f.pre.out" | head -5 | tr '\n' ' ')"
    elif ! cmp -s "$f.bare.err" "$f.pre.theirs"; then
        fail "$name" "stderr differs: $(diff "$f.bare.err" "$f.pre.theirs" | head -5 | tr '\n' ' ')"
    elif [ "${2:-}" != ours-allowed ] && grep -q '^gpumemprof: ' "$f.pre.err"; then
        fail "$name" "we spoke: $(grep '^gpumemprof: ' "$f.pre.err" | head -2 | tr '\n' ' ')"
    elif [ "${2:-}" != ours-allowed ] && [ -n "$(ls -A "$GMP_DUMP_DIR" 2>/dev/null)" ]; then
        fail "$name" "bundles written: $(ls "$GMP_DUMP_DIR" | tr '\n' ' ')"
    elif [ -n "$(ls -A "$GMP_RUN_DIR")" ]; then
        fail "$name" "rings left: $(ls "$GMP_RUN_DIR" | tr '\n' ' ')"
    else
        return 0
    fi
    rm -rf "${GMP_RUN_DIR:?}"/* "$GMP_DUMP_DIR"
    return 1
}

# case NAME CMD: run bare, then preloaded, and compare.
case_of() {
    name=$1
    shift
    rm -rf "${GMP_RUN_DIR:?}"/* "$GMP_DUMP_DIR"
    run "$name" bare "$@"
    run "$name" pre "$@"
    same "$name" && pass "$name"
}

mkdir -p "$work/cwd"

# ---- shell pipelines --------------------------------------------------------
case_of pipeline-sigpipe 'for i in 1 2 3 4 5; do seq 1 300000 | sort -n | head -1; done'
case_of pipeline-sort-uniq 'seq 1 200000 | sort -rn | uniq -c | sort -n | tail -3'
case_of pipeline-find-xargs \
    'find /usr/include -name "*.h" | sort | head -300 | xargs wc -l | tail -1'
case_of pipeline-md5 'yes gpumemprof | head -c 20000000 | md5sum'
case_of pipeline-awk 'seq 1 300000 | awk "{ s += \$1 } END { print s }"'
# sleep is killed once it runs under the preload.  dash prints "Terminated"
# only when the death reaches it inside `wait`, not when it noticed the
# SIGCHLD between two commands: a race of the shell's, so wait's stderr goes
# to /dev/null and the status carries the death.
case_of pipeline-sigterm \
    'sleep 5 & p=$!; sleep 0.3; kill -TERM $p; wait $p 2>/dev/null; echo "status $?"'
case_of pipeline-python-broken-pipe \
    "$python -c 'import sys; sys.stdout.write(\"x\" * 10**7)' | head -c 10; echo; echo \$?"
case_of pipeline-python-sigint \
    "$python -c 'x = bytearray(50 << 20); raise KeyboardInterrupt'; echo \"status \$?\""

# a hook that looked its real function up with dlsym would free the string
# dlerror() returned before bash prints it
case_of bash-dlerror-message "bash -c 'enable -f /nonexistent/libnothing.so nothing'; echo \$?"

# ---- git --------------------------------------------------------------------
if command -v git >/dev/null 2>&1; then
    git_script='export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@e GIT_COMMITTER_NAME=t
        export GIT_COMMITTER_EMAIL=t@e GIT_AUTHOR_DATE="2026-01-01T00:00:00Z"
        export GIT_COMMITTER_DATE="2026-01-01T00:00:00Z" HOME=$PWD GIT_CONFIG_NOSYSTEM=1
        rm -rf repo clone; git -c init.defaultBranch=main init -q repo && cd repo &&
        for i in $(seq 200); do seq $i $((i * 50)) > f$i; done &&
        git add . && git commit -qm first && sed -i s/1/one/ f1 f7 f100 &&
        git commit -qam second && git log --stat --format="%H %s" | head -20 &&
        git gc -q && git count-objects -v | grep -v size && git fsck --strict 2>&1 &&
        cd .. && git clone -q repo clone && git -C clone diff HEAD~1 --stat'
    case_of git "$git_script"
else
    skip git "git is not installed"
fi

# ---- gcc --------------------------------------------------------------------
if command -v gcc >/dev/null 2>&1; then
    src=$(cd "$here/../.." && pwd)
    case_of gcc "gcc -O2 -g -std=gnu11 -D_GNU_SOURCE -I'$src/include' -I'$src/recorder' \
        -frandom-seed=1 -c '$src/recorder/jsonw.c' '$src/recorder/bundle.c' -Wall &&
        cat jsonw.o bundle.o | md5sum && gcc -O2 -o grow '$src/examples/grow-heap.c' && echo built"
else
    skip gcc "gcc is not installed"
fi
# warnings that quote OOM words from the source: stderr byte for byte, no
# bundle, no line of ours (the compiler can mean none of them)
quote_script=""
for cc in gcc clang; do
    command -v $cc >/dev/null 2>&1 && quote_script="$quote_script $cc -Wall -fsyntax-only '$here/quotes_oom.c';"
done
for cxx in g++ clang++; do
    command -v $cxx >/dev/null 2>&1 && quote_script="$quote_script $cxx -Wall -fsyntax-only '$here/quotes_oom.cc';"
done
if [ -n "$quote_script" ]; then
    case_of compilers-quoting-oom "$quote_script echo compiled"
else
    skip compilers-quoting-oom "no C or C++ compiler"
fi

# ---- allocators behind ours -------------------------------------------------
for lib in libjemalloc.so.2 libtcmalloc_minimal.so.4 libmimalloc.so.2; do
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l { print $NF; exit }')
    if [ -z "$path" ]; then
        skip "allocator-$lib" "not installed"
        continue
    fi
    LD_PRELOAD_AFTER=$path case_of "allocator-$lib" \
        "$python -c 'import json; d = {str(i): [i] * 3 for i in range(200000)}; \
print(len(json.loads(json.dumps(d))))' && seq 1 300000 | sort -rn | head -2"
done

# ---- valgrind's leak checker ------------------------------------------------
if command -v valgrind >/dev/null 2>&1; then
    case_of valgrind-leaks "valgrind -q --leak-check=full --show-leak-kinds=all \
        --errors-for-leak-kinds=all --error-exitcode=9 /bin/true; echo \"status \$?\"; \
        valgrind -q --leak-check=full --errors-for-leak-kinds=all --error-exitcode=9 \
        '$build/test/programs/host_oom' quiet; echo \"status \$?\""
else
    skip valgrind-leaks "valgrind is not installed"
fi

# ---- runtimes that handle SIGSEGV themselves -------------------------------
# Each fails one allocation and catches it, then takes faults its own
# handler turns into exceptions.  The failure may have its bundle, which
# says the process survived it (triage passes); a crash bundle, a word
# about a signal, or a changed handler (the JVM's -Xcheck:jni prints one)
# is a failure.
runtime_case() { # NAME CMD
    name=$1
    rm -rf "${GMP_RUN_DIR:?}"/* "$GMP_DUMP_DIR"
    run "$name" bare "$2"
    run "$name" pre "$2"
    same "$name" ours-allowed || return
    if grep -q -E 'SIG(SEGV|BUS)' "$work/$name.pre.err" ||
        grep -l -s '"reason": *"SIG' "$GMP_DUMP_DIR"/*/manifest.json >/dev/null; then
        fail "$name" "a crash was made of a fault its runtime handled: $(grep '^gpumemprof: ' "$work/$name.pre.err" | tr '\n' ' ')"
    elif [ -d "$GMP_DUMP_DIR" ] && ! "$inspect" triage "$GMP_DUMP_DIR" >"$work/$name.triage" 2>&1; then
        fail "$name" "triage calls the caught failure a death: $(head -1 "$work/$name.triage")"
    else
        pass "$name"
    fi
}
if command -v node >/dev/null 2>&1; then
    runtime_case node-wasm-traps "node '$here/wasm_oob.js'"
else
    skip node-wasm-traps "node is not installed"
fi
if command -v java >/dev/null 2>&1 && java -version >/dev/null 2>&1 && command -v javac >/dev/null 2>&1; then
    runtime_case jvm-null-checks "java -Xcheck:jni '$here/NullChecks.java'"
else
    skip jvm-null-checks "no JDK here (java with javac)"
fi

# ---- Go: a runtime that ends the process past the C library -----------------
# Its fatal error's stack trace holds addresses that differ from run to run,
# so stderr is compared up to it.
go_case() { # NAME ARGS
    name=$1
    rm -rf "${GMP_RUN_DIR:?}"/* "$GMP_DUMP_DIR"
    run "$name" bare "GOTRACEBACK=none '$build/conformance-go' $2"
    run "$name" pre "GOTRACEBACK=none '$build/conformance-go' $2"
    for m in bare pre; do
        sed '/^runtime stack:/,$d' "$work/$name.$m.err" >"$work/$name.$m.err.head"
        mv "$work/$name.$m.err.head" "$work/$name.$m.err"
    done
    if same "$name"; then
        pass "$name (exit $(cat "$work/$name.bare.rc"), the same output, no bundle, no ring)"
    fi
}
if command -v go >/dev/null 2>&1; then
    # the module and build caches stay in the build directory between runs
    if ! (cd "$work/cwd" && HOME="$build" GOCACHE="$build/go-cache" GOPATH="$build/go-path" \
        GOFLAGS=-mod=mod CGO_ENABLED=1 go build -o "$build/conformance-go" "$here/go_runtime.go") \
        >"$work/go.build" 2>&1; then
        fail go "go build: $(tail -2 "$work/go.build" | tr '\n' ' ')"
    else
        go_case go-recovered-fault ""
        go_case go-runtime-oom oom
    fi
else
    skip go "go is not installed (golang-go)"
fi

# ---- CPython's own regression tests -----------------------------------------
# Each run writes JUnit XML; every test case must end the same both ways.
# A case that differs is run once more both ways (timing-sensitive tests
# exist); it fails only if it differs again.
junit_results='import sys, xml.etree.ElementTree as ET
for case in ET.parse(sys.argv[1]).iter("testcase"):
    kids = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
    print(case.get("classname"), case.get("name"), kids[0] if kids else "passed")'
# regrtest MODE PYTHON PRELOAD_ENV TESTS...: results in $work/$suite.MODE.results
regrtest() {
    mode=$1 py=$2 pre_env=$3
    shift 3
    pre=""
    [ "$mode" = pre ] && pre="$preload"
    (cd "$work/cwd" && env ${pre:+$pre_env} LD_PRELOAD="$pre" "$py" -m test -j4 -q \
        --timeout 300 --junit-xml "$work/$suite.$mode.xml" "$@" >"$work/$suite.$mode.log" 2>&1)
    "$python" -c "$junit_results" "$work/$suite.$mode.xml" | sort >"$work/$suite.$mode.results"
}
# regrtest_case SUITE PYTHON PRELOAD_ENV TESTS...: the same results both ways
regrtest_case() {
    suite=$1 py=$2 pre_env=$3
    shift 3
    rm -rf "${GMP_RUN_DIR:?}"/* "$GMP_DUMP_DIR" "$work/$suite.recovered.log"
    regrtest bare "$py" "$pre_env" "$@"
    regrtest pre "$py" "$pre_env" "$@"
    differ=$(diff "$work/$suite.bare.results" "$work/$suite.pre.results" |
        awk '/^[<>]/ { print $2 }' | sed 's/^test\.//; s/\..*//' | sort -u | tr '\n' ' ')
    if [ -n "$differ" ]; then
        regrtest bare "$py" "$pre_env" $differ
        regrtest pre "$py" "$pre_env" $differ
    fi
    cases=$(wc -l <"$work/$suite.pre.results")
    if [ "$cases" -lt 100 ]; then
        fail "$suite" "only $cases test cases ran: $(tail -3 "$work/$suite.pre.log" | tr '\n' ' ')"
    elif ! cmp -s "$work/$suite.bare.results" "$work/$suite.pre.results"; then
        fail "$suite" "$(diff "$work/$suite.bare.results" "$work/$suite.pre.results" | head -6 |
            tr '\n' ' ')"
    elif [ -n "$(ls -A "$GMP_RUN_DIR")" ] &&
        ! "$inspect" recover "$GMP_RUN_DIR" --dump-dir "$work/$suite.recovered" \
            >"$work/$suite.recovered.log" 2>&1; then
        fail "$suite" "rings left that recover cannot read: $(ls "$GMP_RUN_DIR" | head -3 | tr '\n' ' ')"
    elif grep -qv ": SIGKILL; bundle: " "$work/$suite.recovered.log" 2>/dev/null; then
        fail "$suite" "rings left by processes that were not SIGKILLed: $(head -3 \
            "$work/$suite.recovered.log" | tr '\n' ' ')"
    else
        # a process its test SIGKILLs leaves its ring, as it should
        killed=$(cat "$work/$suite.recovered.log" 2>/dev/null | wc -l)
        left=""
        [ "$killed" -gt 0 ] && left="; $killed ring(s) left, each by a process a test SIGKILLed"
        pass "$suite ($# modules, $(wc -l <"$work/$suite.bare.results") test cases, the same results$left)"
    fi
}

# Processes, signals, memory, stdio: where a preload could change a result.
if [ -x "$python" ] && "$python" -c 'import test.test_os' 2>/dev/null; then
    regrtest_case cpython "$python" "" test_os test_posix test_fork1 test_wait4 test_subprocess \
        test_faulthandler test_threading test_mmap test_resource test_gc test_tracemalloc \
        test_memoryio test_array test_tempfile test_shutil test_ctypes test_pty
else
    skip cpython "CPython's test package is not installed (libpython3.X-testsuite)"
fi

# The newest CPython's frames read on every allocation (an event each, so
# each one reads the thread's Python frames): generators, coroutines,
# tracing, exceptions unwinding, signal handlers, threads, finalizers.
newest=$build/debian-python/3.15/python
if [ -x "$newest" ] && "$newest" -c 'import test.test_generators' 2>/dev/null; then
    regrtest_case cpython-frames "$newest" GMP_HOST_EVENT_MIN_BYTES=1 test_generators \
        test_coroutines test_asyncgen test_sys test_frame test_threading test_exceptions \
        test_traceback test_sys_settrace test_contextlib test_gc test_weakref test_signal \
        test_faulthandler test_itertools test_json
else
    skip cpython-frames "no CPython 3.15 with its tests (mk/debian-python.sh could not fetch it)"
fi

# ---- PostgreSQL: a query runs out, the server lives on ----------------------
# A server under a 600 MB address-space limit.  One query builds a string
# past it: PostgreSQL reports "out of memory ... Failed on request of size
# N", the backend goes on, and exits 0 when its client leaves.  Its bundle's
# failed request is the size PostgreSQL states, its message keeps
# PostgreSQL's DETAIL line, and it says the process survived (triage
# passes).  Another query sorts in memory until a 24 MiB request fails
# with the address space at 99% of the limit (shared memory and libraries
# count, malloc's bytes are a third of it): its first cause is the limit,
# measured when the call failed, not after PostgreSQL let go of the sort.
# As root (the server runs as the postgres user), where Debian's
# postgresql is installed.
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -n 1)
if [ "$(id -u)" != 0 ] || [ -z "$pg_bin" ] || ! id postgres >/dev/null 2>&1; then
    skip postgresql "needs root and Debian's postgresql"
else
    pg=$(mktemp -d /tmp/gmp-pg-XXXXXX)
    chmod 755 "$pg" && chown postgres "$pg" && cp "$preload" "$pg/preload.so" && chmod 755 "$pg/preload.so"
    as_pg() { su postgres -s /bin/sh -c "$1" </dev/null; }
    if ! as_pg "'$pg_bin/initdb' -D '$pg/data' -A trust" >"$work/pg.initdb" 2>&1; then
        fail postgresql "initdb: $(tail -1 "$work/pg.initdb")"
    else
        as_pg "ulimit -v 600000; GMP_DUMP_DIR='$pg/dumps' GMP_RUN_DIR='$pg/run' LD_PRELOAD='$pg/preload.so' \
            '$pg_bin/pg_ctl' -D '$pg/data' -o \"-k '$pg' -c listen_addresses=''\" -l '$pg/log' -w start" \
            >"$work/pg.start" 2>&1
        as_pg "'$pg_bin/psql' -h '$pg' -c \"select length(string_agg(repeat('x', 1000000), '')) \
            from generate_series(1, 500)\" postgres" >"$work/pg.query" 2>&1
        as_pg "'$pg_bin/psql' -h '$pg' -Atc 'select 1' postgres" >"$work/pg.after" 2>&1
        # the second query's backend is started only once the first's has
        # written its bundle (at its exit): the first bundle is the oldest
        while [ -z "$(ls "$pg/dumps" 2>/dev/null)" ] && [ "${pg_waited:=0}" -lt 50 ]; do
            sleep 0.1; pg_waited=$((pg_waited + 1))
        done
        as_pg "'$pg_bin/psql' -h '$pg' -c \"set work_mem='2GB'; set max_parallel_workers_per_gather=0; \
            select count(*) from (select md5(g::text) m from generate_series(1, 3000000) g \
            order by m) s\" postgres" >"$work/pg.sort" 2>&1
        as_pg "'$pg_bin/pg_ctl' -D '$pg/data' -m fast -w stop" >/dev/null 2>&1
        stated=$(sed -n 's/.*Failed on request of size \([0-9]*\).*/\1/p' "$pg/log" | head -n 1)
        bundles=$(ls -d "$pg"/dumps/oom_dump_* 2>/dev/null)
        first=$(echo "$bundles" | head -n 1) second=$(echo "$bundles" | sed -n 2p)
        pg_request=$(cat "$first/metadata.json" 2>/dev/null | sed -n 's/.*"failed_request":{"api":"[a-z]*","size":\([0-9]*\).*/\1/p')
        if ! grep -q "out of memory" "$work/pg.query" || [ "$(cat "$work/pg.after")" != 1 ] ||
            ! grep -q "out of memory" "$work/pg.sort"; then
            fail postgresql "the queries did not run out, or the server did not live on: $(cat "$work/pg.query" "$work/pg.sort" | tr '\n' ' ')"
        elif [ "$(echo "$bundles" | grep -c .)" != 2 ] || [ -z "$stated" ] || [ -z "$pg_request" ] ||
            [ $((pg_request - stated)) -lt 0 ] || [ $((pg_request - stated)) -gt $((stated / 100)) ]; then
            # the call asks for PostgreSQL's request and its chunk header
            fail postgresql "$(echo "$bundles" | grep -c .) bundle(s); PostgreSQL's request $stated, the first bundle's $pg_request"
        elif ! "$inspect" triage "$pg/dumps" >"$work/pg.triage" 2>&1 ||
            ! "$inspect" show "$first" >"$work/pg.show" ||
            ! grep -q '^What happened:    the process survived' "$work/pg.show" ||
            ! grep -q "^Message: .*ERROR:  out of memory DETAIL:  Failed on request of size $stated in memory context" "$work/pg.show"; then
            fail postgresql "not a survived failure with PostgreSQL's words: $(head -1 "$work/pg.triage"); $(grep '^Message' "$work/pg.show")"
        elif ! "$inspect" show "$second" >"$work/pg.show2" ||
            ! grep -A1 '^  1\. a host limit was reached (the address-space limit)' "$work/pg.show2" |
                grep -q 'RLIMIT_AS is .*(9[0-9]% of it) was mapped (VmSize) when it failed'; then
            fail postgresql "the sort's failure does not name the limit: $(grep -A1 '^  1\.' "$work/pg.show2" | tr '\n' ' ')"
        else
            pass "postgresql (queries past RLIMIT_AS: the request and DETAIL PostgreSQL states, the limit at $(sed -n 's/.*(\(9[0-9]%\) of it).*/\1/p' "$work/pg.show2") when the call failed, the server survived)"
        fi
    fi
    rm -rf "$pg"
fi

# ---- numpy from PyPI --------------------------------------------------------
# The venv is kept in the build directory between runs.
venv="$build/conformance-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import numpy' 2>/dev/null; then
    rm -rf "$venv"
    "$python" -m venv "$venv" >/dev/null 2>&1 &&
        "$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: \
            numpy >"$work/pip.log" 2>&1 || rm -rf "$venv"
fi
if [ -x "$venv/bin/python" ]; then
    rm -rf "${GMP_RUN_DIR:?}"/* "$GMP_DUMP_DIR"
    numpy_script="'$venv/bin/python' -c 'import numpy as np
a = np.ones(10**6)
np.empty(10**13)'"
    run numpy bare "$numpy_script"
    run numpy pre "$numpy_script"
    if same numpy ours-allowed; then
        bundles=$(ls "$GMP_DUMP_DIR" 2>/dev/null | wc -l)
        shown=$("$inspect" show "$GMP_DUMP_DIR"/oom_dump_* 2>&1)
        if [ "$(cat "$work/numpy.bare.rc")" != 1 ] || ! grep -q 'MemoryError' "$work/numpy.bare.err"; then
            fail numpy "the bare run did not die of MemoryError: $(tail -1 "$work/numpy.bare.err")"
        elif [ "$bundles" != 1 ] || [ "$(grep -c '^gpumemprof: ' "$work/numpy.pre.err")" != 1 ]; then
            fail numpy "$bundles bundle(s); stderr: $(tr '\n' ' ' <"$work/numpy.pre.err")"
        elif ! printf '%s' "$shown" | grep -q 'malloc of 72.8 TiB' ||
             ! printf '%s' "$shown" | grep -q 'Unable to allocate 72.8 TiB' ||
             ! printf '%s' "$shown" | grep -q '^Exception: *numpy\..*\._ArrayMemoryError$' ||
             ! printf '%s' "$shown" | grep -q 'a request larger than this host could ever give'; then
            fail numpy "show does not name the failed malloc, numpy's exception and words, and a request no host here could give: $shown"
        else
            pass "numpy (np.empty(10**13): one bundle, the failed malloc, numpy's exception and message, a request larger than this host could ever give)"
        fi
    fi
    # A training loop that keeps every batch's 4 MiB feature array and
    # concatenates them every 25 steps, under a 1 GiB RLIMIT_AS: what held
    # the memory is the line that made the arrays, called from the line
    # that kept them, with the bytes the program says it kept (within 5%).
    # (A concatenate that came close to the limit and did not fail may leave
    # a pressure warning first: the death's bundle is the newest.)
    rm -rf "${GMP_RUN_DIR:?}"/* "$GMP_DUMP_DIR"
    cat >"$work/features.py" <<'EOF'
import numpy as np

def extract_features(step):
    return np.full(1 << 19, float(step))

def main():
    feats = []
    try:
        for step in range(1000):
            feats.append(extract_features(step))
            if step % 25 == 24:
                np.concatenate(feats)
    except MemoryError:
        print("kept", sum(f.nbytes for f in feats))
        raise

main()
EOF
    (ulimit -v 1048576; LD_PRELOAD="$preload" "$venv/bin/python" "$work/features.py") \
        >"$work/features.out" 2>"$work/features.err"
    kept=$(sed -n 's/^kept \([0-9]*\)$/\1/p' "$work/features.out")
    death=$(ls -d "$GMP_DUMP_DIR"/oom_dump_* 2>/dev/null | tail -n 1)
    held=$("$inspect" show "$death" 2>&1 | sed -n 's/^Held by: *//p')
    held_mib=$(printf '%s' "$held" | sed -n 's/^\([0-9.]*\) MiB in .*/\1/p')
    if [ -z "$kept" ] || [ -z "$held_mib" ] ||
        ! printf '%s' "$held" | grep -q ' made at features.py:4 in extract_features (called from features.py:10)' ||
        ! awk -v h="$held_mib" -v k="$kept" 'BEGIN { t = k / 1048576; exit !(h >= t * 0.95 && h <= t * 1.05) }'; then
        fail numpy-held-by "kept $kept bytes; show says: Held by: $held; $(tail -1 "$work/features.err")"
    else
        pass "numpy-held-by (Held by: $held; the program kept $((kept / 1048576)) MiB)"
    fi
else
    skip numpy "cannot make a venv with numpy from PyPI here: $(tail -1 "$work/pip.log" 2>/dev/null)"
fi

# ---- gevent from PyPI -------------------------------------------------------
# Greenlets, each started on a stack above which lie another's stale words:
# ten keep 4 MiB blocks, switching between each, then one asks for 64 TiB
# and is refused.  The same output both ways, and one bundle, held by the
# greenlets' own line.
if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -c 'import gevent' 2>/dev/null; then
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: \
        gevent >"$work/pip-gevent.log" 2>&1
fi
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import gevent' 2>/dev/null; then
    rm -rf "${GMP_RUN_DIR:?}"/* "$GMP_DUMP_DIR"
    cat >"$work/greenlets.py" <<'EOF'
import gevent

kept = []

def worker(i):
    gevent.sleep(0.001 * (i % 3))
    for _ in range(5):
        kept.append(bytearray(4 << 20))
        gevent.sleep(0)

def too_big():
    gevent.sleep(0)
    try:
        return bytearray(1 << 46)
    except MemoryError as e:
        return type(e).__name__

gevent.joinall([gevent.spawn(worker, i) for i in range(10)])
big = gevent.spawn(too_big)
big.join()
print("kept", sum(len(b) for b in kept), "then", big.value)
EOF
    run gevent bare "'$venv/bin/python' '$work/greenlets.py'"
    run gevent pre "'$venv/bin/python' '$work/greenlets.py'"
    if same gevent ours-allowed; then
        bundles=$(ls "$GMP_DUMP_DIR" 2>/dev/null | wc -l)
        held=$("$inspect" show "$GMP_DUMP_DIR"/oom_dump_* 2>&1 | sed -n 's/^Held by: *//p')
        if [ "$(cat "$work/gevent.bare.out")" != "kept 209715200 then MemoryError" ]; then
            fail gevent "the bare run said: $(cat "$work/gevent.bare.out" "$work/gevent.bare.err")"
        elif [ "$bundles" != 1 ] ||
            ! printf '%s' "$held" | grep -q '^200.0 MiB in 50 allocation(s) made at greenlets.py:8 in worker'; then
            fail gevent "$bundles bundle(s); Held by: $held"
        else
            pass "gevent (the same output, one bundle; Held by: $held)"
        fi
    fi
else
    skip gevent "cannot have gevent from PyPI here: $(tail -1 "$work/pip-gevent.log" 2>/dev/null)"
fi

say "conformance: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
