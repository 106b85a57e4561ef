#!/bin/sh
# ensure-deps.sh — make sure what the build and tests need is present:
# jansson (the tools), libdw and libiberty (their names of native frames),
# cmocka (the tests), the allocators the tests preload
# behind ours (jemalloc, tcmalloc, mimalloc), and Debian's HIP (headers to check our
# hook prototypes against, the real library for a no-GPU smoke test), and
# the tools the tests check output with, clang with its sanitizer
# runtimes for the fuzzers, and what the conformance suite runs (git,
# valgrind, CPython's own tests, a venv for numpy from PyPI), Slurm
# with munge and its plugin header for the SPANK plugin, and the language
# runtimes whose deaths the tests show.  Missing ones are installed with
# apt-get when we are root or have password-less sudo; otherwise one line
# names the packages.
set -u
missing=""
optional=""
need() { # need PACKAGE CHECK...
    pkg=$1
    shift
    "$@" >/dev/null 2>&1 || missing="$missing $pkg"
}
want() { # want PACKAGE CHECK...: a stage skips, with a line, without it
    pkg=$1
    shift
    "$@" >/dev/null 2>&1 || optional="$optional $pkg"
}
need pkg-config command -v pkg-config
need libjansson-dev pkg-config --exists jansson
need libcmocka-dev pkg-config --exists cmocka
need libdw-dev pkg-config --exists libdw      # gmp-inspect symbolises allocation sites
need libiberty-dev test -f /usr/include/libiberty/demangle.h  # and demangles C++'s and Rust's names
need libjemalloc2 sh -c 'ldconfig -p | grep -q "libjemalloc.so.2 "'
need libtcmalloc-minimal4 sh -c 'ldconfig -p | grep -q "libtcmalloc_minimal.so.4 "'
need libmimalloc2.0 sh -c 'ldconfig -p | grep -q "libmimalloc.so.2 "'
need libamdhip64-dev test -f /usr/include/hip/hip_runtime_api.h
need libxml2-utils command -v xmllint     # the tests check triage's JUnit XML
need tmux command -v tmux                 # the tests watch `gmp-inspect watch` in a terminal
need binutils command -v addr2line        # the tests symbolise a bundle's stack
need strace command -v strace             # a test counts the files `show` opens
need elfutils command -v eu-stack         # a command past its deadline shows its stacks (test/deadline.c)
need g++ command -v g++                   # a test program writes through std::cerr
need clang command -v clang               # the libFuzzer harnesses (test/fuzz/)
# the conformance suite (test/conformance/): real software, bare and preloaded
need git command -v git
need nodejs command -v node                                       # V8's own SIGSEGV handler
need default-jdk-headless sh -c 'command -v java && command -v javac'  # the JVM's, from a source file
need golang-go command -v go                                      # a runtime that exits past libc
need rustc command -v rustc                                       # Rust's abort on a failed allocation
need valgrind command -v valgrind
need patchelf command -v patchelf       # Debian unstable's CPython starting its own subprocesses
# the Slurm plugin (slurm/): built against spank.h, tested in a single-node
# Slurm; where these cannot be installed, that stage skips with a line
want libslurm-dev test -f /usr/include/slurm/spank.h
want slurm-wlm sh -c 'command -v srun && test -x /usr/sbin/slurmctld && test -x /usr/sbin/slurmd'
want munge test -x /usr/sbin/munged
# the wheel is built, and tried, in Debian 11's root (mk/old-root.sh)
want debootstrap command -v debootstrap
# bash-completion loads our completions from an installed tree (test_install)
want bash-completion test -f /usr/share/bash-completion/bash_completion
# language runtimes whose out-of-memory deaths test_runtimes.c shows (a
# missing one skips with a line); installed without their recommendations,
# which for R are the whole of CRAN's recommended packages.  GHC is not
# installed here (775 MB): its case runs where it is installed.
runtimes=""
runtime() { # runtime PACKAGE CHECK...
    pkg=$1
    shift
    "$@" >/dev/null 2>&1 || runtimes="$runtimes $pkg"
}
runtime luajit command -v luajit
runtime lua5.4 command -v lua5.4
runtime php-cli command -v php
runtime guile-3.0 command -v guile
runtime sbcl command -v sbcl
runtime pypy3 command -v pypy3
runtime ruby command -v ruby
runtime erlang-base sh -c 'command -v erl && command -v erlc'
runtime tcl command -v tclsh
runtime ocaml-nox command -v ocamlopt
runtime r-base-core command -v Rscript
runtime mono-mcs sh -c 'command -v mcs && command -v mono'
runtime python3-joblib /usr/bin/python3 -c 'import joblib'   # joblib's worker pool (test_pools)
pyver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
if [ -n "$pyver" ]; then
    need "libpython$pyver-testsuite" /usr/bin/python3 -c 'import test.test_os'  # the stdlib ships regrtest alone
    need "python$pyver-venv" /usr/bin/python3 -c 'import ensurepip'
fi
need libclang-rt-dev sh -c 'ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a'
[ -z "$missing" ] && [ -z "$optional" ] && [ -z "$runtimes" ] && exit 0

if [ "$(id -u)" = 0 ]; then
    sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
else
    [ -n "$optional" ] && echo "gpumemprof: not installed:$optional (the stages that need them skip with a line)" >&2
    [ -n "$runtimes" ] && echo "gpumemprof: not installed:$runtimes (their runtime cases skip)" >&2
    [ -z "$missing" ] && exit 0
    echo "gpumemprof: missing Debian packages:$missing (install them with apt-get)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if [ -n "$optional" ]; then
    echo "gpumemprof: installing$optional" >&2
    $sudo apt-get install -y -q $optional >/dev/null 2>&1 ||
        { $sudo apt-get update -q >/dev/null 2>&1 && $sudo apt-get install -y -q $optional >/dev/null 2>&1; } ||
        echo "gpumemprof: apt-get could not install$optional (the stages that need them skip with a line)" >&2
fi
if [ -n "$runtimes" ]; then
    echo "gpumemprof: installing$runtimes" >&2
    $sudo apt-get install -y -q --no-install-recommends $runtimes >/dev/null 2>&1 ||
        { $sudo apt-get update -q >/dev/null 2>&1 &&
          $sudo apt-get install -y -q --no-install-recommends $runtimes >/dev/null 2>&1; } ||
        echo "gpumemprof: apt-get could not install$runtimes (their runtime cases skip)" >&2
fi
[ -z "$missing" ] && exit 0
echo "gpumemprof: installing$missing" >&2
if ! $sudo apt-get install -y -q $missing >/dev/null 2>&1; then
    $sudo apt-get update -q >/dev/null 2>&1
    $sudo apt-get install -y -q $missing >/dev/null || {
        echo "gpumemprof: apt-get could not install$missing" >&2
        exit 1
    }
fi
