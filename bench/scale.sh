#!/usr/bin/env bash
# bench/scale.sh: what each routine operation of panto and panto-sync asks
# of a bucket as the archive grows (issue 21). For each size it seeds a
# bucket on a MinIO on loopback with that many sessions, then runs the
# real binaries against it with the request trace on and prints, per
# operation and size, the requests, bytes received and sent, and wall
# time: panto sessions (and --all), panto show by id prefix, a panto -c
# turn, no-op push and pull, a push after 1% of the sessions grew, and a
# full pull against rclone's time (bench/scale/main.go says how).
#
#   bench/scale.sh                                  # 1,000 and 10,000 sessions
#   bench/scale.sh --sizes 1000,10000,100000
#   nice bench/scale.sh --sizes 500 --projects 5    # a quick run
#
# Every flag is bench/scale's (go run ./bench/scale --help). Needs: go, a
# minio binary ($PANTO_MINIO, PATH or $(go env GOPATH)/bin), curl,
# python3; rclone for the full pull's baseline (without it, --rclone '').
# Everything runs in a temp dir ($TMPDIR, else /tmp; TMPDIR=/dev/shm
# keeps MinIO's disk out of the timings) that is removed at the end.
set -euo pipefail

cd "$(dirname "$0")/.."
work_prefix=panto-scale
# shellcheck source=bench/minio.sh
. bench/minio.sh

echo "building panto, panto-sync and the benchmark..." >&2
go build -o "$work/bin/" ./cmd/panto ./cmd/panto-sync ./bench/scale
rclone=$(command -v rclone || true)

echo "## $(git rev-parse --short HEAD 2>/dev/null || echo unknown): MinIO $("$minio" --version | head -1 | awk '{print $3}') on loopback, $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2/1e6}' /proc/meminfo), $(date -u +%Y-%m-%d)"
echo
"$work/bin/scale" --endpoint "$endpoint" --work "$work/runs" --panto "$work/bin/panto" --panto-sync "$work/bin/panto-sync" --rclone "$rclone" "$@"
