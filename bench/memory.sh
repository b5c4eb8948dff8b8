#!/usr/bin/env bash
# bench/memory.sh: the peak memory (maximum resident set size) of
# panto-sync push, pull, copy and verify of one large session, against a
# MinIO on loopback. Sync streams: what it holds at once is bounded by its
# chunks (8 MiB) and read-ahead (32 MiB), not by the session's size.
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

echo "building panto-sync and generating one session of ~$MB MB..." >&2
go build -o "$work/panto-sync" ./cmd/panto-sync
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
cmp "$work/cat/"*.jsonl "$work/back/"*.jsonl && echo "(the pulled file is byte for byte the pushed one)"
