#!/usr/bin/env bash
# Capture loss with indexing on, --frame-size 32KiB vs 16KiB, same binary, interleaved rounds.
# (issue 11): the bench-query loss round (3 M packets of its traffic at gen's top speed, capturer on CPU1, gen on
# CPU0, --compress auto -C 256MB, indexing on), one binary; prints each round's drops and files indexed live.
# Environment: RINGCAP, ROUNDS (3), BENCH_DIR (/var/tmp/ringcap-frame-loss). Run as root.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/common.sh
source scripts/testbed.sh
resolve_ringcap; R="$RINGCAP"; D="${BENCH_DIR:-/var/tmp/ringcap-frame-loss}"; ROUNDS="${ROUNDS:-3}"
trap testbed_down EXIT
testbed_up ""
field() { python3 - "$1" "$2" <<'PY'
import json,sys
s=None
for l in open(sys.argv[1],errors="replace"):
    l=l.strip()
    if l.startswith("{"):
        try: d=json.loads(l)
        except Exception: continue
        if "captured" in d: s=d
v=s
for k in sys.argv[2].split("."): v=(v or {}).get(k) if isinstance(v,dict) else None
print(v)
PY
}
for r in $(seq 1 "$ROUNDS"); do for fs in 32KiB 16KiB; do
  rm -rf "$D"; mkdir -p "$D"
  ip netns exec "$RX_NS" taskset -c 1 "$R" capture -i "$RX_IF" -w "$D/cap" -C 256MB --compress auto --frame-size "$fs" -q --json >"$D.out" 2>"$D.log" &
  cp=$!; sleep 1.5
  t0=$(date +%s.%N)
  ip netns exec "$TX_NS" taskset -c 0 "$R" gen -i "$TX_IF" -n 3000000 --seed 1000 --src-ip 10.0.0.0-10.0.3.255 --src-ip-order random --src-port 1024-1123 --src-port-order random --dst-ip 10.9.0.1 --dst-port 5001 --payload half --cpus 0 -q >/dev/null 2>&1
  sleep 2; kill -INT "$cp"; wait "$cp" || true
  echo "round $r $fs captured $(field $D.log captured) kernel $(field $D.log drops.kernel) storage $(field $D.log drops.storage) indexed $(field $D.log files.indexed) unindexed $(field $D.log files.unindexed) idx_ns $(field $D.log files.indexer_cpu_ns) idx_pk $(field $D.log files.indexer_packets)"
  rm -rf "$D"; sync
done; done
