#!/usr/bin/env bash
# Explicit, opt-in step (make netperf): add Debian's non-free component for netperf.
# It reuses the URI and suite of this machine's own Debian source and writes one new file,
# /etc/apt/sources.list.d/fwlab-non-free.sources; delete that file to undo.
set -euo pipefail
src=/etc/apt/sources.list.d/debian.sources
uri=$(awk '/^URIs:/{print $2; exit}' "$src" 2>/dev/null || true)
suite=$(awk '/^Suites:/{print $2; exit}' "$src" 2>/dev/null || true)
if [ -z "$uri" ] || [ -z "$suite" ]; then
  line=$(grep -hE '^deb [a-z]+://' /etc/apt/sources.list 2>/dev/null | head -1 || true)
  uri=$(awk '{print $2}' <<<"$line"); suite=$(awk '{print $3}' <<<"$line")
fi
[ -n "$uri" ] && [ -n "$suite" ] || { echo "no Debian source found to extend; add non-free by hand" >&2; exit 2; }
printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
  "$uri" "$suite" > /etc/apt/sources.list.d/fwlab-non-free.sources
echo "added /etc/apt/sources.list.d/fwlab-non-free.sources ($uri $suite non-free)"
