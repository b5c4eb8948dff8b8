#!/usr/bin/env bash
# bench/sync.sh: panto-sync push against rclone sync, aws s3 sync and
# s3cmd sync, pushing the same generated catalog to the same MinIO on
# loopback, then pushing again after one message was appended to 10% of
# the sessions. Prints wall times, bytes stored and bytes sent (as MinIO
# counts them, per bucket), and the ratios against panto-sync.
#
# Each tool's full push runs ROUNDS times (default 3), each to a new
# bucket, the tools taking turns in a different order each round, after a
# `sync` so that no tool pays for writing back the catalog or the previous
# tool's files; the median is reported, with every run's time. The
# incremental push runs once per tool, against its last bucket.
#
#   bench/sync.sh                              # 1,000 sessions, ~200 MB
#   SESSIONS=100 MB=20 ROUNDS=1 bench/sync.sh  # a quick run
#
# Needs: go, a minio binary ($PANTO_MINIO, PATH or $(go env GOPATH)/bin),
# aws (awscli), curl; rclone and s3cmd are used when present (Debian:
# apt-get install -y rclone s3cmd). Everything runs in a temp dir that is
# removed at the end; every tool run is bounded by a timeout.
set -euo pipefail

SESSIONS=${SESSIONS:-1000}
MB=${MB:-200}
CONCURRENCY=${CONCURRENCY:-16}
ROUNDS=${ROUNDS:-3}
TOOL_TIMEOUT=${TOOL_TIMEOUT:-900}

cd "$(dirname "$0")/.."
work_prefix=panto-bench
# shellcheck source=bench/minio.sh
. bench/minio.sh

echo "building panto-sync and generating $SESSIONS sessions (~$MB MB)..." >&2
go build -o "$work/panto-sync" ./cmd/panto-sync
go run ./bench/gencatalog -dir "$work/cat" -sessions "$SESSIONS" -mb "$MB" >&2
raw=$(find "$work/cat" -name '*.jsonl' -printf '%s\n' | awk '{s+=$1} END {print s}')

printf '[default]\naccess_key = %s\nsecret_key = %s\nhost_base = 127.0.0.1:%s\nhost_bucket = 127.0.0.1:%s\nuse_https = False\nbucket_location = us-east-1\n' \
	"$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" "$port" "$port" >"$work/s3cfg"

tools=(panto)
command -v rclone >/dev/null && tools+=(rclone)
command -v aws >/dev/null && tools+=(awscli)
command -v s3cmd >/dev/null && tools+=(s3cmd)

# push TOOL: sync the catalog to the tool's bucket. The tools skip
# panto's own files (.panto-sync/, the list cache) in the catalog.
# push TOOL BUCKET: sync the catalog to the bucket. panto-sync keeps its
# state per remote, so a push to a new bucket is a full push.
push() {
	case $1 in
	panto) "$work/panto-sync" push --quiet --concurrency "$CONCURRENCY" --dir "$work/cat" --endpoint "$endpoint" "s3://$2" ;;
	rclone) env -u AWS_CA_BUNDLE RCLONE_S3_PROVIDER=Minio RCLONE_S3_ENDPOINT="$endpoint" RCLONE_S3_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" \
		RCLONE_S3_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY" RCLONE_S3_REGION=us-east-1 RCLONE_S3_ENV_AUTH=false \
		rclone sync "$work/cat" ":s3:$2" --exclude '.panto*/**' --exclude '.panto*' --transfers "$CONCURRENCY" --checkers 16 -q ;;
	awscli) aws --endpoint-url "$endpoint" s3 sync "$work/cat" "s3://$2" --exclude '.panto*' --only-show-errors ;;
	s3cmd) s3cmd -c "$work/s3cfg" sync --exclude '.panto*' --no-progress -q "$work/cat/" "s3://$2/" ;;
	esac
}

# metric NAME BUCKET: a per-bucket MinIO counter.
metric() {
	curl -s "$endpoint/minio/v2/metrics/bucket" |
		awk -v m="$1" -v b="bucket=\"$2\"" 'index($0, m"{") == 1 && index($0, b) { s += $NF } END { printf "%d\n", s }'
}
stored() { aws --endpoint-url "$endpoint" s3 ls --recursive --summarize "s3://$1" | awk '/Total Size:/ {print $3}'; }

# run PHASE TOOL BUCKET: time one push, with the bytes and requests it
# sent. MinIO refreshes its metrics at most every 10 s, so the counters
# are read 11 s after each run (the bucket's previous reading, if any, is
# the baseline).
run() {
	local t0 t1 rx rq
	sync
	t0=$(date +%s.%N)
	timeout "$TOOL_TIMEOUT" bash -c "$(declare -f push); work='$work' endpoint='$endpoint' CONCURRENCY='$CONCURRENCY' push $2 $3" >"$work/$1-$2.log" 2>&1 ||
		{ echo "bench: $2 failed ($1); see below" >&2; cat "$work/$1-$2.log" >&2; exit 1; }
	t1=$(date +%s.%N)
	sleep 11
	last=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	rx=$(metric minio_bucket_traffic_received_bytes "$3")
	rq=$(metric minio_bucket_requests_total "$3")
	sent[$1-$2]=$((rx - ${lastrx[$3]:-0}))
	reqs[$1-$2]=$((rq - ${lastrq[$3]:-0}))
	lastrx[$3]=$rx lastrq[$3]=$rq
	echo "  $1 $2: $last s, ${sent[$1-$2]} bytes sent, ${reqs[$1-$2]} requests" >&2
}

median() { tr ' ' '\n' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

declare -A secs times sent reqs lastrx lastrq
for t in "${tools[@]}"; do
	for r in $(seq 1 "$ROUNDS"); do aws --endpoint-url "$endpoint" s3 mb "s3://bench-$t-$r" >/dev/null; done
done
sleep 11 # the bucket creations out of the metrics
for t in "${tools[@]}"; do
	for r in $(seq 1 "$ROUNDS"); do
		lastrx[bench-$t-$r]=$(metric minio_bucket_traffic_received_bytes "bench-$t-$r")
		lastrq[bench-$t-$r]=$(metric minio_bucket_requests_total "bench-$t-$r")
	done
done

# A first push to a fresh MinIO is slower whatever the tool (the first
# tool of round 1 took 4.5 s where it takes 3 s later): warm it with an
# untimed push that is none of the measured ones.
echo "warming MinIO up..." >&2
aws --endpoint-url "$endpoint" s3 mb s3://bench-warmup >/dev/null
aws --endpoint-url "$endpoint" s3 sync "$work/cat" s3://bench-warmup --exclude '.panto*' --only-show-errors

echo "full push, $ROUNDS rounds..." >&2
for r in $(seq 1 "$ROUNDS"); do
	# Rotate the order: each tool goes first in some round.
	order=("${tools[@]:$(((r - 1) % ${#tools[@]}))}" "${tools[@]:0:$(((r - 1) % ${#tools[@]}))}")
	for t in "${order[@]}"; do
		run full "$t" "bench-$t-$r"
		times[$t]="${times[$t]:-} $last"
	done
done
for t in "${tools[@]}"; do secs[full-$t]=$(echo ${times[$t]} | median); done

appended=$(go run ./bench/gencatalog -dir "$work/cat" -append 0.1 -seed 2 | awk '{print $2}')
echo "appended $appended bytes to 10% of the sessions; incremental push..." >&2
for t in "${tools[@]}"; do
	run incr "$t" "bench-$t-$ROUNDS"
	secs[incr-$t]=$last
done
declare -A store
for t in "${tools[@]}"; do store[$t]=$(stored "bench-$t-$ROUNDS"); done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "-"; else printf "%.2f", a / b }'; }
echo
echo "catalog: $SESSIONS sessions, $raw bytes of JSONL; incremental: $appended bytes appended to $((SESSIONS / 10)) sessions"
echo "full push: median of $ROUNDS rounds; every run (s):"
for t in "${tools[@]}"; do echo "  $t:${times[$t]}"; done
echo "MinIO $("$minio" --version | head -1 | awk '{print $3}') on loopback, $(nproc) cores; concurrency $CONCURRENCY"
echo
echo "| tool | full push (s, median) | × panto | incremental push (s) | × panto | bytes stored (after both) | panto ÷ tool | bytes sent (full) | requests (full) | bytes sent (incremental) | requests (incremental) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for t in "${tools[@]}"; do
	echo "| $t | ${secs[full-$t]} | $(ratio "${secs[full-$t]}" "${secs[full-panto]}") | ${secs[incr-$t]} | $(ratio "${secs[incr-$t]}" "${secs[incr-panto]}") | ${store[$t]} | $(ratio "${store[panto]}" "${store[$t]}") | ${sent[full-$t]} | ${reqs[full-$t]} | ${sent[incr-$t]} | ${reqs[incr-$t]} |"
done
