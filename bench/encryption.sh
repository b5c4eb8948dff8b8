#!/usr/bin/env bash
# bench/encryption.sh: what encryption costs panto-sync. The same
# generated catalog is pushed to a plaintext prefix and to an encrypted
# one (panto-sync keygen; --key-file), pulled back from each into an
# empty directory, then pushed again after one message was appended to
# 10% of the sessions. Prints the wall times of both and their ratio, and
# the bytes each prefix stores; checks that both pulls reproduce the
# catalog byte for byte.
#
# Each round pushes to new buckets and pulls into new directories, the
# two kinds taking turns going first, after a `sync`; the median of
# ROUNDS rounds (default 5) is reported, with every run's time, and the
# ratio is the median of each round's encrypted / plaintext time (the
# two ran a few seconds apart on the same machine).
#
#   bench/encryption.sh                              # 1,000 sessions, ~200 MB
#   SESSIONS=100 MB=20 ROUNDS=1 bench/encryption.sh  # a quick run
#   TMPDIR=/dev/shm bench/encryption.sh              # MinIO's data, the catalog and the pulls in memory
#
# On a machine whose disk others share, a pull's time (a write and an
# fsync per session) follows their load more than its own work: in
# memory, the comparison of the two kinds is what is left.
#
# Needs: go, a minio binary ($PANTO_MINIO, PATH or $(go env GOPATH)/bin),
# aws (awscli), curl. Everything runs in a temp dir that is removed at
# the end; every run is bounded by a timeout.
set -euo pipefail

SESSIONS=${SESSIONS:-1000}
MB=${MB:-200}
CONCURRENCY=${CONCURRENCY:-16}
ROUNDS=${ROUNDS:-5}
TOOL_TIMEOUT=${TOOL_TIMEOUT:-900}

cd "$(dirname "$0")/.."
work_prefix=panto-bench-enc
# shellcheck source=bench/minio.sh
. bench/minio.sh

echo "building panto-sync and generating $SESSIONS sessions (~$MB MB)..." >&2
go build -o "$work/panto-sync" ./cmd/panto-sync
go run ./bench/gencatalog -dir "$work/cat" -sessions "$SESSIONS" -mb "$MB" >&2
raw=$(find "$work/cat" -name '*.jsonl' -printf '%s\n' | awk '{s+=$1} END {print s}')
"$work/panto-sync" keygen "$work/bucket.key" >&2

# flags KIND: the key flag of the kind (none for plaintext).
flags() { if [ "$1" = enc ]; then echo "--key-file $work/bucket.key"; fi; }

# timed NAME CMD...: run CMD with a timeout, after a sync, and set last
# to its wall time in seconds and cpu to its CPU time (user + system: the
# work the process did, which other load on the machine disturbs less
# than the wall time).
timed() {
	local name=$1 t0 t1
	shift
	sync
	t0=$(date +%s.%N)
	timeout "$TOOL_TIMEOUT" /usr/bin/time -f '%U %S' -o "$work/$name.time" "$@" >"$work/$name.log" 2>&1 || { echo "bench: $name failed; see below" >&2; cat "$work/$name.log" >&2; exit 1; }
	t1=$(date +%s.%N)
	last=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
	cpu=$(awk '{ printf "%.2f", $1 + $2 }' "$work/$name.time")
	echo "  $name: $last s ($cpu s CPU)" >&2
}

# same DIR: the pulled catalog is the generated one, byte for byte.
same() {
	(cd "$work/cat" && find . -name '*.jsonl' | sort) >"$work/want.list"
	(cd "$1" && find . -name '*.jsonl' | sort) >"$work/got.list"
	cmp -s "$work/want.list" "$work/got.list" || { echo "bench: $1 does not hold the catalog's sessions" >&2; exit 1; }
	while read -r f; do cmp -s "$work/cat/$f" "$1/$f" || { echo "bench: $1/$f differs from the catalog's" >&2; exit 1; }; done <"$work/want.list"
}

# metric NAME BUCKET: a per-bucket MinIO counter (refreshed at most every
# 10 s: read it 11 s after a run).
metric() {
	curl -s "$endpoint/minio/v2/metrics/bucket" |
		awk -v m="$1" -v b="bucket=\"$2\"" 'index($0, m"{") == 1 && index($0, b) { s += $NF } END { printf "%d\n", s }'
}
stored() { aws --endpoint-url "$endpoint" s3 ls --recursive --summarize "s3://$1" | awk '/Total Size:/ {print $3}'; }
objects() { aws --endpoint-url "$endpoint" s3 ls --recursive --summarize "s3://$1" | awk '/Total Objects:/ {print $3}'; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

declare -A times ratios cpus
echo "warming MinIO up..." >&2
aws --endpoint-url "$endpoint" s3 mb s3://bench-warmup >/dev/null
"$work/panto-sync" push --quiet --concurrency "$CONCURRENCY" --dir "$work/cat" --endpoint "$endpoint" s3://bench-warmup/panto >/dev/null

for r in $(seq 1 "$ROUNDS"); do
	echo "round $r of $ROUNDS..." >&2
	order=(plain enc)
	[ $((r % 2)) = 0 ] && order=(enc plain)
	for k in "${order[@]}"; do aws --endpoint-url "$endpoint" s3 mb "s3://bench-$k-$r" >/dev/null; done
	declare -A got=()
	for op in push pull; do
		for k in "${order[@]}"; do
			if [ $op = push ]; then
				# shellcheck disable=SC2046
				timed "push-$k-$r" "$work/panto-sync" push --quiet --concurrency "$CONCURRENCY" $(flags $k) --dir "$work/cat" --endpoint "$endpoint" "s3://bench-$k-$r/panto"
			else
				rm -rf "$work/pull-$k"
				# shellcheck disable=SC2046
				timed "pull-$k-$r" "$work/panto-sync" pull --quiet --concurrency "$CONCURRENCY" $(flags $k) --dir "$work/pull-$k" --endpoint "$endpoint" "s3://bench-$k-$r/panto"
				same "$work/pull-$k"
			fi
			got[$op-$k]=$last
			times[$op-$k]="${times[$op-$k]:-} $last"
			cpus[$op-$k]="${cpus[$op-$k]:-} $cpu"
		done
		ratios[$op]="${ratios[$op]:-} $(ratio "${got[$op-enc]}" "${got[$op-plain]}")"
	done
done

appended=$(go run ./bench/gencatalog -dir "$work/cat" -append 0.1 -seed 2 | awk '{print $2}')
echo "appended $appended bytes to 10% of the sessions; incremental push..." >&2
declare -A sent
sleep 11
for k in plain enc; do
	before=$(metric minio_bucket_traffic_received_bytes "bench-$k-$ROUNDS")
	# shellcheck disable=SC2046
	timed "incr-$k" "$work/panto-sync" push --quiet --concurrency "$CONCURRENCY" $(flags $k) --dir "$work/cat" --endpoint "$endpoint" "s3://bench-$k-$ROUNDS/panto"
	times[incr-$k]=$last
	sleep 11
	sent[$k]=$(($(metric minio_bucket_traffic_received_bytes "bench-$k-$ROUNDS") - before))
done

echo
echo "catalog: $SESSIONS sessions, $raw bytes of JSONL; $ROUNDS rounds; incremental: $appended bytes appended to $((SESSIONS / 10)) sessions"
printf '| operation | plaintext (s, median) | encrypted (s, median) | encrypted ÷ plaintext (median of rounds) | CPU s, encrypted / plaintext (medians) | runs: plaintext | runs: encrypted |\n|---|---|---|---|---|---|---|\n'
for op in push pull; do
	p=$(echo ${times[$op-plain]} | median) e=$(echo ${times[$op-enc]} | median) q=$(echo ${ratios[$op]} | median)
	cp=$(echo ${cpus[$op-plain]} | median) ce=$(echo ${cpus[$op-enc]} | median)
	printf '| full %s | %s | %s | **%s** | %s / %s = %s | %s | %s |\n' "$op" "$p" "$e" "$q" "$ce" "$cp" "$(ratio "$ce" "$cp")" "$(echo ${times[$op-plain]})" "$(echo ${times[$op-enc]})"
done
printf '| incremental push | %s | %s | %s | | | |\n' "${times[incr-plain]}" "${times[incr-enc]}" "$(ratio "${times[incr-enc]}" "${times[incr-plain]}")"
printf '\nincremental push, bytes sent (MinIO'"'"'s count) for %s appended: plaintext %s, encrypted %s (%s)\n' "$appended" "${sent[plain]}" "${sent[enc]}" "$(ratio "${sent[enc]}" "${sent[plain]}")"
sp=$(stored "bench-plain-$ROUNDS") se=$(stored "bench-enc-$ROUNDS")
printf '\n| prefix | bytes stored | objects | encrypted ÷ plaintext |\n|---|---|---|---|\n'
printf '| plaintext | %s | %s | |\n| encrypted | %s | %s | **%s** |\n' "$sp" "$(objects "bench-plain-$ROUNDS")" "$se" "$(objects "bench-enc-$ROUNDS")" "$(ratio "$se" "$sp")"
