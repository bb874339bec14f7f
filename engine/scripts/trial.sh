#!/bin/bash
# One send/recv trial on the dev bed: trial.sh "<recv flags>" "<send flags>"
# Prints a one-line summary of both JSON results (full JSON in /tmp/fwl-engdev-*.json).
set -euo pipefail
B=${B:-$(dirname "$0")/../target/release/fwlab-engine}
P=${PREFIX:-fwl-engdev-}
R=/tmp/fwl-engdev-recv.json; SJ=/tmp/fwl-engdev-send.json; RF=/tmp/fwl-engdev-ready
rm -f "$RF"
ip netns exec ${P}s "$B" recv $1 --ready-file "$RF" > "$R" 2>/tmp/fwl-engdev-recv.err &
rp=$!
for i in $(seq 100); do [ -e "$RF" ] && break; sleep 0.05; done
ip netns exec ${P}c "$B" send $2 > "$SJ"
wait $rp
python3 - "$SJ" "$R" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2])); t = r["total"]; l = t["latency_ns"]
print(f"send: backend={s['backend']} intended={s['intended_count']} offered={s['offered_count']} "
      f"pps={s['achieved_pps']:.0f} short={s['generator_short']} errors={s['errors']} cpu={s['cpu_pinning']}")
print(f"recv: received={t['received']} lost={t['lost']} reord={t['reordered']} dup={t['duplicated']} "
      f"rx_pps={t['rx_pps']:.0f} drops={r['socket_drops']} lat p50/p99/max={l['p50']}/{l['p99']}/{l['max']} ns "
      f"jitter={t['jitter_ns']:.0f} ns stop={r['stop_reason']} fwd_ratio={t['unique']/max(1,s['offered_count']):.4f}")
PY
