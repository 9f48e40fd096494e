#!/usr/bin/env bash
# Writes scripts/nginx.conf with its placeholders filled, to stdout (docs/deploy.md "The front
# door"). `make cluster` and `make hosts` use it; on a real host run it once and install the result:
#
#   LISTEN=0.0.0.0:80 SERVERS="10.0.1.11:3000 10.0.1.12:3000 10.0.1.13:3000" \
#   SITE=/srv/seckill/site PREFIX=/var/lib/seckill-nginx REAL_IP_FROM="10.0.0.0/24" \
#     scripts/nginx-render.sh >/etc/nginx/seckill.conf
#
#   LISTEN        address:port nginx listens on                           (required)
#   SERVERS       the instances, address:port, space-separated              (required)
#   SITE          the site folder (the image's /app/site): /pkg/ is served from it (required)
#   PREFIX        a folder of nginx's own: pid, logs, temp files, the cache (required; made here)
#   REAL_IP_FROM  proxies whose X-Forwarded-For is believed (a CDN's, a cloud load balancer's
#                 ranges), space-separated addresses or CIDR ranges; empty: none   (default empty)
#   BROTLI_MODULE the brotli_static module, empty for none
#                 (default: Debian's libnginx-mod-http-brotli-static)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for v in LISTEN SERVERS SITE PREFIX; do
  [ -n "${!v:-}" ] || { echo "nginx-render: $v is not set (see the head of $0)" >&2; exit 2; }
done
BROTLI_MODULE=${BROTLI_MODULE-/usr/lib/nginx/modules/ngx_http_brotli_static_module.so}
mkdir -p "$PREFIX/logs" "$PREFIX/tmp" "$PREFIX/cache"
servers=""
real_ip=""
for s in $SERVERS; do servers+="        server $s max_fails=1 fail_timeout=2s;"$'\n'; done
for s in ${REAL_IP_FROM:-}; do real_ip+="    set_real_ip_from $s;"$'\n'; done
module=""
[ -z "$BROTLI_MODULE" ] || module="load_module $BROTLI_MODULE;"
S_SERVERS="$servers" S_REAL_IP="$real_ip" S_MODULE="$module" S_LISTEN="$LISTEN" S_SITE="$(cd "$SITE" && pwd)" \
  S_PREFIX="$(cd "$PREFIX" && pwd)" S_PROXY="$(cd "$PREFIX" && pwd)/proxy.conf" \
  perl -pe 's/^\s*\@SERVERS\@\n/$ENV{S_SERVERS}/; s/^\s*\@REAL_IP_FROM\@\n/$ENV{S_REAL_IP}/;
            s/^\@BROTLI_MODULE\@/$ENV{S_MODULE}/; s/\@(LISTEN|SITE|PREFIX)\@/$ENV{"S_$1"}/g;
            $_ = "" if !$ENV{S_MODULE} && /brotli_static/' \
    "$here/nginx.conf"
cp "$here/nginx-proxy.conf" "$PREFIX/proxy.conf"
