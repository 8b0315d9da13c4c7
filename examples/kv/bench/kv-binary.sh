# Sourced by the benchmark scripts here: sets $repo (the repository) and $kv (the corewire-kv
# binary to run: $COREWIRE_KV, or the release build, built first unless $build is 0).
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
kv="${COREWIRE_KV:-}"
if [[ -z "$kv" ]]; then
    [[ ${build:-1} == 1 ]] && (cd "$repo" && cargo build --release -p corewire-kv --bin corewire-kv >&2)
    kv="${CARGO_TARGET_DIR:-$repo/target}/release/corewire-kv"
fi
