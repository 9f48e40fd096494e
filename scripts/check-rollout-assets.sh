#!/usr/bin/env bash
# Assets across a rollout, on the hosts (docs/deploy.md "Upgrades"): with instance OLD on the
# release before and NEW on this one, a page that OLD rendered gets each of its assets from every
# instance and from the edge (this release's image carries those it lacks in pkg-previous),
# found and `immutable`, the same bytes everywhere, brotli where asked; NEW's assets come from the
# edge, and an instance without an asset answers 404 that nothing keeps. Exit 3 when the two
# releases' pages name the same assets (nothing to carry: this proves nothing).
#
#   scripts/check-rollout-assets.sh OLD NEW [--old-keeps-404s]
#
# OLD, NEW: app1, app2 or app3. The third instance is checked as OLD's page's server too.
# --old-keeps-404s: the release before predates `no-store` on a missing asset (a real earlier
# release, `make upgrade-check`): its 404 is not checked for it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
old=${1:?OLD NEW}; new=${2:?OLD NEW}; lenient=${3:-}
hosts="$root/scripts/hosts.sh"
immutable="public, max-age=31536000, immutable"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "rollout assets: FAILED: $*" >&2; failures=$((failures + 1)); }

url() { echo "http://$("$hosts" addr "$1")$([ "$1" = edge ] || echo :3000)"; }
# The /pkg/ assets a page names (the stylesheet, the script, the wasm).
assets() { curl -fsS "$(url "$1")/" | grep -oE '/pkg/[^"'"'"' ]+' | sort -u; }
# GET of PATH from HOST: "status cache-control content-encoding sha256".
fetch() { # host path [accept-encoding]
  local h="$work/h" b="$work/b"
  curl -sS -o "$b" -D "$h" -H "Accept-Encoding: ${3:-identity}" "$(url "$1")$2" >/dev/null
  printf '%s|%s|%s|%s\n' "$(awk 'NR == 1 {print $2}' "$h")" \
    "$(awk -F': ' 'tolower($1) == "cache-control" {sub(/\r$/, "", $2); print $2}' "$h")" \
    "$(awk -F': ' 'tolower($1) == "content-encoding" {sub(/\r$/, "", $2); print $2}' "$h")" \
    "$(sha256sum "$b" | cut -c1-16)"
}

mapfile -t old_assets < <(assets "$old")
mapfile -t new_assets < <(assets "$new")
[ "${#old_assets[@]}" -ge 3 ] || fail "$old's page names ${#old_assets[@]} assets: ${old_assets[*]}"
[ "${#new_assets[@]}" -ge 3 ] || fail "$new's page names ${#new_assets[@]} assets: ${new_assets[*]}"
# The assets only the release before's pages name: those this release must carry.
mapfile -t carried < <(comm -23 <(printf '%s\n' "${old_assets[@]}") <(printf '%s\n' "${new_assets[@]}"))
mapfile -t newer < <(comm -13 <(printf '%s\n' "${old_assets[@]}") <(printf '%s\n' "${new_assets[@]}"))
if [ "${#carried[@]}" = 0 ]; then
  echo "rollout assets: the two releases' pages name the same assets: nothing to carry, nothing checked" >&2
  exit 3
fi

third=$(printf '%s\n' app1 app2 app3 | grep -vx "$old" | grep -vx "$new")
checked=0
for a in "${old_assets[@]}"; do
  first=$(fetch "$old" "$a")
  [ "${first%%|*}" = 200 ] || fail "$old does not serve its own page's $a: $first"
  for h in "$new" "$third" edge; do
    got=$(fetch "$h" "$a")
    IFS='|' read -r status cache _ sha <<<"$got"
    [ "$status" = 200 ] || { fail "$h answers $a (a page of $old's release): $got"; continue; }
    [ "$cache" = "$immutable" ] || fail "$h serves $a with Cache-Control '$cache'"
    [ "$sha" = "${first##*|}" ] || fail "$h serves other bytes for $a than $old"
    checked=$((checked + 1))
  done
  case $a in
    *.js | *.wasm | *.css)
      for h in "$new" edge; do
        got=$(fetch "$h" "$a" br)
        IFS='|' read -r status _ encoding _ <<<"$got"
        [ "$status/$encoding" = 200/br ] || fail "$h serves $a without its brotli copy: $got"
      done ;;
  esac
done
for a in "${newer[@]}"; do
  got=$(fetch edge "$a")
  [ "${got%%|*}" = 200 ] || fail "the edge does not serve $a (a page of $new's release): $got"
  got=$(fetch "$old" "$a")
  IFS='|' read -r status cache _ _ <<<"$got"
  [ "$status" = 404 ] || fail "$old (the release before) answers $a of the next release: $got"
  [ -n "$lenient" ] || [ "$cache" = no-store ] || fail "$old's 404 for $a is kept: Cache-Control '$cache'"
done
missing="/pkg/seckill.0000000000000000000000.css"
for h in "$new" edge; do
  got=$(fetch "$h" "$missing")
  IFS='|' read -r status cache _ _ <<<"$got"
  [ "$status|$cache" = "404|no-store" ] || fail "$h answers a missing asset with $got (404, no-store expected)"
done

if ((failures)); then exit 1; fi
echo "rollout assets: OK: the ${#old_assets[@]} assets of $old's page (${#carried[@]} of them not this release's) served by $new, $third and the edge ($checked answers, immutable, the same bytes), the ${#newer[@]} of $new's page not the release before's by the edge, 404s kept nowhere"
