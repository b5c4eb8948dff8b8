#!/usr/bin/env bash
# bench/pull.sh: a full pull of a bucket into an empty directory,
# panto-sync pull against rclone copy of the same bucket (rclone
# downloads the raw objects, one GET each), on one MinIO on loopback.
# The catalog (bench/gencatalog) is pushed once with panto-sync; then
# each round pulls it with each tool into a new directory, the tools
# taking turns going first, after a `sync` so that neither pays for
# writing back the other's files. It prints every run, the medians, the
# ratio, each tool's CPU time (user + system, medians: on a shared
# machine a steadier measure than the wall time), and panto-sync's
# requests (one more pull, traced: -v).
#
#   bench/pull.sh                                # 5,000 sessions (~183 MB), 3 rounds
#   SESSIONS=500 MB=20 ROUNDS=1 bench/pull.sh    # a quick run
#   PANTO_SYNC=/path/to/other/panto-sync bench/pull.sh   # another build
#   PANTO_CPUPROFILE=/tmp/pull.prof bench/pull.sh         # with a -tags pprof build
#
# Needs: go, a minio binary ($PANTO_MINIO, PATH or $(go env GOPATH)/bin),
# Debian's rclone, curl. Everything runs in a temp dir removed at the end.
set -euo pipefail

SESSIONS=${SESSIONS:-5000}
MB=${MB:-$((SESSIONS * 11 / 300))}
ROUNDS=${ROUNDS:-3}

cd "$(dirname "$0")/.."
work_prefix=panto-pull
# shellcheck source=bench/minio.sh
. bench/minio.sh

bin=${PANTO_SYNC:-}
if [ -z "$bin" ]; then
	bin=$work/panto-sync
	go build -o "$bin" ./cmd/panto-sync
fi
echo "generating $SESSIONS sessions (~$MB MB) and pushing them..." >&2
go run ./bench/gencatalog -dir "$work/cat" -sessions "$SESSIONS" -mb "$MB" >&2
aws --endpoint-url "$endpoint" s3 mb s3://pull >/dev/null
env -u PANTO_CPUPROFILE "$bin" push --quiet --dir "$work/cat" --endpoint "$endpoint" s3://pull

pull() {
	case $1 in
	panto) "$bin" pull --quiet --endpoint "$endpoint" --dir "$2" s3://pull ;;
	rclone) env -u AWS_CA_BUNDLE RCLONE_S3_PROVIDER=Minio RCLONE_S3_ENDPOINT="$endpoint" RCLONE_S3_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" \
		RCLONE_S3_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY" RCLONE_S3_REGION=us-east-1 RCLONE_S3_ENV_AUTH=false \
		rclone copy :s3:pull "$2" --transfers 16 --checkers 16 -q ;;
	esac
}

declare -A times cpus
tools=(panto rclone)
TIMEFORMAT='%R %U %S'
for r in $(seq 1 "$ROUNDS"); do
	order=("${tools[@]:$(((r - 1) % 2))}" "${tools[@]:0:$(((r - 1) % 2))}")
	for t in "${order[@]}"; do
		sync
		{ time pull "$t" "$work/$t-$r" 2>"$work/err"; } 2>"$work/time" || { cat "$work/err" >&2; exit 1; }
		read -r d u s <"$work/time"
		cpu=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')
		echo "  round $r $t: $d s, CPU $cpu s" >&2
		times[$t]="${times[$t]:-} $d"
		cpus[$t]="${cpus[$t]:-} $cpu"
		rm -rf "$work/$t-$r"
	done
done
env -u PANTO_CPUPROFILE "$bin" pull --quiet -v --endpoint "$endpoint" --dir "$work/traced" s3://pull 2>"$work/trace.log"
diff -r -x '.panto*' "$work/cat" "$work/traced" >/dev/null || { echo "bench: the pulled catalog differs from the pushed one" >&2; exit 1; }
requests=$(grep -c 'msg=s3 ' "$work/trace.log" || true)
gets=$(grep 'msg=s3 ' "$work/trace.log" | grep -c 'method=GET' || true)

median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
p=$(echo "${times[panto]}" | median)
c=$(echo "${times[rclone]}" | median)
echo
echo "$SESSIONS sessions, $(find "$work/cat" -name '*.jsonl' -printf '%s\n' | awk '{s+=$1} END {print s}') bytes of JSONL; MinIO on loopback, $(nproc) cores; $ROUNDS rounds"
echo "every run (s): panto-sync${times[panto]}; rclone${times[rclone]}"
echo "CPU of every run (s): panto-sync${cpus[panto]}; rclone${cpus[rclone]}"
pc=$(echo "${cpus[panto]}" | median)
cc=$(echo "${cpus[rclone]}" | median)
echo
echo "| tool | full pull (s, median) | panto ÷ rclone | CPU s (median) | panto ÷ rclone | requests |"
echo "|---|---|---|---|---|---|"
echo "| panto-sync | $p | $(awk -v a="$p" -v b="$c" 'BEGIN { printf "%.2f", a / b }') | $pc | $(awk -v a="$pc" -v b="$cc" 'BEGIN { printf "%.2f", a / b }') | $requests ($gets GETs) |"
echo "| rclone copy | $c | | $cc | | |"
