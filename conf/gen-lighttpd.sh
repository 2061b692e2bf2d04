#!/bin/sh
# gen-lighttpd.sh: render conf/lighttpd.conf.in (a whole server) or conf/lighttpd-sluice.conf.in
# (sluice's mounts for a lighttpd of one's own). Usage:
#   gen-lighttpd.sh TEMPLATE HOST PORT STATE_DIR FCGI_BIN CONF_FILE WWW_DIR PROCS THREADS MAX_BODY_BYTES GRACE_S [ADMIN_CGI]
# ADMIN_CGI defaults to admin/sluice-admin.cgi of the build that holds FCGI_BIN.
# The line @SLUICE_MOUNTS@ of TEMPLATE becomes lighttpd-sluice.conf.in (from TEMPLATE's
# folder, without its opening comment), or, with SLUICE_LIGHTTPD_INCLUDE=FILE in the
# environment, a line including FILE (what `make install` writes).
set -eu
tmpl=$1 host=$2 port=$3 state=$4 bin=$5 conf=$6 www=$7 procs=$8 threads=$9
shift 9
max_body=$1 grace=$2 admin_cgi=${3:-}
[ -n "$admin_cgi" ] || admin_cgi=$(cd "$(dirname "$bin")/.." && pwd)/admin/sluice-admin.cgi
conns=$((procs * threads + 256))
fds=$((conns * 2 + 256))
kb=$((max_body / 1024 * 2 + 64))
snippet=$(dirname "$tmpl")/lighttpd-sluice.conf.in
if grep -q '^@SLUICE_MOUNTS@$' "$tmpl" && [ -z "${SLUICE_LIGHTTPD_INCLUDE:-}" ] && [ ! -r "$snippet" ]; then
  echo "gen-lighttpd.sh: $snippet is missing" >&2; exit 1
fi
awk -v inc="${SLUICE_LIGHTTPD_INCLUDE:-}" -v snippet="$snippet" '
  $0 != "@SLUICE_MOUNTS@" { print; next }
  inc != "" { printf "include \"%s\"\n", inc; next }
  { body = 0
    while ((getline line < snippet) > 0)
      if (body || line !~ /^#/) { body = 1; print line }
    close(snippet) }' "$tmpl" |
sed -e "s|@HOST@|$host|g" -e "s|@PORT@|$port|g" -e "s|@STATE_DIR@|$state|g" \
    -e "s|@FCGI_BIN@|$bin|g" -e "s|@CONF_FILE@|$conf|g" -e "s|@WWW_DIR@|$www|g" \
    -e "s|@PROCS@|$procs|g" -e "s|@MAX_FDS@|$fds|g" -e "s|@MAX_CONNECTIONS@|$conns|g" \
    -e "s|@MAX_REQUEST_KB@|$kb|g" -e "s|@GRACE_S@|$grace|g" -e "s|@ADMIN_CGI@|$admin_cgi|g"
