#!/usr/bin/env bash
# bench/firstsync.sh: what the first syncs after seeding an empty bucket
# cost (the seed push leaves a catalog on disk; the no-op push and pull
# after it should read no index partition back). For each panto-sync
# binary given (default: one built from this tree), in a bucket of its
# own: a seed push of a generated catalog of $SESSIONS sessions, then a
# no-op push, pull, push and pull, each with its wall time, CPU time,
# maximum resident memory and request count (from -v). The second push
# and pull find both sides as the first ones left them (a record of
# their listing tokens, cmd/panto-sync/unchanged.go).
#
#   bench/firstsync.sh                          # this tree, 50,000 sessions
#   SESSIONS=10000 bench/firstsync.sh /tmp/old-panto-sync /tmp/new-panto-sync
#
# Needs go, a minio binary, curl, python3 and GNU time (/usr/bin/time).
set -euo pipefail

cd "$(dirname "$0")/.."
work_prefix=panto-firstsync
# shellcheck source=bench/minio.sh
. bench/minio.sh

sessions=${SESSIONS:-50000}
binaries=("$@")
if [ ${#binaries[@]} -eq 0 ]; then
	go build -o "$work/bin/" ./cmd/panto-sync
	binaries=("$work/bin/panto-sync")
fi
go run ./bench/gencatalog -sessions "$sessions" -mb $((sessions / 700 + 1)) -dir "$work/catalog" >/dev/null

seconds() { python3 -c 'import sys,time; print(f"{time.time()-float(sys.argv[1]):.2f}")' "$1"; }
i=0
for bin in "${binaries[@]}"; do
	i=$((i + 1))
	bucket=firstsync-$i
	curl -sf -o /dev/null -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$endpoint/$bucket"
	export HOME=$work/home-$i XDG_DATA_HOME=$work/home-$i/data XDG_CACHE_HOME=$work/home-$i/cache
	start=$(python3 -c 'import time; print(time.time())')
	"$bin" push --quiet --concurrency 32 --dir "$work/catalog" --endpoint "$endpoint" "s3://$bucket"
	echo "$bin: seed push of $sessions sessions: $(seconds "$start") s"
	for op in push pull push pull; do
		start=$(python3 -c 'import time; print(time.time())')
		/usr/bin/time -f "%U %S %M" -o "$work/cpu" "$bin" "$op" --quiet -v --dir "$work/catalog" --endpoint "$endpoint" "s3://$bucket" 2>"$work/trace"
		echo "$bin: no-op $op: $(seconds "$start") s, CPU $(awk '{print $1 + $2}' "$work/cpu") s, $(awk '{printf "%.0f", $3 / 1024}' "$work/cpu") MB resident, $(grep -c 'msg=s3' "$work/trace") requests"
	done
done
