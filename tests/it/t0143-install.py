#!/usr/bin/env python3
"""t0143-install: `make install` lays out R-DEP-2 and sluice runs from the installed files alone
(issue 13).

The build the other tests use is installed into a temporary prefix (`make install prefix=...
sysconfdir=... localstatedir=...`: the configuration files are made at install time with
those directories). Then, with no source or build folder on any path: the installed
sluicectl (no --db: sluice.conf's database) makes the database, a tenant, a key, an
endpoint on the stand-in upstream and an operator; the installed lighttpd.conf (its port
changed) serves a chat, a stream, the management API and the page; an "existing" lighttpd
of its own serves the same through `include "lighttpd-sluice.conf"`, with sluice's JSON
error when a responder dies; nginx with nginx-sluice.conf serves a chat and a stream from
the installed `sluice-fcgi --listen`, and its own 502 as sluice's JSON; systemd-analyze accepts the units (each skipped with a message when the
program is not installed; Apache is not installed here). A reinstall keeps an edited sluice.conf,
and `make uninstall` leaves only it and the database."""
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import (BUILDDIR, LIGHTTPD, OUTDIR, SRCDIR, Fake, free_port, listening, http_request, run_tests, setup_with,
                     wait_for)

DIR = os.path.join(OUTDIR, "t0143-%d" % os.getpid())
P = os.path.join(DIR, "p")
ETC = os.path.join(P, "etc", "sluice")
STATE = os.path.join(P, "var", "lib", "sluice")
UNITS = os.path.join(P, "lib", "systemd", "system")
CONF = os.path.join(ETC, "sluice.conf")
# Every directory variable, so nothing of this install lands outside P.
DIRS = {"prefix": P, "exec_prefix": P, "bindir": P + "/bin", "sbindir": P + "/sbin", "libexecdir": P + "/libexec",
        "libdir": P + "/lib", "includedir": P + "/include", "datarootdir": P + "/share", "datadir": P + "/share",
        "docdir": P + "/share/doc/sluice", "mandir": P + "/share/man", "infodir": P + "/share/info",
        "sysconfdir": P + "/etc", "localstatedir": P + "/var", "runstatedir": P + "/var/run",
        "systemdsystemunitdir": UNITS}
LAYOUT = ["bin/sluicectl", "sbin/sluice-fcgi", "sbin/sluice-healthd", "libexec/sluice/sluice-admin.cgi",
          "share/sluice/www/index.html", "share/sluice/www/inference/index.html",
          "share/sluice/www/inference/app.js", "share/sluice/www/inference/app.css",
          "share/sluice/www/inference/js/api.js", "share/sluice/www/inference/js/views/keys.js",
          "share/sluice/www/_sluice/error.json", "share/sluice/www/_sluice/error-anthropic.json",
          "etc/sluice/sluice.conf", "etc/sluice/sluice.conf.sample", "etc/sluice/lighttpd-sluice.conf",
          "etc/sluice/lighttpd.conf", "etc/sluice/apache-sluice.conf", "etc/sluice/nginx-sluice.conf",
          "etc/sluice/sluice-healthd.cron", "etc/sluice/logrotate",
          "lib/systemd/system/sluice-fcgi.service", "lib/systemd/system/sluice-healthd.service",
          "lib/systemd/system/sluice-healthd.timer"]
# What the installed programs get: no source or build folder anywhere.
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": DIR, "LANG": "C.UTF-8"}


def make_install(target="install"):
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    args = ["make", "-s", target] + ["%s=%s" % kv for kv in DIRS.items()]
    p = subprocess.run(args, cwd=BUILDDIR, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, "make %s failed: %s %s" % (target, p.stdout[-2000:], p.stderr[-2000:])


def ctl(*args, stdin=None, env=None):
    """The installed sluicectl with no --db: the database of SLUICE_CONF's sluice.conf."""
    e = dict(ENV, SLUICE_CONF=CONF) if env is None else env
    p = subprocess.run([os.path.join(P, "bin", "sluicectl"), "--json"] + list(args), input=stdin, env=e, cwd=DIR,
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, "sluicectl %s: %s %s" % (" ".join(args), p.stdout, p.stderr)
    return json.loads(p.stdout)


class Lighttpd:
    """lighttpd -D on a config file, ended by PID."""

    def __init__(self, conf, port):
        self.port = port
        self.log = open(os.path.join(DIR, "lighttpd-%d.out" % port), "ab")
        self.proc = subprocess.Popen([LIGHTTPD, "-D", "-f", conf], stdout=self.log, stderr=self.log, env=ENV,
                                     cwd=DIR)
        wait_for(lambda: listening(port), 10, what="lighttpd on %d" % port)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        deadline = time.time() + 15
        while responder_pids() and time.time() < deadline:
            time.sleep(0.1)
        for pid in responder_pids():
            os.kill(pid, signal.SIGKILL)


def responder_pids():
    """The installed sluice-fcgi processes (of this prefix only)."""
    exe = os.path.join(P, "sbin", "sluice-fcgi")
    pids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.readlink("/proc/%s/exe" % pid) == exe:
                    pids.append(int(pid))
            except OSError:
                pass
    return pids


def build(c):
    shutil.rmtree(DIR, ignore_errors=True)
    os.makedirs(DIR)
    make_install()
    c.fake = Fake("install")
    c.servers = []
    return c


def setup():
    return setup_with(build, teardown)


def teardown(c):
    if c:
        for s in getattr(c, "servers", []):
            s.stop()
        if getattr(c, "fake", None):
            c.fake.stop()


def read(path):
    with open(path) as f:
        return f.read()


def test_every_file_of_the_layout(c):
    """R-DEP-2: binaries, the admin CGI in libexec/sluice, the page, the configuration files
    and units, the database folder (0750)."""
    missing = [f for f in LAYOUT if not os.path.isfile(os.path.join(P, f))]
    assert not missing, "not installed: %s" % missing
    for f in ("bin/sluicectl", "sbin/sluice-fcgi", "sbin/sluice-healthd", "libexec/sluice/sluice-admin.cgi"):
        assert os.access(os.path.join(P, f), os.X_OK), f
    st = os.stat(STATE)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o750, oct(st.st_mode)
    for name in os.listdir(os.path.join(SRCDIR, "www", "inference", "js", "views")):
        assert os.path.isfile(os.path.join(P, "share/sluice/www/inference/js/views", name)), name


def test_sluice_conf_is_absolute_under_the_state_folder(c):
    """sluice.conf's paths are absolute, under localstatedir/lib/sluice; both daemons accept it."""
    text = read(CONF)
    for opt in ("database", "state_file", "log_file", "access_log"):
        m = re.search(r'^%s = "([^"]*)";' % opt, text, re.M)
        assert m and m.group(1).startswith(STATE + "/"), (opt, m and m.group(1))
    assert read(CONF) == read(CONF + ".sample")
    for prog in ("sluice-fcgi", "sluice-healthd"):
        p = subprocess.run([os.path.join(P, "sbin", prog), "--check-config", "-c", CONF], env=ENV, cwd=DIR,
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0 and "configuration OK" in p.stdout, (prog, p.stdout, p.stderr)


def test_no_source_or_build_folder_in_the_installed_files(c):
    """Every path in the installed configuration is in the prefix (or /run, /bin/kill): none
    points back at the source or build tree."""
    files = [os.path.join(ETC, f) for f in os.listdir(ETC)] + [os.path.join(UNITS, f) for f in os.listdir(UNITS)]
    for f in files:
        # the test's own folder may lie in the build tree (test-output/): paths in it are the prefix's
        text = read(f).replace(os.path.realpath(DIR) + "/", "<prefix>/").replace(DIR + "/", "<prefix>/")
        for tree in {os.path.realpath(SRCDIR), os.path.realpath(BUILDDIR), SRCDIR, BUILDDIR}:
            assert tree + "/" not in text, "%s names %s" % (f, tree)
    snippet = read(os.path.join(ETC, "lighttpd-sluice.conf"))
    values = re.findall(r'=> "(/[^"]*)"', snippet)
    assert len(values) >= 6, values
    for v in values:
        assert v.startswith(P + "/"), v
        assert os.path.exists(v) or os.path.isdir(os.path.dirname(v)), v
    cron = read(os.path.join(ETC, "sluice-healthd.cron"))
    line = [l for l in cron.splitlines() if l and not l.startswith("#")]
    assert line == ["* * * * * root %s/sbin/sluice-healthd -c %s >> %s/sluice-healthd.log 2>&1" % (P, CONF, STATE)], line
    rot = read(os.path.join(ETC, "logrotate"))
    assert not re.search(r"(^|\s)/var/lib/sluice", rot, re.M) and STATE + "/access.log " in rot, rot
    unit = read(os.path.join(UNITS, "sluice-fcgi.service"))
    assert "ExecStart=%s/sbin/sluice-fcgi --listen unix:/run/sluice/sluice-fcgi.sock -c %s\n" % (P, CONF) in unit, unit
    assert "ReadWritePaths=%s\n" % STATE in unit and "ExecReload=/bin/kill -HUP $MAINPID" in unit


def test_sluicectl_defaults_to_sluice_conf(c):
    """Without --db, sluicectl uses sluice.conf's database: $SLUICE_CONF's, else the installed
    sysconfdir/sluice/sluice.conf the build was configured with (named in its help)."""
    mk = read(os.path.join(BUILDDIR, "Makefile"))
    var = dict(re.findall(r"^(prefix|sysconfdir) = (.*)$", mk, re.M))
    default = var["sysconfdir"].replace("${prefix}", var["prefix"]) + "/sluice/sluice.conf"
    p = subprocess.run([os.path.join(P, "bin", "sluicectl"), "help"], env=ENV, capture_output=True, text=True)
    assert default in p.stdout, (default, p.stdout[:600])
    if not os.path.exists(default):
        p = subprocess.run([os.path.join(P, "bin", "sluicectl"), "list", "tenants"], env=ENV, cwd=DIR,
                           capture_output=True, text=True)
        assert p.returncode != 0 and "install " + default in p.stderr, p.stderr
    r = ctl("init")
    assert r["database"] == STATE + "/sluice.db" and r["key_file"] == STATE + "/sluice.key", r
    assert os.path.isfile(STATE + "/sluice.db")
    # --db still wins
    other = os.path.join(DIR, "other.db")
    r = ctl("--db", other, "init")
    assert r["database"] == other and os.path.isfile(other), r


def provision(c):
    """Tenant, member key, endpoint on the stand-in, route and an operator, by the installed sluicectl."""
    if getattr(c, "key", None):
        return
    ctl("init")
    ctl("tenant", "add", "acme")
    ctl("user", "add", "alice", "--tenant", "acme", "--role", "member")
    c.key = ctl("key", "add", "--user", "alice")["key"]
    ctl("endpoint", "add", "ep", "--tenant", "acme", "--algorithm", "round_robin")
    ctl("replica", "add", "ep", c.fake.url)
    ctl("route", "add", "m", "ep", "--tenant", "acme")
    c.password = "install-test-password-143"
    ctl("user", "add", "op", "--tenant", "default", "--role", "operator", "--password-stdin",
        stdin=c.password + "\n")


def chat(port, key, content="hello", stream=False):
    body = {"model": "m", "messages": [{"role": "user", "content": content}]}
    if stream:
        body["stream"] = True
    return http_request(port, "POST", "/v1/chat/completions", body, {"Authorization": "Bearer " + key})


def stream_times(port, key, content):
    """A stream's chunks with their arrival times."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    t0 = time.time()
    conn.request("POST", "/v1/chat/completions", body=json.dumps(
        {"model": "m", "stream": True, "messages": [{"role": "user", "content": content}]}),
        headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    resp = conn.getresponse()
    chunks = []
    while True:
        b = resp.read1(65536)
        if not b:
            break
        chunks.append((time.time() - t0, b))
    conn.close()
    return resp.status, resp.getheader("Content-Type"), chunks


def check_serving(c, port):
    r = chat(port, c.key)
    assert r.status == 200 and r.json()["choices"], r
    status, ctype, chunks = stream_times(port, c.key, "[[fake chunks=3 gap_ms=400]]")
    text = b"".join(b for _, b in chunks).decode()
    assert status == 200 and ctype.startswith("text/event-stream"), (status, ctype)
    assert text.count("data: {") >= 3 and text.rstrip().endswith("data: [DONE]"), text[-300:]
    # streamed, not buffered: the first event long before the last
    first = next(t for t, b in chunks if b"data: {" in b)
    assert chunks[-1][0] - first > 0.6, [round(t, 2) for t, _ in chunks]
    r = http_request(port, "POST", "/api/v1/auth/login", {"username": "op", "password": c.password})
    assert r.status == 200, r
    cookie = r.headers["set-cookie"].split(";")[0]
    r = http_request(port, "GET", "/api/v1/tenants", headers={"Cookie": cookie})
    assert r.status == 200 and "acme" in [t["name"] for t in r.json()["data"]], r
    r = http_request(port, "GET", "/inference/")
    assert r.status == 200 and b"<" in r.body, r
    assert "frame-ancestors 'none'" in r.headers.get("content-security-policy", ""), r.headers
    r = http_request(port, "GET", "/inference/app.js")
    assert r.status == 200 and "javascript" in r.headers["content-type"], r.headers


def test_the_installed_lighttpd_serves(c):
    """The installed lighttpd.conf, its port changed: chat, stream, management API, the page;
    a healthd run on the installed files ends well."""
    provision(c)
    port = free_port()
    text = read(os.path.join(ETC, "lighttpd.conf"))
    assert "server.port = 3333\n" in text and 'server.bind = "127.0.0.1"' in text
    assert 'include "%s/lighttpd-sluice.conf"' % ETC in text
    conf = os.path.join(DIR, "lighttpd.conf")
    with open(conf, "w") as f:
        f.write(text.replace("server.port = 3333\n", "server.port = %d\n" % port))
    s = Lighttpd(conf, port)
    c.servers.append(s)
    try:
        check_serving(c, port)
        r = http_request(port, "GET", "/")
        assert r.status == 200 and b"/inference/" in r.body, r
    finally:
        s.stop()
    p = subprocess.run([os.path.join(P, "sbin", "sluice-healthd"), "-c", CONF, "--rounds", "1"], env=ENV, cwd=DIR,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "FATAL" not in p.stderr, p.stderr


def existing_lighttpd(c):
    """A lighttpd of one's own (its port, document root and modules) with one line
    `include ".../lighttpd-sluice.conf"`; returns (its config file, its port)."""
    port = free_port()
    root = os.path.join(DIR, "docroot")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "index.html"), "w") as f:
        f.write("<p>my own site</p>\n")
    conf = os.path.join(DIR, "existing-%d.conf" % port)
    with open(conf, "w") as f:
        f.write('server.modules = ("mod_access", "mod_alias")\n'
                'server.port = %d\nserver.bind = "127.0.0.1"\nserver.document-root = "%s"\n'
                'server.errorlog = "%s/existing-error.log"\nindex-file.names = ("index.html")\n'
                'include "%s/lighttpd-sluice.conf"\n' % (port, root, DIR, ETC))
    return conf, port


def test_an_existing_lighttpd_with_the_snippet(c):
    """An existing lighttpd with the snippet included: its own page stays, sluice serves beside
    it, and a responder killed mid-request gives sluice's JSON error, not lighttpd's HTML."""
    provision(c)
    conf, port = existing_lighttpd(c)
    p = subprocess.run([LIGHTTPD, "-tt", "-f", conf], capture_output=True, text=True, env=ENV)
    assert p.returncode == 0, p.stderr
    s = Lighttpd(conf, port)
    c.servers.append(s)
    try:
        r = http_request(port, "GET", "/")
        assert r.status == 200 and b"my own site" in r.body, r
        check_serving(c, port)
        # lighttpd's own error: the responders die while the upstream thinks
        c.fake.behavior("ttfb_ms=3000")
        out = {}
        t = threading.Thread(target=lambda: out.update(r=chat(port, c.key)))
        t.start()
        wait_for(lambda: c.fake.stats()["inflight"] >= 1, 5, what="the request at the upstream")
        assert responder_pids(), "no responder"
        for pid in responder_pids():
            os.kill(pid, signal.SIGKILL)
        t.join(20)
        c.fake.behavior("")
        r = out["r"]
        assert r.status in (500, 502, 503), r
        assert r.headers["content-type"].startswith("application/json"), r.headers
        assert r.json()["error"]["code"] == "gateway_unavailable", r
        wait_for(lambda: chat(port, c.key).status == 200, 15, what="the pool back")
    finally:
        c.fake.behavior("")
        s.stop()


FASTCGI_PARAMS = "".join("fastcgi_param %s $%s;\n" % kv for kv in (
    ("QUERY_STRING", "query_string"), ("REQUEST_METHOD", "request_method"), ("CONTENT_TYPE", "content_type"),
    ("CONTENT_LENGTH", "content_length"), ("SCRIPT_NAME", "fastcgi_script_name"), ("REQUEST_URI", "request_uri"),
    ("DOCUMENT_URI", "document_uri"), ("SERVER_PROTOCOL", "server_protocol"), ("GATEWAY_INTERFACE", "gateway_interface"),
    ("REMOTE_ADDR", "remote_addr"), ("REMOTE_PORT", "remote_port"), ("SERVER_ADDR", "server_addr"),
    ("SERVER_PORT", "server_port"), ("SERVER_NAME", "server_name"))).replace("$gateway_interface", "CGI/1.1")


def nginx_conf(d, servers):
    """An nginx.conf of d with one server { } per (port, snippet file) including it."""
    os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
    with open(os.path.join(d, "fastcgi_params"), "w") as f:
        f.write(FASTCGI_PARAMS)
    temps = "".join(" %s_temp_path %s/tmp/%s;\n" % (k, d, k) for k in ("client_body", "fastcgi", "proxy", "uwsgi", "scgi"))
    body = "".join(" server {\n  listen 127.0.0.1:%d;\n  root %s;\n  include %s;\n }\n" % (port, d, snippet)
                   for port, snippet in servers)
    path = os.path.join(d, "nginx.conf")
    with open(path, "w") as f:
        f.write("user root;\npid %s/nginx.pid;\nerror_log %s/error.log;\nevents {}\nhttp {\n access_log off;\n%s%s}\n"
                % (d, d, temps, body))
    return path


def test_nginx_apache_and_systemd_accept_their_files(c):
    """nginx -t on a server { } that includes nginx-sluice.conf, then that nginx serving a chat,
    a stream and the page from the installed `sluice-fcgi --listen` (the socket path changed
    from /run/sluice), and its own 502 as sluice's JSON; systemd-analyze verify on the units.
    Each is skipped (with a message) when the program is not installed; apache2ctl -t runs
    only where Apache is."""
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if nginx:
        provision(c)
        d = os.path.join(DIR, "nginx")
        conf = nginx_conf(d, [(free_port(), os.path.join(ETC, "nginx-sluice.conf"))])
        p = subprocess.run([nginx, "-t", "-p", d, "-c", conf], capture_output=True, text=True, env=ENV)
        assert p.returncode == 0 and "test is successful" in p.stderr, p.stderr
        sock = os.path.join(DIR, "sluice-fcgi.sock")
        sup = subprocess.Popen([os.path.join(P, "sbin", "sluice-fcgi"), "--listen", "unix:" + sock, "--processes", "1",
                                "-c", CONF], env=ENV, cwd=DIR, stdout=subprocess.DEVNULL,
                               stderr=open(os.path.join(DIR, "supervisor.out"), "ab"))
        ng = None
        try:
            wait_for(lambda: os.path.exists(sock) and responder_pids(), 10, what="sluice-fcgi --listen")
            text = read(os.path.join(ETC, "nginx-sluice.conf"))
            assert "unix:/run/sluice/sluice-fcgi.sock;" in text
            live, down = os.path.join(d, "live.conf"), os.path.join(d, "down.conf")
            with open(live, "w") as f:
                f.write(text.replace("/run/sluice/sluice-fcgi.sock", sock))
            with open(down, "w") as f:
                f.write(text.replace("/run/sluice/sluice-fcgi.sock", os.path.join(d, "none.sock")))
            port, port_down = free_port(), free_port()
            conf = nginx_conf(d, [(port, live), (port_down, down)])
            ng = subprocess.Popen([nginx, "-p", d, "-c", conf, "-g", "daemon off;"], env=ENV, cwd=DIR,
                                  stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "nginx.out"), "ab"))
            wait_for(lambda: listening(port), 10, what="nginx on %d" % port)
            r = chat(port, c.key)
            assert r.status == 200 and r.json()["choices"], r
            status, ctype, chunks = stream_times(port, c.key, "[[fake chunks=3 gap_ms=400]]")
            text = b"".join(b for _, b in chunks).decode()
            assert status == 200 and text.rstrip().endswith("data: [DONE]"), (status, text[-300:])
            first = next(t for t, b in chunks if b"data: {" in b)
            assert chunks[-1][0] - first > 0.6, [round(t, 2) for t, _ in chunks]
            r = http_request(port, "GET", "/inference/")
            assert r.status == 200 and "frame-ancestors 'none'" in r.headers.get("content-security-policy", ""), r
            for path, shape in (("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic")):
                r = http_request(port_down, "POST", path, {"model": "m"}, {"Authorization": "Bearer " + c.key})
                assert r.status == 502 and r.headers["content-type"].startswith("application/json"), r
                j = r.json()
                assert (j["error"]["code"] == "gateway_unavailable") if shape == "openai" else j["type"] == "error", j
        finally:
            if ng and ng.poll() is None:
                ng.send_signal(signal.SIGQUIT)
                try:
                    ng.wait(10)
                except subprocess.TimeoutExpired:
                    ng.kill()
                    ng.wait()
            if sup.poll() is None:
                sup.send_signal(signal.SIGTERM)
                try:
                    sup.wait(20)
                except subprocess.TimeoutExpired:
                    sup.kill()
                    sup.wait()
    else:
        print("   skipped: nginx (nginx is not installed)")
    apache = shutil.which("apache2") or ("/usr/sbin/apache2" if os.path.exists("/usr/sbin/apache2") else None)
    if apache:
        # apache2 -t on a whole server whose <VirtualHost> includes the installed snippet
        d = os.path.join(DIR, "apache")
        os.makedirs(d, exist_ok=True)
        mods = "".join("LoadModule %s_module /usr/lib/apache2/modules/mod_%s.so\n" % (m, m) for m in (
            "mpm_event", "authz_core", "proxy", "proxy_fcgi", "mime", "alias", "cgid", "headers", "env", "dir"))
        conf = os.path.join(d, "apache.conf")
        with open(conf, "w") as f:
            f.write("ServerRoot %s\nServerName 127.0.0.1\nListen 127.0.0.1:%d\n%sPidFile %s/apache.pid\n"
                    "ErrorLog %s/error.log\nMutex file:%s default\n<VirtualHost *:%d>\n  Include %s/apache-sluice.conf\n"
                    "</VirtualHost>\n" % (d, free_port(), mods, d, d, d, 80, ETC))
        p = subprocess.run([apache, "-t", "-f", conf], capture_output=True, text=True, env=ENV)
        assert p.returncode == 0 and "Syntax OK" in p.stdout + p.stderr, p
    else:
        print("   skipped: apache2 -t (apache2 is not installed)")
    sa = shutil.which("systemd-analyze")
    if sa:
        units = [os.path.join(UNITS, u) for u in ("sluice-fcgi.service", "sluice-healthd.service",
                                                  "sluice-healthd.timer")]
        p = subprocess.run([sa, "verify"] + units, capture_output=True, text=True, env=ENV, timeout=60)
        assert p.returncode == 0 and not p.stderr.strip(), p.stderr
    else:
        print("   skipped: systemd-analyze verify (systemd is not installed)")


def test_reinstall_keeps_an_edited_sluice_conf_and_uninstall(c):
    """A second make install refreshes sluice.conf.sample and keeps the edited sluice.conf;
    make uninstall removes everything else it installed (the database stays)."""
    edited = read(CONF).replace("billing_tz = \"UTC\";", "billing_tz = \"Europe/Paris\";")
    assert edited != read(CONF)
    with open(CONF, "w") as f:
        f.write(edited)
    os.remove(os.path.join(ETC, "lighttpd.conf"))
    make_install()
    assert read(CONF) == edited
    assert 'billing_tz = "UTC";' in read(CONF + ".sample")
    assert os.path.isfile(os.path.join(ETC, "lighttpd.conf"))
    make_install("uninstall")
    left = sorted(os.path.relpath(os.path.join(d, f), P) for d, _, fs in os.walk(P) for f in fs)
    assert [f for f in left if not f.startswith("var/lib/sluice/")] == ["etc/sluice/sluice.conf"], left
    assert "var/lib/sluice/sluice.db" in left, left


if __name__ == "__main__":
    run_tests(globals(), setup, teardown)
