#!/usr/bin/env bash
# bench/catchup.sh: what a local-first panto's background catch-up costs
# each run as the bucket grows (docs/DESIGN.md §10, step 3). It seeds a
# bucket with a generated catalog of $SESSIONS sessions, then, for each
# panto binary given (default: one built from this tree), in a home of
# its own: `panto sessions --all --limit 5` on an empty replica; again
# after 20 of the bucket's sessions were copied into the replica (read
# there earlier, with no shipped record); and twice more. Each run
# prints its requests and bytes received (from PANTO_TRACE), maximum
# resident memory and wall time; a run waits for the catch-up at exit.
#
#   bench/catchup.sh                                   # this tree, 20,000 sessions
#   SESSIONS=100000 bench/catchup.sh /tmp/old-panto /tmp/new-panto
#
# Needs go, a minio binary, curl, python3, bc and GNU time (/usr/bin/time).
set -euo pipefail

cd "$(dirname "$0")/.."
work_prefix=panto-catchup
# shellcheck source=bench/minio.sh
. bench/minio.sh

sessions=${SESSIONS:-20000}
binaries=("$@")
go build -o "$work/bin/" ./cmd/panto-sync
if [ ${#binaries[@]} -eq 0 ]; then
	go build -o "$work/bin/" ./cmd/panto
	binaries=("$work/bin/panto")
fi
go run ./bench/gencatalog -sessions "$sessions" -mb $((sessions / 100 + 1)) -dir "$work/catalog" >/dev/null
curl -sf -o /dev/null -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$endpoint/catchup"
"$work/bin/panto-sync" push --quiet --concurrency 32 --dir "$work/catalog" --endpoint "$endpoint" s3://catchup/p
echo "bucket: $sessions sessions"

# run BIN HOME LABEL: one panto run, and what it cost.
run() {
	HOME=$2 XDG_DATA_HOME=$2/data XDG_CONFIG_HOME=$2/config XDG_CACHE_HOME=$2/cache PANTO_TRACE=1 \
		/usr/bin/time -f "%M %e" -o "$work/time" "$1" sessions --all --limit 5 --store s3://catchup/p --endpoint "$endpoint" >/dev/null 2>"$work/trace"
	local received
	received=$(grep -o 'received=[0-9]*' "$work/trace" | cut -d= -f2 | paste -sd+ | bc)
	read -r rss wall <"$work/time"
	echo "$1: $3: $(grep -c 'msg=s3' "$work/trace") requests, $((received / 1024)) KB received, $((rss / 1024)) MB resident, $wall s"
}

i=0
for bin in "${binaries[@]}"; do
	i=$((i + 1))
	home=$work/home-$i
	mkdir -p "$home"
	run "$bin" "$home" "empty replica"
	replica=$(ls -d "$home"/data/panto/replicas/*/ | sed -n 1p)
	find "$work/catalog" -name '*.jsonl' | sed -n 1,20p | xargs -I{} cp {} "$replica"
	run "$bin" "$home" "20 sessions in the replica, no shipped record"
	run "$bin" "$home" "next run"
	run "$bin" "$home" "next run"
done
