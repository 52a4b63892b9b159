# Shared helpers for the bash scripts in scripts/ (sourced, not run).
#
#   REPO_ROOT        the repository root (resolved from this file's path)
#   PYTHON           ${PYTHON:-python}; the repo's .venv is activated when present
#   log / die        messages on stdout / fatal error on stderr (exit 1)
#   step_is_done / step_done   stamp files: a step is reused when its stamp holds the
#                    same signature (parameters + size/mtime of its inputs) and all its
#                    outputs exist.

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    cat <<EOF
Usage: source scripts/_common.sh   (from another script of scripts/; running it does nothing)

Shared helpers of the bash scripts: REPO_ROOT, PYTHON (the repository's .venv is
activated when present), log/die, resolve_text, signature, step_is_done/step_done/
step_reset (reuse of finished steps) and read_args (the flags of a configs/*.args file).

Options:
  -h, --help   print this help and exit

Example (inside a script):
  source "\$(dirname "\${BASH_SOURCE[0]}")/_common.sh"
  mapfile -t ARGS < <(read_args configs/demo/transformer_tiny.args)
EOF
    exit 0
fi

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export REPO_ROOT

if [[ -z "${VIRTUAL_ENV:-}" && -f "$REPO_ROOT/.venv/bin/activate" ]]; then
    # shellcheck disable=SC1091
    source "$REPO_ROOT/.venv/bin/activate"
fi
PYTHON="${PYTHON:-python}"

_LOG_TAG="${_LOG_TAG:-$(basename "$0" .sh)}"

log() { echo "[$_LOG_TAG] $*"; }
die() { echo "[$_LOG_TAG] ERROR: $*" >&2; exit 1; }

# require_file PATH [HINT]: stop with a message naming PATH when it does not exist.
require_file() {
    [[ -f "$1" ]] || die "missing input file: $1${2:+ ($2)}"
}

# resolve_text PREFIX.LANG: prints PREFIX.LANG or PREFIX.LANG.gz (whichever exists);
# returns 1 when neither exists.
resolve_text() {
    if [[ -f "$1" ]]; then echo "$1"
    elif [[ -f "$1.gz" ]]; then echo "$1.gz"
    else return 1
    fi
}

# signature ARGS... : sha256 of the arguments; an argument that names an existing
# file contributes its path, size and modification time instead of its text.
signature() {
    local a
    for a in "$@"; do
        if [[ -f "$a" ]]; then
            stat -L -c 'file %n %s %Y' "$a"
        else
            printf 'arg %s\n' "$a"
        fi
    done | sha256sum | cut -d' ' -f1
}

# step_is_done STAMP_DIR NAME SIG OUTPUT...: true when the step can be reused.
step_is_done() {
    local dir="$1" name="$2" sig="$3"; shift 3
    local stamp="$dir/$name.done" out
    [[ -f "$stamp" ]] || return 1
    [[ "$(cat "$stamp")" == "$sig" ]] || return 1
    for out in "$@"; do
        [[ -e "$out" ]] || return 1
    done
    return 0
}

# step_done STAMP_DIR NAME SIG: record that the step finished.
step_done() {
    mkdir -p "$1"
    echo "$3" > "$1/$2.done"
}

# step_reset STAMP_DIR NAME: forget a step (before running it again).
step_reset() {
    rm -f "$1/$2.done"
}

# read_args FILE: the flags of a configs/*.args file, one word per line (comments and
# blank lines dropped); use as: mapfile -t ARGS < <(read_args FILE)
read_args() {
    [[ -f "$1" ]] || die "missing argument file: $1"
    grep -v -E '^[[:space:]]*(#|$)' "$1" | tr -s ' \t' '\n\n' | grep -v '^$'
}
