#!/usr/bin/env bash
# How much the acceptance perf check's Python client can measure on this machine: the same client against
# (1) a server that answers at once with a body of optmark's answer size, (1b) the same answering one
# event-loop turn later, (1c) the same with optmark's header set, (2) the check's naive server, (3) optmark. The check wants (3) >= 1.5 x (2); it
# can never show more than (1) / (2), and a server that does its work off the reading thread no more than
# (1b) / (2).
#   bash bench/check-ceiling/run.sh [IMAGE]      (default: the check's image, made from ../shared/natural)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
img=${1:-$dir/big.jpg}
if [ -z "${1:-}" ]; then
  node -e "const s=require('sharp');const d='../shared/natural';const f=require('fs').readdirSync(d).filter(x=>x.endsWith('.png')).sort()[0];s(d+'/'+f).resize(4000,3000).jpeg({quality:92}).toFile(process.argv[1]).then(()=>0)" "$img"
fi
size=$(stat -c %s "$img")
node bench/check-ceiling/instant.cjs 18931 $((size * 4 / 3 + 200)) & sleep 1
echo "instant server: $(python3 bench/check-ceiling/client.py "$img" 18931)"
node bench/check-ceiling/instant.cjs 18934 $((size * 4 / 3 + 200)) next-turn & sleep 1
echo "next turn:      $(python3 bench/check-ceiling/client.py "$img" 18934)"
node bench/check-ceiling/instant.cjs 18935 $((size * 4 / 3 + 200)) optmark-headers & sleep 1
echo "+ its headers:  $(python3 bench/check-ceiling/client.py "$img" 18935)"
node ../shared/checks/lib/naive.js 18932 & sleep 1
echo "naive server:   $(python3 bench/check-ceiling/client.py "$img" 18932)"
node -e "
import('./dist/src/store/index.js').then(({ Store, MAX_LIMIT }) => {
  const s = Store.open({ dataDir: '$dir/data', defaultProtectLimit: MAX_LIMIT, defaultVerifyLimit: MAX_LIMIT });
  s.createAccount('c', 'pro'); s.setLimits('c', { protect: MAX_LIMIT, verify: MAX_LIMIT });
  require('fs').writeFileSync('$dir/key', s.issueKey('c').key); s.close();
})"
OPTMARK_PORT=18933 OPTMARK_DATA_DIR=$dir/data OPTMARK_BOOTSTRAP=off node dist/src/cli.js serve > "$dir/server.log" 2>&1 &
for _ in $(seq 50); do curl -sf localhost:18933/readyz > /dev/null && break; sleep 0.2; done
echo "optmark:        $(python3 bench/check-ceiling/client.py "$img" 18933 "$(cat "$dir/key")")"
