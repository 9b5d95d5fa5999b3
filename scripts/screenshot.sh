#!/usr/bin/env bash
# Screenshot of a bench report (DIR/report.html) in headless Chromium, to look at it as a reader would.
# usage: scripts/screenshot.sh DIR [OUT.png] [HEIGHT]   (default OUT: DIR/report.png, HEIGHT: 2400 px)
# Needs Chromium: apt-get install -y chromium.
set -euo pipefail
dir=${1:?usage: scripts/screenshot.sh DIR [OUT.png] [HEIGHT]}
out=${2:-$dir/report.png}
height=${3:-2400}
[ -f "$dir/report.html" ] || { echo "no $dir/report.html: run \`ringcap report $dir\` first" >&2; exit 2; }
chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$chrome" ] || { echo "Chromium not found: apt-get install -y chromium" >&2; exit 2; }
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# The flags keep Chromium off the network (this machine has none) and out of any sandbox it cannot set up as root.
"$chrome" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --hide-scrollbars --user-data-dir="$profile" --screenshot="$(realpath -m "$out")" \
  --window-size=1280,"$height" "file://$(realpath "$dir/report.html")" 2>/dev/null
echo "$out"
