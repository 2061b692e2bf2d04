#!/bin/sh
# run.sh: `make run` — lighttpd + the responder pool + a stand-in upstream, in the
# foreground, on 127.0.0.1:PORT, with every file under STATE_DIR. SIGTERM or
# Ctrl-C stops everything this script started (R-DEP-3). --database and --state-url
# (make run DATABASE=... STATE=...) set sluice.conf's database and state lines.
set -eu
port=3333 state=./run builddir=. srcdir=. lighttpd=lighttpd upstream_port= front=lighttpd
procs=2 threads=256 database= state_url=
while [ $# -gt 0 ]; do
  case $1 in
    --port) port=$2; shift 2 ;;
    --state) state=$2; shift 2 ;;
    --builddir) builddir=$2; shift 2 ;;
    --srcdir) srcdir=$2; shift 2 ;;
    --lighttpd) lighttpd=$2; shift 2 ;;
    --upstream-port) upstream_port=$2; shift 2 ;;
    --front) front=$2; shift 2 ;;
    --procs) procs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --database) database=$2; shift 2 ;;
    --state-url) state_url=$2; shift 2 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
case $port in
  ''|*[!0-9]*) echo "run.sh: PORT must be a number from 1024 to 65535, not '$port'" >&2; exit 2 ;;
esac
[ "$port" -ge 1024 ] && [ "$port" -le 65535 ] || { echo "run.sh: PORT must be from 1024 to 65535, not $port" >&2; exit 2; }
case $front in
  lighttpd)
    [ -n "$lighttpd" ] || lighttpd=$(command -v lighttpd || echo /usr/sbin/lighttpd)
    [ -x "$lighttpd" ] || { echo "lighttpd not found: apt-get install lighttpd" >&2; exit 1; } ;;
  nginx)
    nginx=$(command -v nginx || echo /usr/sbin/nginx)
    fcgiwrap=$(command -v fcgiwrap || echo /usr/sbin/fcgiwrap)
    [ -x "$nginx" ] && [ -x "$fcgiwrap" ] || { echo "nginx or fcgiwrap not found: apt-get install nginx fcgiwrap" >&2; exit 1; } ;;
  apache)
    apache=$(command -v apache2 || echo /usr/sbin/apache2)
    [ -x "$apache" ] || { echo "apache2 not found: apt-get install apache2-bin" >&2; exit 1; } ;;
  *) echo "run.sh: FRONT must be lighttpd, nginx or apache, not '$front'" >&2; exit 2 ;;
esac
# R-SEC-9: a state folder made here is 0750 (an existing one is left as it is).
[ -d "$state" ] || (umask 027 && mkdir -p "$state")
state=$(cd "$state" && pwd)
ctlbin="$builddir/admin/sluicectl"
conf="$state/sluice.conf"

[ -f "$conf" ] || sed -e "s|@STATE_DIR@|$state|g" -e "s|@PROCS@|$procs|g" -e "s|@THREADS@|$threads|g" \
  -e "s|@KEEPALIVE_MS@|5000|g" "$srcdir/conf/sluice.conf.in" > "$conf"
# DATABASE / STATE given: those lines of sluice.conf (a kept one too) say so from now on.
# A database URL (postgresql://...) has no folder to keep the key beside: it stays here.
setline() {
  awk -v k="$1" -v line="$2" 'index($0, k " = ") == 1 || index($0, k ": ") == 1 { print line; next } { print }' \
    "$conf" > "$conf.tmp" && mv "$conf.tmp" "$conf"
}
[ -n "$database" ] && setline database "database = \"$database\";"
[ -n "$state_url" ] && setline state "state = \"$state_url\";"
db=$(sed -n 's/^database = "\(.*\)";.*/\1/p' "$conf" | head -n 1)
[ -n "$db" ] || db="$state/sluice.db"
keyfile=
case $db in
  postgresql://*|postgres://*)
    keyfile=$(sed -n 's/^secrets: *{ *key_file = "\([^"]*\)".*/\1/p' "$conf" | head -n 1)
    if [ -z "$keyfile" ]; then
      keyfile="$state/sluice.key"
      setline secrets "secrets: { key_file = \"$keyfile\"; };"
    fi ;;
esac
ctl() {
  if [ -n "$keyfile" ]; then "$ctlbin" --db "$db" --key-file "$keyfile" "$@"; else "$ctlbin" --db "$db" "$@"; fi
}
# The state file is kept: /metrics counters go on across restarts (R-OBS-1), and
# one of another layout is moved aside by the responders themselves.

fresh=0
if [ -n "$keyfile" ]; then
  # A server's database: fresh while it has no demo tenant (init is first, it makes the schema).
  ctl init >/dev/null
  ctl --json list tenants | grep -q '"name":"demo"' || fresh=1
else
  [ -f "$db" ] || fresh=1
  ctl init >/dev/null
fi

lighttpd_pid= healthd_pid= upstream_pid= sup_pid= wrap_pid=
stop() {
  trap - INT TERM EXIT
  [ -n "$healthd_pid" ] && kill "$healthd_pid" 2>/dev/null && wait "$healthd_pid" 2>/dev/null
  # lighttpd's graceful stop is SIGINT, nginx's SIGQUIT; the pool's supervisor drains on SIGTERM.
  [ -n "$lighttpd_pid" ] && kill -"$(case $front in nginx) echo QUIT ;; apache) echo TERM ;; *) echo INT ;; esac)" \
    "$lighttpd_pid" 2>/dev/null &&
    wait "$lighttpd_pid" 2>/dev/null
  [ -n "$sup_pid" ] && kill "$sup_pid" 2>/dev/null && wait "$sup_pid" 2>/dev/null
  [ -n "$wrap_pid" ] && kill "$wrap_pid" 2>/dev/null && wait "$wrap_pid" 2>/dev/null
  [ -n "$upstream_pid" ] && kill "$upstream_pid" 2>/dev/null && wait "$upstream_pid" 2>/dev/null
  echo "sluice stopped."
}
trap 'stop; exit 0' INT TERM
trap stop EXIT
# The demo upstream: UPSTREAM_PORT, or a free port the stand-in picks (it says which).
: > "$state/upstream.out"
"$builddir/tests/fake/sluice-fake-upstream" --port "${upstream_port:-0}" --name demo > "$state/upstream.out" 2>&1 &
upstream_pid=$!
i=0
until grep -q '^listening on ' "$state/upstream.out" 2>/dev/null; do
  i=$((i + 1))
  if [ $i -gt 100 ] || ! kill -0 "$upstream_pid" 2>/dev/null; then
    echo "run.sh: the demo upstream did not start:" >&2; cat "$state/upstream.out" >&2; exit 1
  fi
  sleep 0.05
done
upstream_port=$(sed -n 's/^listening on \([0-9]*\).*/\1/p' "$state/upstream.out" | head -n 1)
upstream_url="http://127.0.0.1:$upstream_port"

if [ "$fresh" = 1 ]; then
  ctl tenant add demo >/dev/null
  ctl user add demo --tenant demo --role member >/dev/null
  ctl endpoint add demo-endpoint --tenant demo --algorithm least_connections >/dev/null
  ctl replica add demo-endpoint "$upstream_url" --engine vllm >/dev/null
  ctl route add demo demo-endpoint --tenant demo >/dev/null
  ctl --json key add --user demo --name demo \
    | sed -n 's/.*"key":"\([^"]*\)".*/\1/p' > "$state/demo-key.txt"
  chmod 600 "$state/demo-key.txt"
fi
# A later start may have another upstream port: the demo replica (the one this script
# added, named in upstream-url) follows it; replicas an operator added stay.
old_url=$(cat "$state/upstream-url" 2>/dev/null || true)
if [ "$fresh" = 0 ] && [ -n "$old_url" ] && [ "$old_url" != "$upstream_url" ] &&
   ctl --json list replicas --endpoint demo-endpoint 2>/dev/null | grep -qF "\"url\":\"$old_url\""; then
  ctl replica rm demo-endpoint "$old_url" >/dev/null
  ctl replica add demo-endpoint "$upstream_url" --engine vllm >/dev/null
fi
echo "$upstream_url" > "$state/upstream-url"
key=$(cat "$state/demo-key.txt" 2>/dev/null || echo "(see $state/demo-key.txt)")
# The demo operator for /inference and the API (R-ADM-2): created once with a random
# password, kept in admin-password.txt (mode 600) and shown in the banner.
if ! ctl --json list users --tenant default | grep -q '"name":"admin"'; then
  umask 077
  head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 20 > "$state/admin-password.txt"
  ctl user add admin --tenant default --role operator --password-stdin \
    < "$state/admin-password.txt" >/dev/null
  umask 022
fi
admin_pw=$(cat "$state/admin-password.txt" 2>/dev/null || echo "(see $state/admin-password.txt)")

if [ "$front" = lighttpd ]; then
  "$srcdir/conf/gen-lighttpd.sh" "$srcdir/conf/lighttpd.conf.in" 127.0.0.1 "$port" "$state" \
    "$builddir/fcgi/sluice-fcgi" "$conf" "$srcdir/www" "$procs" "$threads" 8388608 13 \
    "$builddir/admin/sluice-admin.cgi" > "$state/lighttpd.conf"
  "$lighttpd" -D -f "$state/lighttpd.conf" &
elif [ "$front" = nginx ]; then
  # nginx starts no FastCGI programs: the pool runs under its own supervisor, the admin CGI
  # under fcgiwrap, and nginx includes the same snippet `make install` installs.
  SLUICE_CONF="$conf" "$builddir/fcgi/sluice-fcgi" --listen "unix:$state/sluice-fcgi.sock" --processes "$procs" \
    -c "$conf" >> "$state/front.out" 2>&1 &
  sup_pid=$!
  SLUICE_CONF="$conf" "$fcgiwrap" -s "unix:$state/fcgiwrap.sock" >> "$state/front.out" 2>&1 &
  wrap_pid=$!
  sed -e "s|@SOCKET@|$state/sluice-fcgi.sock|g" -e "s|@WWW_DIR@|$srcdir/www|g" \
      -e "s|@ADMIN_CGI@|$builddir/admin/sluice-admin.cgi|g" -e "s|@CONF_FILE@|$conf|g" \
      -e "s|@SYSCONFDIR@|$state|g" -e "s|unix:/run/fcgiwrap.socket|unix:$state/fcgiwrap.sock|g" \
      "$srcdir/conf/nginx-sluice.conf.in" > "$state/nginx-sluice.conf"
  cp /etc/nginx/fastcgi_params "$state/fastcgi_params"
  user=; [ "$(id -u)" -eq 0 ] && user="user root;"
  cat > "$state/nginx.conf" <<NGINX
$user
pid $state/nginx.pid;
error_log $state/nginx-error.log;
events { worker_connections $((procs * threads * 2 + 512)); }
http {
  access_log off;
  types { text/html html; text/css css; text/javascript js; application/json json; image/svg+xml svg; }
  client_body_temp_path $state/nginx-body;
  fastcgi_temp_path $state/nginx-fastcgi;
  server {
    listen 127.0.0.1:$port;
    server_tokens off;
    include $state/nginx-sluice.conf;
  }
}
NGINX
  i=0
  until [ -S "$state/sluice-fcgi.sock" ] && [ -S "$state/fcgiwrap.sock" ]; do
    i=$((i + 1)); [ $i -gt 100 ] && { echo "run.sh: the pool did not start (see $state/front.out)" >&2; exit 1; }
    sleep 0.05
  done
  "$nginx" -p "$state" -c "$state/nginx.conf" -g "daemon off;" &
fi
[ "$front" = apache ] || lighttpd_pid=$!
if [ "$front" = apache ]; then
  # Apache will not serve as root: its children are www-data then, and get the state
  # folder, a copy of the page and of the admin CGI, and the pool's socket.
  SLUICE_CONF="$conf" "$builddir/fcgi/sluice-fcgi" --listen "unix:$state/sluice-fcgi.sock" --processes "$procs" \
    -c "$conf" >> "$state/front.out" 2>&1 &
  sup_pid=$!
  rm -rf "$state/www" "$state/libexec"
  cp -R "$srcdir/www" "$state/www"
  mkdir -p "$state/libexec"
  cp "$builddir/admin/sluice-admin.cgi" "$state/libexec/"
  sed -e "s|@SOCKET@|$state/sluice-fcgi.sock|g" -e "s|@WWW_DIR@|$state/www|g" \
      -e "s|@ADMIN_CGI@|$state/libexec/sluice-admin.cgi|g" -e "s|@PKGLIBEXECDIR@|$state/libexec|g" \
      -e "s|@CONF_FILE@|$conf|g" -e "s|@SYSCONFDIR@|$state|g" \
      "$srcdir/conf/apache-sluice.conf.in" > "$state/apache-sluice.conf"
  user=
  if [ "$(id -u)" -eq 0 ]; then
    user="User www-data
Group www-data"
    d=$state
    while [ "$d" != / ]; do
      d=$(dirname "$d")
      [ -n "$(find "$d" -maxdepth 0 -perm -o+x)" ] ||
        { echo "run.sh: Apache's www-data cannot pass $d (mode $(stat -c %a "$d")): use a STATE_DIR it can reach" >&2; exit 1; }
    done
  fi
  types=; [ -f /etc/mime.types ] && types="TypesConfig /etc/mime.types"
  mods=
  for m in mpm_event authz_core proxy proxy_fcgi mime alias cgid headers env dir; do
    mods="$mods
LoadModule ${m}_module /usr/lib/apache2/modules/mod_$m.so"
  done
  cat > "$state/apache.conf" <<APACHE
ServerRoot $state
ServerName 127.0.0.1
Listen 127.0.0.1:$port
$mods
$user
PidFile $state/apache.pid
ErrorLog $state/apache-error.log
Mutex file:$state default
ScriptSock $state/cgid.sock
Timeout 3600
$types
AddType application/json .json
ServerTokens Prod
<VirtualHost 127.0.0.1:$port>
  Include $state/apache-sluice.conf
</VirtualHost>
APACHE
  i=0
  until [ -S "$state/sluice-fcgi.sock" ]; do
    i=$((i + 1)); [ $i -gt 100 ] && { echo "run.sh: the pool did not start (see $state/front.out)" >&2; exit 1; }
    sleep 0.05
  done
  [ "$(id -u)" -eq 0 ] && chown -R www-data:www-data "$state"
  "$apache" -f "$state/apache.conf" -DFOREGROUND &
  lighttpd_pid=$!
fi
# "serving" in the banner must be true: wait (5 s at most) until the port answers.
i=0
while [ $i -lt 100 ] && kill -0 "$lighttpd_pid" 2>/dev/null &&
      ! curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/inference/" 2>/dev/null; do
  i=$((i + 1))
  sleep 0.05
done
kill -0 "$lighttpd_pid" 2>/dev/null || { echo "run.sh: $front did not start (see $state/)" >&2; exit 1; }
# R-HC-9: no cron here, so sluice-healthd runs --forever beside the pool.
"$builddir/healthd/sluice-healthd" -c "$conf" --forever >> "$state/sluice-healthd.log" 2>&1 &
healthd_pid=$!

cat <<MSG
sluice is serving on http://127.0.0.1:$port behind $front  (state in $state)
demo upstream (stand-in model server): $upstream_url
demo member key: $key
management page: http://127.0.0.1:$port/inference  (user admin, password $admin_pw)
  API: curl -s -c jar http://127.0.0.1:$port/api/v1/auth/login -d '{"username":"admin","password":"$admin_pw"}'
try:
  curl -s http://127.0.0.1:$port/v1/chat/completions -H "Authorization: Bearer $key" \\
       -H 'Content-Type: application/json' -d '{"model":"demo","messages":[{"role":"user","content":"hi"}]}'
Ctrl-C stops it.
MSG
# make does not pass a SIGTERM sent to it on to this script: when our parent
# (`make run`) is gone, stop as if the signal had come here.
parent=$PPID
while kill -0 "$lighttpd_pid" 2>/dev/null && kill -0 "$parent" 2>/dev/null; do
  sleep 1 &
  wait $! || true
done
