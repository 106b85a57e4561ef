# gmp-inspect.bash — bash completion for gmp-inspect and gmp-run.
#
# Installed beside gmp-run.bash, which sources it, in share/bash-completion/
# completions/, where bash-completion looks for a command's completion the
# first time it is asked for: by `make install`, and by the wheel (pip
# install --user puts it under ~/.local/share, which bash-completion reads;
# from a venv, source it by hand).  Each verb's options are the ones its
# usage line names: test/unit/completion_check.sh checks the two agree, so
# a new option cannot be forgotten here.

_gmp_inspect_verbs="list show events validate recover triage diff plot leaks export watch prune metrics info"

# _gmp_inspect_options VERB: the options VERB takes (its --help's)
_gmp_inspect_options() {
    case $1 in
    list | events | info) echo "--json" ;;
    show) echo "--events --json" ;;
    recover) echo "--dump-dir --evidence --oom-killed --pid --say --signal" ;;
    triage) echo "--format --run" ;;
    plot) echo "-o" ;;
    leaks) echo "--json --window" ;;
    export) echo "--format -o" ;;
    watch) echo "--interval --json --once" ;;
    prune) echo "--max-dumps --max-total-mb" ;;
    esac
}

_gmp_inspect() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]} verb=${COMP_WORDS[1]}
    COMPREPLY=()
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "$_gmp_inspect_verbs --help --version" -- "$cur"))
        return
    fi
    case $verb:$prev in
    triage:--format)
        COMPREPLY=($(compgen -W "text json markdown junit line" -- "$cur"))
        return
        ;;
    export:--format)
        COMPREPLY=($(compgen -W "trace-json torch-snapshot" -- "$cur"))
        return
        ;;
    *:--dump-dir)
        COMPREPLY=($(compgen -d -- "$cur"))
        return
        ;;
    *:--run | *:--pid | *:--signal | *:--evidence | *:--oom-killed | *:--window | *:--interval | \
        *:--max-dumps | *:--max-total-mb)
        return # a value of the user's own
        ;;
    esac
    case $cur in
    -*) COMPREPLY=($(compgen -W "$(_gmp_inspect_options "$verb") --help" -- "$cur")) ;;
    *) COMPREPLY=($(compgen -f -- "$cur")) ;; # bundles, dump directories, files
    esac
}

_gmp_run() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]} i
    COMPREPLY=()
    if [ "$prev" = "--dump-dir" ]; then
        COMPREPLY=($(compgen -d -- "$cur"))
        return
    fi
    # past gmp-run's own options, the command and its arguments
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        --dump-dir) i=$((i + 1)) ;;
        --) i=$((i + 1)); break ;;
        -*) ;;
        *) break ;;
        esac
    done
    if [ "$i" -lt "$COMP_CWORD" ] && type _command_offset >/dev/null 2>&1; then
        _command_offset "$i"
    elif [ "$i" -lt "$COMP_CWORD" ]; then
        COMPREPLY=($(compgen -f -- "$cur"))
    elif [ "${cur#-}" != "$cur" ]; then
        COMPREPLY=($(compgen -W "--dump-dir --help --version --" -- "$cur"))
    else
        COMPREPLY=($(compgen -c -- "$cur"))
    fi
}

complete -o filenames -F _gmp_inspect gmp-inspect
complete -o filenames -F _gmp_run gmp-run
