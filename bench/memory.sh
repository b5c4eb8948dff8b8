#!/usr/bin/env bash
# bench/memory.sh: the peak memory (maximum resident set size) of
# panto-sync push, pull, copy and verify of one large session, against a
# MinIO on loopback, and of panto show (text and --json), export and
# search of it, from the directory and from the bucket. Sync streams: what it holds at
# once is bounded by its chunks (8 MiB) and read-ahead (32 MiB), not by
# the session's size; show prints a message at a time.
#
#   bench/memory.sh              # one session of ~1 GB
#   MB=200 bench/memory.sh       # a quicker run
#
# Needs: go, a minio binary ($PANTO_MINIO, PATH or $(go env GOPATH)/bin),
# GNU time (/usr/bin/time), curl. Everything runs in a temp dir that is
# removed at the end.
set -euo pipefail

MB=${MB:-1000}
cd "$(dirname "$0")/.."
work_prefix=panto-memory
# shellcheck source=bench/minio.sh
. bench/minio.sh
[ -x /usr/bin/time ] || { echo "bench: no /usr/bin/time; apt-get install -y time" >&2; exit 1; }
mkdir -p "$work/minio/mem-a" "$work/minio/mem-b"

echo "building panto, panto-sync and generating one session of ~$MB MB..." >&2
go build -o "$work/" ./cmd/panto ./cmd/panto-sync
go run ./bench/gencatalog -dir "$work/cat" -sessions 1 -mb "$MB" >&2
size=$(find "$work/cat" -name '*.jsonl' -printf '%s\n')

# rss NAME COMMAND ARGS...: run panto-sync and print its peak RSS.
rss() {
	local name=$1 cmd=$2
	shift 2
	/usr/bin/time -f '%M %e' -o "$work/time" "$work/panto-sync" "$cmd" --quiet --endpoint "$endpoint" "$@" >"$work/$name.log" 2>&1 ||
		{ echo "bench: $name failed" >&2; cat "$work/$name.log" >&2; exit 1; }
	read -r kb secs <"$work/time"
	printf '| %s | %d MB | %.1f s |\n' "$name" $((kb / 1024)) "$secs"
}

# rss_panto NAME COMMAND ARGS...: run panto (its output to a file, in a
# home of its own) and print its peak RSS.
rss_panto() {
	local name=$1 cmd=$2
	shift 2
	HOME="$work/home" XDG_DATA_HOME="$work/home/data" XDG_CACHE_HOME="$work/home/cache" \
		/usr/bin/time -f '%M %e' -o "$work/time" "$work/panto" "$cmd" --endpoint "$endpoint" "$@" >"$work/out" 2>"$work/$name.log" ||
		{ echo "bench: $name failed" >&2; cat "$work/$name.log" >&2; exit 1; }
	read -r kb secs <"$work/time"
	printf '| %s | %d MB | %.1f s |\n' "$name" $((kb / 1024)) "$secs"
}

echo
echo "one session of $size bytes of JSONL"
echo
echo "| operation | peak RSS | time |"
echo "|---|---|---|"
rss "push (dir → bucket)" push --dir "$work/cat" s3://mem-a
rss "verify (bucket)" verify s3://mem-a
rss "pull (bucket → empty dir)" pull --dir "$work/back" s3://mem-a
rss "copy (bucket → bucket)" copy s3://mem-a s3://mem-b
rss "verify (dir)" verify "$work/back"
id=$(basename "$work/cat/"*.jsonl .jsonl)
rss_panto "panto show (dir)" show --store "$work/cat" "${id:0:8}"
rss_panto "panto show --json (dir)" show --json --store "$work/cat" "${id:0:8}"
rss_panto "panto show (bucket, --direct)" show --direct --store s3://mem-a "${id:0:8}"
rss_panto "panto export --format json (dir)" export --format json --store "$work/cat" "${id:0:8}"
rss_panto "panto search (dir), a phrase found nowhere" search --store "$work/cat" "no such words anywhere"
cmp "$work/cat/"*.jsonl "$work/back/"*.jsonl && echo "(the pulled file is byte for byte the pushed one)"
