#!/usr/bin/env bash
# bench/claimpage.sh: what `panto sessions` reads in a work tree whose
# root holds sessions that know only their directory (DESIGN §P3,
# Claims). It rewrites the importer's Claude Code fixture into 82 logs:
# 12 run in a/app before it was a git tree (or imported on a machine
# without the tree) and 70 in scratch directories (newer), imports them
# into a new bucket on a MinIO on loopback, makes a/app a work tree
# (origin git@host.test:team/app.git), and runs the page with the
# request trace on, twice in a new home. Then a machine that has the
# tree imports one more log run in it (a session of the tree's project,
# whose fold claims the root's head), and the page runs twice again.
#
#   bench/claimpage.sh                            # the panto of this tree
#   PANTO_BIN=/tmp/panto-old bench/claimpage.sh   # another build, to compare
#
# Needs: go, a minio binary (bench/minio.sh), curl, python3, awscli.
set -euo pipefail

cd "$(dirname "$0")/.."
work_prefix=panto-claimpage
# shellcheck source=bench/minio.sh
. bench/minio.sh

panto=${PANTO_BIN:-}
if [ -z "$panto" ]; then
	go build -o "$work/bin/" ./cmd/panto
	panto=$work/bin/panto
fi
fixture=$PWD/importer/testdata/claude-code.jsonl

w=$work/a/app
mkdir -p "$w" "$work/logs" "$work/more" "$work/home"
n=0
log() { # dir date out: one Claude Code log run in dir on that day
	n=$((n + 1))
	sed -e "s|/home/me/app|$1|g" -e "s|5e0c1a2b-0000-4000-8000-00000000c0de|5e0c1a2b-0000-4000-8000-$(printf %012d $n)|g" \
		-e "s|2026-01-14|$2|g" "$fixture" >"$3/$n.jsonl"
}
for _ in $(seq 1 12); do log "$w" 2026-01-10 "$work/logs"; done
for i in $(seq 1 70); do mkdir -p "$work/scratch/$i"; log "$work/scratch/$i" 2026-01-20 "$work/logs"; done

bucket=claimpage
aws --endpoint-url "$endpoint" s3 mb "s3://$bucket" >/dev/null
HOME=$work/home "$panto" import --store "s3://$bucket" --endpoint "$endpoint" "$work/logs" | tail -1

# a/app becomes a git work tree, as git init and git remote add leave it.
mkdir -p "$w/.git"
printf '[core]\n\trepositoryformatversion = 0\n[remote "origin"]\n\turl = git@host.test:team/app.git\n' >"$w/.git/config"
echo 'ref: refs/heads/main' >"$w/.git/HEAD"

page() { # when
	for run in 1 2; do
		rm -rf "$work/home" && mkdir -p "$work/home"
		(cd "$w" && HOME=$work/home "$panto" -v sessions --direct --store "s3://$bucket" --endpoint "$endpoint" >"$work/out" 2>"$work/err")
		requests=$(grep -c 'msg=s3' "$work/err" || true)
		received=$(grep 'msg=s3' "$work/err" | grep -o 'received=[0-9]*' | cut -d= -f2 | paste -sd+ - | bc)
		rows=$(grep -c '' "$work/out" || true)
		rows=$((rows > 0 ? rows - 1 : 0)) # less the header
		echo "panto sessions in a/app, $1 (run $run): $requests requests, ${received:-0} bytes received, $rows rows"
	done
}
page "before a session of the tree's project"
log "$w" 2026-01-25 "$work/more"
HOME=$work/home "$panto" import --store "s3://$bucket" --endpoint "$endpoint" "$work/more" | tail -1
page "after an import in the tree"
