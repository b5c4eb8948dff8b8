# bench/minio.sh: sourced by the benchmark scripts. It makes a temp dir
# ($work, under $TMPDIR, else /tmp; removed at exit), starts one MinIO
# on a free loopback port ($endpoint, its metrics public; stopped at
# exit), and exports the AWS variables that reach it. The caller sets
# work_prefix first (the temp dir's name) and cds to the repository root.

work=$(mktemp -d "${TMPDIR:-/tmp}/${work_prefix:-panto-bench}.XXXXXX")
minio_pid=
cleanup() {
	if [ -n "$minio_pid" ]; then kill "$minio_pid" 2>/dev/null || true; wait "$minio_pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

minio=${PANTO_MINIO:-$(command -v minio || echo "$(go env GOPATH)/bin/minio")}
[ -x "$minio" ] || { echo "bench: no minio binary; run make minio" >&2; exit 1; }
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(freeport)
endpoint=http://127.0.0.1:$port
export AWS_ACCESS_KEY_ID=panto-bench AWS_SECRET_ACCESS_KEY=panto-bench-secret AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
MINIO_ROOT_USER=$AWS_ACCESS_KEY_ID MINIO_ROOT_PASSWORD=$AWS_SECRET_ACCESS_KEY MINIO_PROMETHEUS_AUTH_TYPE=public \
	MINIO_BROWSER=off MINIO_UPDATE=off MINIO_REGION=us-east-1 \
	"$minio" server --quiet --address "127.0.0.1:$port" --console-address "127.0.0.1:$(freeport)" "$work/minio" >"$work/minio.log" 2>&1 &
minio_pid=$!
for _ in $(seq 1 300); do curl -sf "$endpoint/minio/health/live" >/dev/null && break; sleep 0.2; done
curl -sf "$endpoint/minio/health/live" >/dev/null || { echo "bench: minio did not start; see $work/minio.log" >&2; cat "$work/minio.log" >&2; exit 1; }
