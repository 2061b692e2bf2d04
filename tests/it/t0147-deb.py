#!/usr/bin/env python3
"""t0147-deb: debian/ builds a .deb with the install layout of R-DEP-2 (issue 13).

A copy of the source tree (the files git knows, as they are in the work tree; else the
source tree, or `make distdir` of a tree configured in place) is built with `dpkg-buildpackage -us -uc -b`
(DEB_BUILD_OPTIONS=parallel=2, about 20 s here) in the test's output folder, never in
the source tree. Then `dpkg-deb -c` must list the layout (programs, page, configuration,
units, man pages, the state folder, the lighttpd conf-available file), no installed file
may name the build folder, `dpkg-deb -I` must show the maintainer scripts (the user, the
database, lighttpd-enable-mod, the healthd timer enabled, sluice-fcgi.service not) and
the conffiles, and `lintian --fail-on error` must accept the .deb. Skipped with a line
when dpkg-buildpackage or debhelper is missing (lintian alone: that check only).
With SLUICE_TEST_DEB_INSTALL=1, as root, the package is also installed, removed and
purged in throwaway namespaces over overlays of /etc, /var and /usr (the machine is not
changed), with Debian's lighttpd serving /v1/ and sluice-healthd running as sluice."""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import BUILDDIR, OUTDIR, SRCDIR, run_tests, setup_with

DIR = os.path.join(OUTDIR, "t0147-%d" % os.getpid())
LAYOUT = ["usr/bin/sluicectl", "usr/sbin/sluice-fcgi", "usr/sbin/sluice-healthd",
          "usr/libexec/sluice/sluice-admin.cgi",
          "usr/share/sluice/www/index.html", "usr/share/sluice/www/inference/index.html",
          "usr/share/sluice/www/inference/app.js", "usr/share/sluice/www/inference/app.css",
          "usr/share/sluice/www/inference/js/api.js", "usr/share/sluice/www/inference/js/views/keys.js",
          "usr/share/sluice/www/_sluice/error.json", "usr/share/sluice/www/_sluice/error-anthropic.json",
          "etc/sluice/sluice.conf", "etc/sluice/sluice.conf.sample", "etc/sluice/lighttpd-sluice.conf",
          "etc/sluice/lighttpd.conf", "etc/sluice/apache-sluice.conf", "etc/sluice/nginx-sluice.conf",
          "etc/sluice/sluice-healthd.cron", "etc/sluice/logrotate", "etc/sluice/grafana-sluice.json",
          "etc/lighttpd/conf-available/50-sluice.conf",
          "lib/systemd/system/sluice-fcgi.service", "lib/systemd/system/sluice-healthd.service",
          "lib/systemd/system/sluice-healthd.timer",
          "usr/share/man/man1/sluicectl.1.gz", "usr/share/man/man5/sluice.conf.5.gz",
          "usr/share/man/man7/sluice.7.gz", "usr/share/man/man8/sluice-fcgi.8.gz",
          "usr/share/man/man8/sluice-healthd.8.gz", "usr/share/man/man8/sluice-admin.cgi.8.gz",
          "usr/share/doc/sluice/copyright", "usr/share/doc/sluice/changelog.Debian.gz",
          "usr/share/doc/sluice/architecture.md.gz", "var/lib/sluice/"]


def clean_env():
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env.update({"DEB_BUILD_OPTIONS": "parallel=2", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"})
    return env


def missing():
    if not shutil.which("dpkg-buildpackage"):
        return "dpkg-buildpackage is not installed (dpkg-dev)"
    if subprocess.run(["dpkg", "-s", "debhelper"], capture_output=True).returncode != 0:
        return "debhelper is not installed"
    return None


def copy_source(dest):
    """The source tree to build, in dest: git's files as they are in the work tree; else
    the source tree itself when it is not configured in place, else `make distdir`."""
    git = shutil.which("git") and subprocess.run(
        ["git", "-C", SRCDIR, "rev-parse", "--show-prefix"], capture_output=True, text=True)
    if git and git.returncode == 0 and git.stdout.strip() == "":
        files = subprocess.run(["git", "-C", SRCDIR, "ls-files", "-z", "--cached", "--others",
                                "--exclude-standard"], capture_output=True, check=True).stdout
        os.makedirs(dest)
        for rel in sorted(set(f.decode() for f in files.split(b"\0") if f)):
            src = os.path.join(SRCDIR, rel)
            if not os.path.lexists(src):      # deleted in the work tree
                continue
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            shutil.copy2(src, os.path.join(dest, rel), follow_symlinks=False)
        return "git ls-files"
    if not os.path.exists(os.path.join(SRCDIR, "config.status")):
        # A source tree built elsewhere (an unpacked tarball, as in make distcheck) is clean
        # as it is (and `make distdir` of an out-of-tree build would miss the files that
        # EXTRA_DIST lists by $(wildcard)).
        shutil.copytree(SRCDIR, dest, symlinks=True)
        how = "a copy of the source tree"
    else:
        subprocess.run(["make", "-s", "distdir", "distdir=" + dest], cwd=BUILDDIR, env=clean_env(),
                       check=True, capture_output=True, timeout=300)
        how = "make distdir"
    subprocess.run(["chmod", "-R", "u+w", dest], check=True)
    return how


class Ctx:
    pass


def setup():
    def build(c):
        c.skip = missing()
        if c.skip:
            return c
        c.src = os.path.join(DIR, "sluice-src")
        how = copy_source(c.src)
        if not os.path.isfile(os.path.join(c.src, "debian", "rules")):
            c.skip = "the source tree (%s) has no debian/rules" % how
            return c
        log = os.path.join(DIR, "dpkg-buildpackage.log")
        with open(log, "w") as f:
            p = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=c.src, env=clean_env(),
                               stdout=f, stderr=subprocess.STDOUT, timeout=1200)
        assert p.returncode == 0, "dpkg-buildpackage failed (exit %d), see %s" % (p.returncode, log)
        debs = [f for f in os.listdir(DIR) if re.match(r"sluice_[^_]+_[^_]+\.deb$", f)]
        assert len(debs) == 1, os.listdir(DIR)
        c.deb = os.path.join(DIR, debs[0])
        print("   built %s (the source copied by: %s; in %s)" % (debs[0], how, c.src))
        return c
    if os.path.isdir(DIR):
        shutil.rmtree(DIR)
    os.makedirs(DIR)
    return setup_with(build, teardown)


def teardown(c):
    pass      # the folder stays in test-output for a look; `make clean` removes it


def skipped(c, what):
    if c.skip:
        print("   skipped: %s (%s)" % (what, c.skip))
        return True
    return False


def deb(c, *args):
    return subprocess.run(["dpkg-deb"] + list(args), capture_output=True, text=True, check=True).stdout


def test_the_file_list_holds_the_layout(c):
    """dpkg-deb -c lists every installed path of README "Installing", root-owned."""
    if skipped(c, "the file list"):
        return
    listing = deb(c, "-c", c.deb)
    paths = {}
    for line in listing.splitlines():
        f = line.split(None, 5)
        name = f[5].split(" -> ")[0]
        paths[name[2:] if name.startswith("./") else name] = (f[0], f[1])
    lost = [p for p in LAYOUT if p not in paths]
    assert not lost, "missing from the package: %s" % lost
    assert all(owner == "root/root" for _, owner in paths.values()), "a file not owned by root"
    for exe in ("usr/bin/sluicectl", "usr/sbin/sluice-fcgi", "usr/sbin/sluice-healthd",
                "usr/libexec/sluice/sluice-admin.cgi"):
        assert paths[exe][0] == "-rwxr-xr-x", (exe, paths[exe])
    # Nothing of the build's own (tests, the stand-in upstream, objects) and nothing under /usr/local.
    odd = [p for p in paths if p.startswith("usr/local") or "fake-upstream" in p or p.endswith((".o", ".a"))]
    assert not odd, odd


def test_no_installed_file_names_a_build_folder(c):
    """No installed file (configuration, units, man pages, programs) holds the path of the
    package build, the source tree or the build tree."""
    if skipped(c, "the build folders"):
        return
    x = os.path.join(DIR, "extracted")
    shutil.rmtree(x, ignore_errors=True)
    subprocess.run(["dpkg-deb", "-x", c.deb, x], check=True)
    needles = {os.path.realpath(p).encode() for p in (c.src, SRCDIR, BUILDDIR, DIR)}
    hits = []
    for d, _, files in os.walk(x):
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p):
                continue
            data = open(p, "rb").read()
            if p.endswith(".gz"):
                import gzip
                data = gzip.decompress(data)
            hits += ["%s: %s" % (os.path.relpath(p, x), n.decode()) for n in needles if n in data]
    assert not hits, hits
    conf = open(os.path.join(x, "etc/sluice/sluice.conf")).read()
    assert 'database = "/var/lib/sluice/sluice.db";' in conf, conf[:400]
    snippet = open(os.path.join(x, "etc/sluice/lighttpd-sluice.conf")).read()
    assert "/usr/sbin/sluice-fcgi" in snippet and "/usr/libexec/sluice/sluice-admin.cgi" in snippet
    avail = open(os.path.join(x, "etc/lighttpd/conf-available/50-sluice.conf")).read()
    assert 'include "/etc/sluice/lighttpd-sluice.conf"' in avail


def test_control_scripts_and_conffiles(c):
    """dpkg-deb -I: the relations, the conffiles (all of /etc) and the maintainer scripts:
    the user and the database before debhelper's part, lighttpd-enable-mod, the timer
    enabled, sluice-fcgi.service not; every script parses with sh -n."""
    if skipped(c, "the maintainer scripts"):
        return
    info = deb(c, "-I", c.deb)
    for name in ("postinst", "postrm", "prerm", "conffiles", "md5sums"):
        assert re.search(r"\b%s\b" % name, info), (name, info)
    control = deb(c, "-f", c.deb)
    assert re.search(r"^Depends: .*\badduser\b", control, re.M), control
    assert re.search(r"^Recommends: lighttpd$", control, re.M), control
    assert re.search(r"^Suggests: nginx \| apache2, fcgiwrap$", control, re.M), control
    ctl = os.path.join(DIR, "control")
    shutil.rmtree(ctl, ignore_errors=True)
    subprocess.run(["dpkg-deb", "-e", c.deb, ctl], check=True)
    conffiles = open(os.path.join(ctl, "conffiles")).read().split()
    for f in ("/etc/sluice/sluice.conf", "/etc/sluice/lighttpd-sluice.conf",
              "/etc/lighttpd/conf-available/50-sluice.conf"):
        assert f in conffiles, (f, conffiles)
    for s in ("preinst", "postinst", "prerm", "postrm"):
        if os.path.exists(os.path.join(ctl, s)):
            p = subprocess.run(["sh", "-n", os.path.join(ctl, s)], capture_output=True, text=True)
            assert p.returncode == 0, (s, p.stderr)
    post = open(os.path.join(ctl, "postinst")).read()
    helper = post.index("# Automatically added by dh_installsystemd")
    for what in ("adduser --quiet --system --group --home \"$STATE\"", "adduser --quiet www-data sluice",
                 "chmod 2770", "/usr/bin/sluicectl init", "lighttpd-enable-mod sluice"):
        assert 0 <= post.find(what) < helper, what
    assert "deb-systemd-helper enable 'sluice-healthd.timer'" in post
    assert "deb-systemd-invoke $_dh_action 'sluice-healthd.timer'" in post
    # dh_installsystemd --no-enable: sluice-fcgi.service is enabled again only when it was
    # (deb-systemd-invoke then starts neither it nor the static sluice-healthd.service).
    blocks = [b for b in post.split("# Automatically added by") if "deb-systemd-helper" in b]
    timer = [b for b in blocks if "'sluice-healthd.timer'" in b]
    fcgi = [b for b in blocks if "'sluice-fcgi.service'" in b]
    assert timer and all("was-enabled defaults to true" in b for b in timer), timer
    assert fcgi and all("debian-installed 'sluice-fcgi.service'" in b and
                        "was-enabled defaults to true" not in b for b in fcgi), fcgi
    assert not re.search(r"enable 'sluice-healthd.service'", post)
    postrm = open(os.path.join(ctl, "postrm")).read()
    assert "lighttpd-disable-mod sluice" in postrm and "rm -rf /var/lib/sluice" in postrm
    assert "deluser" not in postrm                              # the user stays on purge


def test_lintian_finds_no_error(c):
    """lintian --fail-on error accepts the .deb (its warnings are printed)."""
    if skipped(c, "lintian"):
        return
    if not shutil.which("lintian"):
        print("   skipped: lintian (not installed)")
        return
    p = subprocess.run(["lintian", "--fail-on", "error", c.deb], capture_output=True, text=True,
                       timeout=600)
    for line in p.stdout.splitlines():
        print("   lintian: " + line)
    assert p.returncode == 0, p.stdout + p.stderr


# The opt-in install check: the script runs in new mount, network and PID namespaces with
# /etc, /var and /usr overlaid (their upper folders in the test folder), so the machine's
# own files, users and dpkg database are never written, and nothing it starts outlives it.
INSTALL_SCRIPT = r"""
set -eu
B=$1; DEB=$2
mount --make-rprivate /
for d in etc var usr; do
  mkdir -p "$B/$d.u" "$B/$d.w"
  mount -t overlay overlay -o "lowerdir=/$d,upperdir=$B/$d.u,workdir=$B/$d.w" "/$d"
  [ "$(findmnt -n -o FSTYPE "/$d" | tail -n 1)" = overlay ] || { echo "NO-OVERLAY /$d"; exit 3; }
done
ip link set lo up
dpkg -i "$DEB"
echo "USER $(getent passwd sluice | cut -d: -f1,6,7)"
echo "GROUPS $(id -nG www-data)"
echo "STATE $(stat -c '%U:%G %a' /var/lib/sluice)"
echo "DB $(stat -c '%U:%G %a' /var/lib/sluice/sluice.db)"
echo "KEY $(stat -c '%U:%G %a' /var/lib/sluice/sluice.key)"
[ -L /etc/lighttpd/conf-enabled/50-sluice.conf ] && echo "MOD enabled"
[ -L /etc/systemd/system/timers.target.wants/sluice-healthd.timer ] && echo "TIMER enabled"
[ -e /etc/systemd/system/multi-user.target.wants/sluice-fcgi.service ] || echo "FCGI not enabled"
if command -v lighttpd >/dev/null; then
  sed -i 's/^server.port.*/server.port = 3380/' /etc/lighttpd/lighttpd.conf
  lighttpd -D -f /etc/lighttpd/lighttpd.conf > "$B/lighttpd.out" 2>&1 &
  for i in 1 2 3 4 5 6 7 8 9 10; do
    curl -s -o /dev/null http://127.0.0.1:3380/v1/models && break; sleep 0.5
  done
  echo "CHAT $(curl -s -w %{http_code} http://127.0.0.1:3380/v1/models)"
  echo "FCGI-USER $(ps -o user= -C sluice-fcgi | sort -u | tr '\n' ' ')"
  runuser -u sluice -- timeout 7 /usr/sbin/sluice-healthd -c /etc/sluice/sluice.conf > "$B/healthd.out" 2>&1 || :
  grep -q 'exiting after' "$B/healthd.out" && echo "HEALTHD ran"
fi
runuser -u www-data -- sluicectl tenant add t0147 >/dev/null && echo "WWW-DATA writes"
runuser -u sluice -- sluicectl tenant rm t0147 >/dev/null && echo "SLUICE writes"
chmod 0640 /var/lib/sluice/sluice.db
lighttpd-disable-mod sluice >/dev/null 2>&1 || :
dpkg -i "$DEB"
echo "REINSTALL DB $(stat -c '%U:%G %a' /var/lib/sluice/sluice.db)"
[ -e /etc/lighttpd/conf-enabled/50-sluice.conf ] || echo "REINSTALL mod left off"
dpkg -r sluice
[ -e /etc/lighttpd/conf-enabled/50-sluice.conf ] || echo "REMOVE mod off"
[ -d /var/lib/sluice ] && echo "REMOVE state kept"
dpkg -P sluice
[ -d /var/lib/sluice ] || echo "PURGE state gone"
getent passwd sluice >/dev/null && echo "PURGE user kept"
"""


def test_install_remove_purge_in_a_throwaway_root(c):
    """(SLUICE_TEST_DEB_INSTALL=1, as root) dpkg -i in namespaces over overlays of /etc, /var
    and /usr: the user, www-data in its group, the modes, the lighttpd mod and the timer
    enabled, sluice-fcgi.service not; Debian's lighttpd serves /v1/ from responders run as
    www-data and sluice-healthd runs as sluice; a reinstall mends the database's mode and
    leaves a mod the admin turned off off; dpkg -r turns the mod off, dpkg -P deletes the
    state and keeps the user."""
    if skipped(c, "the install check"):
        return
    if os.environ.get("SLUICE_TEST_DEB_INSTALL") != "1":
        print("   skipped: the install check (opt-in: SLUICE_TEST_DEB_INSTALL=1, as root)")
        return
    if os.geteuid() != 0 or not all(shutil.which(p) for p in ("unshare", "findmnt", "ip", "curl")):
        print("   skipped: the install check (needs root, unshare, findmnt, ip and curl)")
        return
    b = os.path.join(DIR, "root")
    os.makedirs(b)
    p = subprocess.run(["unshare", "-m", "-n", "-p", "--fork", "--mount-proc", "sh", "-c", INSTALL_SCRIPT,
                        "t0147", b, c.deb], capture_output=True, text=True, timeout=300)
    out = p.stdout
    with open(os.path.join(DIR, "install.log"), "w") as f:
        f.write(out + p.stderr)
    assert p.returncode == 0, out[-2000:] + p.stderr[-2000:]
    for want in ("USER sluice:/var/lib/sluice:/usr/sbin/nologin", "STATE sluice:sluice 2770",
                 "DB sluice:sluice 660", "KEY sluice:sluice 640", "MOD enabled", "TIMER enabled",
                 "FCGI not enabled", "WWW-DATA writes", "SLUICE writes", "REINSTALL DB sluice:sluice 660",
                 "REINSTALL mod left off", "REMOVE mod off",
                 "REMOVE state kept", "PURGE state gone", "PURGE user kept"):
        assert want in out, (want, out)
    assert re.search(r"^GROUPS .*\bsluice\b", out, re.M), out
    if shutil.which("lighttpd"):
        assert re.search(r'^CHAT .*"invalid_api_key".*401$', out, re.M), out
        assert "FCGI-USER www-data " in out, out
        assert "HEALTHD ran" in out, out
    shutil.rmtree(b, ignore_errors=True)


if __name__ == "__main__":
    if os.environ.get("SLUICE_SANITIZED") == "1":
        # dpkg-buildpackage builds the package without sanitizers: nothing for them to see
        print("skip - the package is built without sanitizers (this is the sanitizer run)")
        print("0 passed, 0 failed, 1 skipped")
        sys.exit(0)
    run_tests(globals(), setup, teardown)
