#!/usr/bin/env bash
# bench/importagain.sh: what `panto import` costs when it runs again
# over logs it imported (on a timer, or at each start of a watch), and
# what `panto import --watch` costs while an agent writes to a very long
# session (DESIGN §1, "Importing again reads only the logs that changed",
# and the watch's pace). It writes LOGS Claude Code logs of 30 messages
# in 20 project directories and one log of about BIG_MB megabytes (a
# session that ran for days, mostly tool results), imports them into a
# directory store (STORE=s3: a bucket), then times:
#   - the import again, with the record of imported logs, and with the
#     record removed (every log read and converted, as before the record);
#   - with WATCH_SECS > 0, `panto import --watch` while a turn is
#     appended to the big log every 2 s: imports made, CPU time, max RSS,
#     and how long after the last turn was written it was in the store.
#
#   bench/importagain.sh                                  # LOGS=2000 BIG_MB=200 WATCH_SECS=60
#   LOGS=500 BIG_MB=50 WATCH_SECS=0 bench/importagain.sh  # quicker
#   PANTO_BIN=/tmp/panto-old bench/importagain.sh         # another build, to compare
#   STORE=s3 bench/importagain.sh                         # into a bucket on a MinIO on loopback
#
# Needs: go, python3, GNU time (/usr/bin/time); with STORE=s3 a minio
# binary (bench/minio.sh) and awscli. Put TMPDIR on a tmpfs
# (TMPDIR=/dev/shm) to time the CPU rather than the disk.
set -euo pipefail

cd "$(dirname "$0")/.."
logs=${LOGS:-2000} big_mb=${BIG_MB:-200} watch_secs=${WATCH_SECS:-60}
if [ "${STORE:-dir}" = s3 ]; then
	work_prefix=panto-importagain
	# shellcheck source=bench/minio.sh
	. bench/minio.sh
	aws --endpoint-url "$endpoint" s3 mb s3://importagain >/dev/null
	store=s3://importagain
	export PANTO_ENDPOINT=$endpoint
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/panto-importagain.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	store=$work/sessions
fi

panto=${PANTO_BIN:-}
if [ -z "$panto" ]; then
	go build -o "$work/bin/" ./cmd/panto
	panto=$work/bin/panto
fi

echo "writing $logs logs and one of about $big_mb MB under $work" >&2
python3 - "$work/home/.claude/projects" "$logs" "$big_mb" <<'PY'
import json, os, sys, uuid
root, logs, big_mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pad = "lorem ipsum dolor sit amet " * 60

def session(path, cwd, turns, result):
    sid = os.path.basename(path)[:-len(".jsonl")]
    base = dict(isSidechain=False, userType="external", cwd=cwd, sessionId=sid, version="2.1.7", gitBranch="main")
    usage = dict(input_tokens=10, cache_creation_input_tokens=100, cache_read_input_tokens=1000, output_tokens=20)
    with open(path, "w") as f:
        def w(**d):
            f.write(json.dumps(dict(base, **d), separators=(",", ":")) + "\n")
        parent = None
        for i in range(turns):
            u, a, r, a2 = (str(uuid.uuid4()) for _ in range(4))
            w(parentUuid=parent, uuid=u, timestamp="2026-01-14T19:20:03.207Z", type="user", message=dict(role="user", content=f"prompt {i} {pad[:200]}"))
            if result:
                w(parentUuid=u, uuid=a, timestamp="2026-01-14T19:20:05.000Z", type="assistant", requestId=f"req_{sid}_{i}", message=dict(model="claude-sonnet-4-5", id=f"msg_{sid}_{i}", type="message", role="assistant", content=[dict(type="tool_use", id=f"tu_{i}", name="Read", input=dict(file_path=cwd + "/x.go"))], stop_reason="tool_use", stop_sequence=None, usage=usage))
                w(parentUuid=a, uuid=r, timestamp="2026-01-14T19:20:06.000Z", type="user", message=dict(role="user", content=[dict(type="tool_result", tool_use_id=f"tu_{i}", content=pad * 3)]))
                u = r
            w(parentUuid=u, uuid=a2, timestamp="2026-01-14T19:20:07.000Z", type="assistant", requestId=f"req_{sid}_{i}b", message=dict(model="claude-sonnet-4-5", id=f"msg_{sid}_{i}b", type="message", role="assistant", content=[dict(type="text", text="answer " + pad)], stop_reason="end_turn", stop_sequence=None, usage=usage))
            parent = a2

for n in range(logs):
    d = f"{root}/-home-me-p{n % 20}"
    os.makedirs(d, exist_ok=True)
    session(f"{d}/{uuid.uuid4()}.jsonl", f"/home/me/p{n % 20}", 15, False)
d = f"{root}/-home-me-big"
os.makedirs(d, exist_ok=True)
session(f"{d}/11111111-2222-4333-8444-555555555555.jsonl", "/home/me/big", big_mb * 1000000 // 7640, True)
PY
big=$work/home/.claude/projects/-home-me-big/11111111-2222-4333-8444-555555555555.jsonl
export HOME=$work/home XDG_CACHE_HOME=$work/cache PANTO_STORE=$store

timed() { # label, then the command: prints its wall time, CPU time and max RSS
	local label=$1
	shift
	/usr/bin/time -o "$work/time" -f "%e %U %S %M" "$@" >"$work/out" 2>"$work/err" || {
		cat "$work/err" >&2
		exit 1
	}
	read -r wall user sys rss <"$work/time"
	printf '%-58s %7.2f s wall %7.2f s CPU %8d KB max RSS   %s\n' "$label" "$wall" "$(echo "$user + $sys" | bc)" "$rss" "$(tail -1 "$work/out")"
}

echo "panto: $panto ($(du -sh "$work/home" | cut -f1) of logs)"
timed "first import" "$panto" import
timed "import again" "$panto" import
timed "import again" "$panto" import
rm -rf "$XDG_CACHE_HOME"
timed "import again, the record removed (every log read)" "$panto" import
timed "import again" "$panto" import
timed "import of the big log again" "$panto" import "$big"
rm -rf "$XDG_CACHE_HOME"
timed "import of the big log again, the record removed" "$panto" import "$big"

[ "$watch_secs" -gt 0 ] || exit 0
append() { # a turn: a prompt and its answer, after the log's last line
	python3 - "$big" "$1" <<'PY'
import json, sys, uuid
path, n = sys.argv[1], sys.argv[2]
with open(path, "rb") as f:
    f.seek(max(0, f.seek(0, 2) - 30000))
    last = json.loads(f.read().splitlines()[-1])
u = dict(last, uuid=str(uuid.uuid4()), parentUuid=last["uuid"], type="user", message=dict(role="user", content="more " + n))
u.pop("requestId", None)
a = dict(last, uuid=str(uuid.uuid4()), parentUuid=u["uuid"], requestId="req_w" + n)
a["message"] = dict(last["message"], id="msg_w" + n, content=[dict(type="text", text="answer " + n)], stop_reason="end_turn")
with open(path, "a") as f:
    f.write(json.dumps(u) + "\n" + json.dumps(a) + "\n")
PY
}
messages() { python3 -c "import json,sys; print(json.loads(sys.stdin.readlines()[-1])['messages'])"; }
want=$("$panto" import --json "$big" | messages)
/usr/bin/time -o "$work/time" -f "%U %S %M" "$panto" import --watch --json "$big" >"$work/watch" 2>"$work/watch.err" &
timepid=$!
for _ in $(seq 100); do grep -q watching "$work/watch.err" && break; sleep 0.1; done
turns=0
end=$((SECONDS + watch_secs))
while [ $SECONDS -lt $end ]; do
	append $turns
	turns=$((turns + 1))
	sleep 2
done
written=$(date +%s.%N)
for _ in $(seq 1200); do
	last=$(tail -1 "$work/watch" 2>/dev/null | messages 2>/dev/null || echo 0)
	[ "$last" -ge $((want + 2 * turns)) ] && break
	sleep 0.1
done
landed=$(date +%s.%N)
sleep 2
idle=$(awk '/VmRSS/ {print $2}' "/proc/$(pgrep -P $timepid)/status" 2>/dev/null || echo "?")
pkill -TERM -P $timepid
wait $timepid || true
read -r user sys rss <"$work/time"
printf 'import --watch, %d turns appended to the big log over %d s: %d imports, %.1f s CPU, %d KB max RSS (%s KB 2 s after the last), the last turn in the store %.1f s after it was written\n' \
	"$turns" "$watch_secs" "$(grep -c '"appended"' "$work/watch")" "$(echo "$user + $sys" | bc)" "$rss" "$idle" "$(echo "$landed - $written" | bc)"
