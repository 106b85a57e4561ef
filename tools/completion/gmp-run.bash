# gmp-run.bash — bash completion for gmp-run: bash-completion loads the file
# named after the command; gmp-inspect.bash, installed beside this one,
# completes both.
. "${BASH_SOURCE[0]%/*}/gmp-inspect.bash"
