#!/bin/bash
# Dev test bed for fwlab-engine: client -> DUT (router) -> server in network
# namespaces named ${PREFIX}c, ${PREFIX}d, ${PREFIX}s (default prefix fwl-engdev-).
# Addresses only in 198.18.0.0/15 and 2001:2::/48. Touches nothing in the root
# namespace. Usage: testbed.sh up|down|env   (needs root)
set -euo pipefail
P=${PREFIX:-fwl-engdev-}
C=${P}c; D=${P}d; S=${P}s
MAC_C=02:fe:00:00:00:01; MAC_D0=02:fe:00:00:00:02; MAC_D1=02:fe:00:00:01:01; MAC_S=02:fe:00:00:01:02

down() {
  for ns in "$C" "$D" "$S"; do
    if ip netns list | grep -qw "$ns"; then
      for pid in $(ip netns pids "$ns" 2>/dev/null); do
        # only our own engine processes are expected inside
        if [ "$(cat /proc/$pid/comm 2>/dev/null)" = "fwlab-engine" ] || [ "$(cat /proc/$pid/comm 2>/dev/null)" = "trafgen" ]; then
          kill "$pid" 2>/dev/null || true
        fi
      done
      sleep 0.2
      ip netns del "$ns"
    fi
  done
}

up() {
  down
  for ns in "$C" "$D" "$S"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
  ip link add c0 netns "$C" address $MAC_C type veth peer name d0 netns "$D" address $MAC_D0
  ip link add d1 netns "$D" address $MAC_D1 type veth peer name s0 netns "$S" address $MAC_S
  ip -n "$C" addr add 198.18.0.1/24 dev c0; ip -n "$C" addr add 2001:2:0:0::1/64 dev c0 nodad
  ip -n "$D" addr add 198.18.0.2/24 dev d0; ip -n "$D" addr add 2001:2:0:0::2/64 dev d0 nodad
  ip -n "$D" addr add 198.18.1.1/24 dev d1; ip -n "$D" addr add 2001:2:0:1::1/64 dev d1 nodad
  ip -n "$S" addr add 198.18.1.2/24 dev s0; ip -n "$S" addr add 2001:2:0:1::2/64 dev s0 nodad
  for ns in "$C" "$D" "$S"; do
    for l in $(ip -n "$ns" -o link show | awk -F': ' '{print $2}' | cut -d@ -f1); do ip -n "$ns" link set "$l" up; done
    ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
  done
  for l in d0 d1; do ip netns exec "$D" sysctl -qw net.ipv4.conf.$l.rp_filter=0; done
  ip netns exec "$S" sysctl -qw net.ipv4.conf.s0.rp_filter=0
  ip netns exec "$D" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
  ip -n "$C" route add default via 198.18.0.2; ip -n "$C" -6 route add default via 2001:2::2
  ip -n "$S" route add default via 198.18.1.1; ip -n "$S" -6 route add default via 2001:2:0:1::1
  # static neighbours: no ARP/ND needed for spoofed or first packets
  ip -n "$C" neigh replace 198.18.0.2 lladdr $MAC_D0 dev c0 nud permanent
  ip -n "$C" -6 neigh replace 2001:2::2 lladdr $MAC_D0 dev c0 nud permanent
  ip -n "$D" neigh replace 198.18.1.2 lladdr $MAC_S dev d1 nud permanent
  ip -n "$D" -6 neigh replace 2001:2:0:1::2 lladdr $MAC_S dev d1 nud permanent
  ip -n "$D" neigh replace 198.18.0.1 lladdr $MAC_C dev d0 nud permanent
  ip -n "$S" neigh replace 198.18.1.1 lladdr $MAC_D1 dev s0 nud permanent
  ip -n "$S" -6 neigh replace 2001:2:0:1::1 lladdr $MAC_D1 dev s0 nud permanent
  ip -n "$D" -6 neigh replace 2001:2::1 lladdr $MAC_C dev d0 nud permanent
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) echo "C=$C D=$D S=$S DUT_MAC=$MAC_D0 CLIENT_IF=c0 SERVER_IF=s0 DST4=198.18.1.2 DST6=2001:2:0:1::2" ;;
  *) echo "usage: $0 up|down|env" >&2; exit 2 ;;
esac
