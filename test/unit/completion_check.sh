#!/bin/bash
# completion_check.sh BUILD — tools/completion/gpumemprof.bash against the
# tools it completes: every verb gmp-inspect's help lists and every option
# each verb's usage line names, and nothing else; then what TAB gives in
# a few places a user presses it.  With an installed tree as a second
# argument (PREFIX, from `make install DESTDIR=...`), bash-completion finds
# the script there by itself (skipped with a line without bash-completion).
set -u
build=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
inspect=$build/gmp-inspect
failed=0
fail() {
    echo "FAIL  completion: $1"
    failed=1
}
# shellcheck source=../../tools/completion/gmp-inspect.bash
. "$here/tools/completion/gmp-inspect.bash"

verbs=$("$inspect" --help | awk '/^  [a-z]+ / {print $1}' | tr '\n' ' ' | sed 's/ $//')
[ "$verbs" = "$_gmp_inspect_verbs" ] || fail "the verbs are '$_gmp_inspect_verbs'; gmp-inspect --help lists '$verbs'"
for v in $verbs; do
    said=$("$inspect" "$v" --help 2>&1 | awk 'NR == 1 || (/^ +\[/ && !done) {print; next} {done = 1}' |
        grep -oE -- '(^| |\[)--?[a-z][a-z-]*' | tr -d ' [' | sort -u | tr '\n' ' ')
    ours=$(_gmp_inspect_options "$v" | tr ' ' '\n' | grep . | sort -u | tr '\n' ' ')
    [ "$said" = "$ours" ] || fail "$v: its usage names '$said'; the completion offers '$ours'"
done

# complete WORD...: what TAB offers after the words (the last is the one
# being typed), one line
complete_words() {
    COMP_WORDS=("$@")
    COMP_CWORD=$(($# - 1))
    COMPREPLY=()
    case $1 in
    gmp-inspect) _gmp_inspect ;;
    gmp-run) _gmp_run ;;
    esac
    printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}
expect() { # expect WANT WORD...
    want=$1
    shift
    got=$(complete_words "$@")
    [ "$got" = "$want" ] || fail "'$*' + TAB gave '$got', not '$want'"
}
expect "show" gmp-inspect sh
expect "--events --help --json" gmp-inspect show -
expect "json junit" gmp-inspect triage --format j
expect "torch-snapshot trace-json" gmp-inspect export b --format t
expect "--dump-dir" gmp-run --du
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/dumps" "$scratch/dumb"
: >"$scratch/dump.txt"
expect "$scratch/dumb $scratch/dumps" gmp-run --dump-dir "$scratch/dum"
expect "$scratch/dumb $scratch/dump.txt $scratch/dumps" gmp-inspect show "$scratch/dum"

if [ -n "${2:-}" ]; then
    if [ ! -f /usr/share/bash-completion/bash_completion ]; then
        echo "SKIP  completion: bash-completion is not installed: not loaded from $2 by it"
    else
        got=$(env -i HOME="$scratch" XDG_DATA_DIRS="$2/share" PATH="$2/bin:/usr/bin:/bin" bash -c '
            . /usr/share/bash-completion/bash_completion
            __load_completion gmp-run && complete -r gmp-inspect &&
                __load_completion gmp-inspect && complete -p gmp-inspect gmp-run')
        [ "$got" = "complete -o filenames -F _gmp_inspect gmp-inspect
complete -o filenames -F _gmp_run gmp-run" ] || fail "bash-completion did not load it from $2/share: '$got'"
    fi
fi
[ "$failed" = 0 ] && echo "ok    completion: the verbs, their options and TAB in place"
[ "$failed" = 0 ]
