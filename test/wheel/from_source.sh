#!/bin/sh
# test/wheel/from_source.sh — the package built from the source tree, the
# three ways a Python user does it, each into a fresh venv with pip's own
# build isolation (setuptools from PyPI): `pip install .` in a copy of the
# working tree, `pip install git+file://...` of a commit of that copy, and
# the sdist `python -m build --sdist` makes, installed with pip.  Each must give what
# the wheel gives: the commands, the preload inside the package, the man
# pages and the completions, and a bundle of a Python process that runs out
# of memory.  Skipped, with a line, where PyPI cannot be reached.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
python=/usr/bin/python3
[ -x "$python" ] || python=python3
version=$(sed -n 's/^#define GMP_VERSION_STRING "\(.*\)"$/\1/p' "$root/include/gpumemprof.h")

# a copy of the working tree, as a clone has it: tracked and new files,
# nothing ignored (no build/)
mkdir "$work/tree"
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$root" && git ls-files -z --cached --others --exclude-standard |
        xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
        tar --null -T - -cf -) | tar -C "$work/tree" -xf -
    git -C "$work/tree" init -q && git -C "$work/tree" add -A &&
        git -C "$work/tree" -c user.name=t -c user.email=t@t commit -q -m tree || exit 1
else
    echo "SKIP  wheel: from source: $root is not a git checkout"
    exit 0
fi

printf 'block = bytearray(1 << 45)\n' >"$work/train.py"
# installed NAME VENV: what the install gave, checked as a user would see it
installed() {
    v=$2
    seen=$("$v/bin/gmp-inspect" --version 2>&1)
    "$v/bin/gmp-run" --dump-dir "$work/$1.dumps" -- "$v/bin/python" "$work/train.py" >/dev/null 2>&1
    rc=$?
    exc=$("$v/bin/gmp-inspect" show "$work/$1.dumps" 2>/dev/null | sed -n 's/^Exception: *//p')
    man=$(PATH="$v/bin:/usr/bin:/bin" man -w gmp-run 2>&1)
    if [ "$seen" = "gmp-inspect $version" ] && [ $rc = 1 ] && [ "$exc" = MemoryError ] &&
        [ "$man" = "$v/share/man/man1/gmp-run.1" ] &&
        [ -f "$v/share/bash-completion/completions/gmp-inspect.bash" ] &&
        "$v/bin/python" -c 'import gpumemprof, os, sys
sys.exit(not os.path.isfile(os.path.join(os.path.dirname(gpumemprof.__file__), "_native", "libgpumemprof_preload.so")))'; then
        echo "ok    wheel: $1: the commands, the preload, man gmp-run, the completions; the MemoryError's bundle"
    else
        echo "FAIL  wheel: $1: --version '$seen', gmp-run exit $rc, exception '$exc', man -w '$man'"
        failed=1
    fi
}
# install NAME TARGET: pip install TARGET into a fresh venv
install() {
    "$python" -m venv "$work/$1" >"$work/$1.log" 2>&1 &&
        (cd "$work" && timeout 900 "$work/$1/bin/pip" install -q --disable-pip-version-check "$2") \
            >>"$work/$1.log" 2>&1
}

if ! install pip-dot "$work/tree"; then
    if grep -q -i "Could not find a version\|Failed to establish\|Name or service\|No matching distribution" \
        "$work/pip-dot.log"; then
        echo "SKIP  wheel: from source: pip cannot have setuptools from PyPI here: $(tail -1 "$work/pip-dot.log")"
        exit 0
    fi
    echo "FAIL  wheel: pip install . failed:"
    tail -30 "$work/pip-dot.log"
    exit 1
fi
installed "pip install ." "$work/pip-dot"

if install pip-git "git+file://$work/tree"; then
    installed "pip install git+file://..." "$work/pip-git"
else
    echo "FAIL  wheel: pip install git+file://$work/tree failed:"
    tail -30 "$work/pip-git.log"
    failed=1
fi

# the sdist: built from the tree by `build`, then installed
if ! "$work/pip-dot/bin/pip" install -q --disable-pip-version-check build >"$work/build.log" 2>&1; then
    echo "SKIP  wheel: the sdist: cannot have 'build' from PyPI: $(tail -1 "$work/build.log")"
elif ! (cd "$work/tree" && "$work/pip-dot/bin/python" -m build --sdist -o "$work/sdist" .) >>"$work/build.log" 2>&1; then
    echo "FAIL  wheel: python -m build --sdist failed:"
    tail -30 "$work/build.log"
    failed=1
elif ! install sdist "$work/sdist/gpumemprof-$version.tar.gz"; then
    echo "FAIL  wheel: pip install of the sdist failed:"
    tail -30 "$work/sdist.log"
    failed=1
else
    installed "the sdist" "$work/sdist"
fi
# the builds left nothing in the tree that git would show
left=$(git -C "$work/tree" status --porcelain 2>&1 | head -5)
[ -z "$left" ] && echo "ok    wheel: pip install . and the sdist leave nothing git shows" ||
    { echo "FAIL  wheel: the builds left in the tree: $left"; failed=1; }
exit $failed
