#!/usr/bin/env bash
# bench/importpage.sh: what `panto sessions` in a work tree reads once
# other agents' sessions run in it are imported (DESIGN §1 and §P3). It
# rewrites the importer's Claude Code fixture into 94 logs: 12 run at the
# root of a work tree a/app (origin git@host.test:team/app.git), 12 in
# its services/api, 70 in 70 scratch directories (newer), imports them
# into a new bucket on a MinIO on loopback, then runs the page with the
# request trace on in a/app and in a clone of the same repository at
# another path (b/work/app), each twice in a new home, and prints the
# requests, the bytes received and the rows of each.
#
#   bench/importpage.sh                        # the panto of this tree
#   PANTO_BIN=/tmp/panto-old bench/importpage.sh   # another build, to compare
#
# Needs: go, a minio binary (bench/minio.sh), curl, python3, awscli.
set -euo pipefail

cd "$(dirname "$0")/.."
work_prefix=panto-importpage
# shellcheck source=bench/minio.sh
. bench/minio.sh

panto=${PANTO_BIN:-}
if [ -z "$panto" ]; then
	go build -o "$work/bin/" ./cmd/panto
	panto=$work/bin/panto
fi
fixture=$PWD/importer/testdata/claude-code.jsonl

tree() { # dir origin: a git work tree as git clone leaves it
	mkdir -p "$1/.git"
	printf '[core]\n\trepositoryformatversion = 0\n[remote "origin"]\n\turl = %s\n' "$2" >"$1/.git/config"
	echo 'ref: refs/heads/main' >"$1/.git/HEAD"
}
w=$work/a/app clone=$work/b/work/app
tree "$w" git@host.test:team/app.git
tree "$clone" https://host.test/team/app
mkdir -p "$w/services/api" "$work/logs" "$work/home"
n=0
log() { # dir date: one Claude Code log run in dir on that day
	n=$((n + 1))
	sed -e "s|/home/me/app|$1|g" -e "s|5e0c1a2b-0000-4000-8000-00000000c0de|5e0c1a2b-0000-4000-8000-$(printf %012d $n)|g" \
		-e "s|2026-01-14|$2|g" "$fixture" >"$work/logs/$n.jsonl"
}
for _ in $(seq 1 12); do log "$w" 2026-01-10; log "$w/services/api" 2026-01-11; done
for i in $(seq 1 70); do mkdir -p "$work/scratch/$i"; log "$work/scratch/$i" 2026-01-20; done

bucket=importpage
aws --endpoint-url "$endpoint" s3 mb "s3://$bucket" >/dev/null
HOME=$work/home "$panto" import --store "s3://$bucket" --endpoint "$endpoint" "$work/logs" | tail -1
for dir in "$w" "$clone"; do
	for run in 1 2; do
		rm -rf "$work/home" && mkdir -p "$work/home"
		(cd "$dir" && HOME=$work/home "$panto" -v sessions --direct --store "s3://$bucket" --endpoint "$endpoint" >"$work/out" 2>"$work/err")
		requests=$(grep -c 'msg=s3' "$work/err" || true)
		received=$(grep 'msg=s3' "$work/err" | grep -o 'received=[0-9]*' | cut -d= -f2 | paste -sd+ - | bc)
		rows=$(grep -c '' "$work/out" || true)
		rows=$((rows > 0 ? rows - 1 : 0)) # less the header
		echo "panto sessions in ${dir#"$work"/} (run $run): $requests requests, ${received:-0} bytes received, $rows rows"
	done
done
