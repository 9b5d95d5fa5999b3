#!/usr/bin/env bash
# make soak: a long capture that exercises everything that accumulates (issue 12 item 14). Not in CI.
#
# On the throwaway testbed, `ringcap gen` alternates bursts and pauses (--burst) for MINUTES. In the Rx namespace
# `ringcap capture` writes rotated (-C), compressed (--compress auto) files to a small tmpfs under a disk budget
# (retention deletes old files all along) and sends header records to a `ringcap collect` on loopback.
# Every minute a row: RSS, open fds and threads of the capture and of the collector (they must stay flat).
# At the end: every file left valid (zstd -t, then capinfos), loss 0 (offered = captured + nothing dropped), every
# record the probe got acked stored in the collector's Parquet (counted by DuckDB).
#
# Environment: MINUTES (60), PPS (20000), BURST (on=20s,off=10s), STORE_MB (tmpfs size, 256), BUDGET (160MB),
#   RINGCAP, OUT_DIR (bench-out). Output: Markdown on stdout for BENCHMARKS.md; exit 1 if a check failed.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=scripts/testbed.sh
source scripts/testbed.sh
# shellcheck source=scripts/bench/common.sh
source scripts/bench/common.sh
resolve_ringcap

MINUTES="${MINUTES:-60}"
PPS="${PPS:-20000}"
BURST="${BURST:-on=20s,off=10s}"
STORE_MB="${STORE_MB:-256}"
BUDGET="${BUDGET:-160MB}"
[ "$(id -u)" = 0 ] || die "soak needs root (network namespaces, tmpfs)"
for t in zstd capinfos python3; do have "$t" || die "$t is missing: run 'make deps'"; done
python3 -c 'import duckdb' 2>/dev/null || die "python3 duckdb is missing: run 'make deps'"

WORK="$(mktemp -d /var/tmp/ringcap-soak.XXXXXX)"
STORE="$WORK/store"; RECORDS="$WORK/records"; KEY="$WORK/key"
mkdir -p "$STORE" "$RECORDS"
mount -t tmpfs -o "size=${STORE_MB}m,mode=0700" ringcap-soak "$STORE"
on_exit() {
  bench_cleanup
  umount "$STORE" 2>/dev/null || true
  say "logs in $WORK"
}
trap on_exit EXIT
trap 'say "interrupted"; exit 130' INT TERM

(umask 077 && head -c 32 /dev/urandom >"$KEY")
testbed_up ""

ip netns exec "$RX_NS" ip link set lo up
ip netns exec "$RX_NS" "$RINGCAP" collect --listen tcp://127.0.0.1:0 -o "$RECORDS" --key "$KEY" --json -q \
  --rotate-seconds 300 >"$WORK/collect.json" 2>"$WORK/collect.log" &
COLLECT=$!; BG_PIDS+=("$COLLECT")
for ((i = 0; i < 200; i++)); do grep -q "listening on" "$WORK/collect.log" && break; sleep 0.05; done
PORT="$(grep -o 'tcp://127.0.0.1:[0-9]*' "$WORK/collect.log" | head -1 | sed 's/.*://')"
[ -n "$PORT" ] || die "the collector did not start: $(cat "$WORK/collect.log")"

ip netns exec "$RX_NS" "$RINGCAP" capture -i "$RX_IF" -w "$STORE/cap" -C 8MB --compress auto \
  --disk-budget "$BUDGET" --records "tcp://127.0.0.1:$PORT" --key "$KEY" --json -q \
  >"$WORK/capture.out" 2>"$WORK/capture.log" &
CAPTURE=$!; BG_PIDS+=("$CAPTURE")
wait_ready "$CAPTURE" "$WORK/capture.log" "listening on" || die "the capture did not start: $(tail -3 "$WORK/capture.log")"

read -r P0 _ < <(rx_counters)
ip netns exec "$TX_NS" "$RINGCAP" gen -i "$TX_IF" --pps "$PPS" --burst "$BURST" --duration "${MINUTES}m" \
  --dist imix --payload half -q >"$WORK/gen.log" 2>&1 &
GEN=$!; BG_PIDS+=("$GEN")

proc_row() {  # PID -> "RSS_KiB fds threads"
  local pid="$1"
  echo "$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status") $(find "/proc/$pid/fd" -mindepth 1 2>/dev/null | wc -l)" \
    "$(awk '/^Threads:/ { print $2 }' "/proc/$pid/status")"
}
echo "minute,capture_rss_kib,capture_fds,capture_threads,collect_rss_kib,collect_fds,collect_threads,files,store_mb" >"$WORK/samples.csv"
minute=0
while kill -0 "$GEN" 2>/dev/null; do
  sleep 60 & wait $! || true
  minute=$((minute + 1))
  kill -0 "$CAPTURE" 2>/dev/null || die "the capture died: $(tail -3 "$WORK/capture.log")"
  files="$(find "$STORE" -maxdepth 1 -name 'cap-*' ! -name '.*' ! -name '*.idx' | wc -l)"
  used="$(df -m --output=used "$STORE" | tail -1 | tr -d ' ')"
  echo "$minute,$(proc_row "$CAPTURE" | tr ' ' ','),$(proc_row "$COLLECT" | tr ' ' ','),$files,$used" >>"$WORK/samples.csv"
  progress "minute $minute: $(tail -1 "$WORK/samples.csv")"
done
wait "$GEN" || die "the generator failed: $(tail -3 "$WORK/gen.log")"
sleep 2
read -r P1 _ < <(rx_counters)
stop_pid "$CAPTURE"; wait "$CAPTURE" || die "the capture exited with an error: $(tail -3 "$WORK/capture.log")"
sleep 2   # the probe's last acks
stop_pid "$COLLECT"; wait "$COLLECT" || true

python3 - "$WORK" "$STORE" "$RECORDS" "$((P1 - P0))" "$MINUTES" "$PPS" "$BURST" "$BUDGET" <<'EOF'
import csv, glob, json, os, subprocess, sys
work, store, records, offered, minutes, pps, burst, budget = sys.argv[1:]
offered = int(offered)
summary = next(json.loads(l) for l in open(f"{work}/capture.log") if '"type":"summary"' in l)
samples = list(csv.DictReader(open(f"{work}/samples.csv")))
bad = []
files = sorted(f for f in glob.glob(f"{store}/cap-*") if not f.endswith(".idx"))
for f in files:
    if subprocess.run(["zstd", "-tq", f], capture_output=True).returncode != 0:
        bad.append(f)
drops = summary["drops"]
lost = sum(v for v in drops.values() if isinstance(v, int))
recs = summary.get("records", {})
acked = sum(c.get("acked", 0) for c in recs.get("collectors", []))
import duckdb
stored = duckdb.sql(f"select count(*) from read_parquet('{records}/*.parquet')").fetchall()[0][0] if glob.glob(f"{records}/*.parquet") else 0
def flat(col):
    v = [int(s[col]) for s in samples]
    return f"{v[0]} → {v[-1]} (max {max(v)})" if v else "–"
print(f"### Soak ({minutes} min, {pps} pps, bursts {burst}, budget {budget})\n")
print("| what | first minute → last (max) |\n|---|---|")
for col in ["capture_rss_kib", "capture_fds", "capture_threads", "collect_rss_kib", "collect_fds", "collect_threads", "files", "store_mb"]:
    print(f"| {col} | {flat(col)} |")
w = summary.get("files", {})
print(f"\n- offered {offered}, captured {summary['captured']}, drops by stage {drops}; files complete "
      f"{w.get('complete')}, deleted by the budget {w.get('deleted')}, left {len(files)} (invalid: {len(bad)})")
print(f"- records: acked {acked}, stored in Parquet {stored}")
ok = not bad and lost == 0 and summary["captured"] == offered and stored >= acked and acked > 0
print(f"- verdict: {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
EOF
