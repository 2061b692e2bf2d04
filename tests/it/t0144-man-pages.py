#!/usr/bin/env python3
"""t0144-man-pages: the man pages cover what the programs take, render cleanly, install into
their sections and go into the tarball (issue 13, R-DEP-5).

The lists come from the programs and the code, read at run time, never from a copy here:
every option of lib/conf.c's schema is an entry of sluice.conf(5) with its type, range,
default and SIGHUP behaviour, and no entry names an option the schema lacks; every command of
`sluicectl --help` is an entry of sluicectl(1), and each of its options appears in the
section holding it; every option of sluice-healthd and sluice-fcgi (their --help and their
option parsers) is an entry of their page, and every environment variable they read is in
it. Each check compares two sets and names what is missing; the last two tests remove one
entry from a page and show that the check then names it."""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import BUILDDIR, CTL, FCGI, HEALTHD, OUTDIR, SRCDIR, run_tests

PAGES = {"sluice.7": 7, "sluice-fcgi.8": 8, "sluice-healthd.8": 8, "sluice-admin.cgi.8": 8,
         "sluicectl.1": 1, "sluice.conf.5": 5}


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def page(name):
    """The built page (man/NAME in the build directory, made from man/NAME.in)."""
    path = os.path.join(BUILDDIR, "man", name)
    assert os.path.exists(path), "%s was not built (make all makes it from man/%s.in)" % (path, name)
    return read(path)


# ---- reading roff --------------------------------------------------------------------

def plain(s):
    """Roff text as a reader sees it: fonts dropped, escapes turned into their characters."""
    s = re.sub(r"\\f(\[[^]]*\]|\(..|.)", "", s)
    s = s.replace("\\-", "-").replace("\\&", "").replace("\\e", "\\").replace("\\ ", " ")
    s = s.replace("\\(em", "\u2014").replace("\\(en", "\u2013").replace("\\(bu", "\u2022")
    return s


def macro_args(rest):
    args, cur, quoted, i = [], "", False, 0
    while i < len(rest):
        ch = rest[i]
        if ch == '"':
            if quoted and i + 1 < len(rest) and rest[i + 1] == '"':
                cur += '"'
                i += 2
                continue
            quoted = not quoted
        elif ch == " " and not quoted:
            if cur:
                args.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    if cur:
        args.append(cur)
    return args


def line_text(line):
    """The text a line puts on the page (a font macro's arguments, joined as roff joins them)."""
    if not line.startswith("."):
        return plain(line)
    m = re.match(r"^\.([A-Za-z]+)\s*(.*)$", line)
    if not m:
        return ""
    name, rest = m.group(1), m.group(2)
    args = macro_args(rest)
    if name in ("B", "I", "SM", "SB"):
        return plain(" ".join(args))
    if name in ("BR", "RB", "BI", "IB", "IR", "RI"):
        return plain("".join(args))
    if name in ("TP", "PP", "LP", "P", "RS", "RE", "br", "nf", "fi", "sp", "IP", "TH", "SH", "SS"):
        return plain(" ".join(args)) if name in ("IP",) else ""
    return ""


def sections(text):
    """{".SH name": [lines]} of a page."""
    out, cur = {}, None
    for line in text.split("\n"):
        m = re.match(r'^\.SH\s+"?([^"]*)"?\s*$', line)
        if m:
            cur = m.group(1).strip()
            out[cur] = []
        elif cur is not None:
            out[cur].append(line)
    return out


def subsections(lines):
    """[(".SS name", [lines])] of a section; lines before the first .SS under ""."""
    out = [("", [])]
    for line in lines:
        m = re.match(r'^\.SS\s+"?([^"]*)"?\s*$', line)
        if m:
            out.append((m.group(1).strip(), []))
        else:
            out[-1][1].append(line)
    return out


def entries(lines):
    """[(tag, body)] of the .TP entries of some lines: the tag line's text, the text up to the
    next .TP (nested ones included in the body)."""
    out, i = [], 0
    while i < len(lines):
        if lines[i] == ".TP" and i + 1 < len(lines):
            tag = line_text(lines[i + 1])
            j = i + 2
            body = []
            while j < len(lines) and lines[j] != ".TP":
                body.append(line_text(lines[j]))
                j += 1
            out.append((tag.strip(), "\n".join(body)))
            i = j
        else:
            i += 1
    return out


def section_text(lines):
    return "\n".join(line_text(l) for l in lines)


# ---- what the code says -----------------------------------------------------------------

def conf_schema():
    """[(name, type, min, max, field, when)] of lib/conf.c's schema rows."""
    src = read(os.path.join(SRCDIR, "lib", "conf.c"))
    rows = []
    for typ, name, rest in re.findall(r'^    OPT_(STR|PATH|BOOL|INT|ENUM)\("([a-z_.]+)",\s*(.*?)\),\s*$', src, re.M):
        parts = [p.strip() for p in rest.split(",")]
        lo = hi = None
        if typ == "INT":
            lo, hi = (eval(p.replace("LL", "")) for p in parts[:2])
        rows.append((name, typ, lo, hi, parts[-2], parts[-1]))
    assert len(rows) > 60, rows
    return rows


def conf_defaults():
    """{field: value} of conf_defaults() in lib/conf.c (a field it does not set is 0 or "")."""
    src = read(os.path.join(SRCDIR, "lib", "conf.c"))
    body = re.search(r"void conf_defaults\(struct conf \*c\)\n\{(.*?)\n\}", src, re.S).group(1)
    out = {}
    for field, value in re.findall(r'snprintf\(c->(\w+), sizeof c->\w+, "([^"]*)"\);', body):
        out[field] = value
    for field, expr in re.findall(r"^\s*c->(\w+) = ([^;]+);", body, re.M):
        out[field] = eval(expr.replace("LL", ""))
    return out


def ctl_commands():
    """{"route add": {"tenant", ...}} from `sluicectl --help`, and the global options."""
    p = subprocess.run([CTL, "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, (p.returncode, p.stderr)
    lines = p.stdout.split("\n")
    start = lines.index("commands:")
    cmds = {}
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            continue
        words = []
        for tok in line.split():
            if not re.fullmatch(r"[a-z][a-z-]*", tok) or len(words) == 2:
                break
            words.append(tok)
        assert words, line
        cmds[" ".join(words)] = set(re.findall(r"--([a-z][a-z-]*)", line))
    assert len(cmds) > 40, cmds
    globals_ = set(re.findall(r"--([a-z][a-z-]*)", "\n".join(lines[:start])))
    return cmds, globals_


def tag_commands(tag):
    """The commands an entry of sluicectl(1) names: its leading words ("list tenants|users" is
    two commands)."""
    words = []
    for tok in tag.split():
        if not re.fullmatch(r"[a-z][a-z|-]*", tok) or len(words) == 2:
            break
        words.append(tok)
    if not words:
        return []
    if len(words) == 1:
        return [words[0]]
    return ["%s %s" % (words[0], w) for w in words[1].split("|")]


def help_flags(text):
    return set(re.findall(r"(?:^|[\s\[(])(--?[a-z][a-z-]*)", text, re.M))


# ---- the comparisons (also run on pages with an entry removed, below) ------------------

def conf_mistakes(man):
    """What sluice.conf(5) gets wrong against the schema: a list of sentences, empty if none."""
    opts = sections(man).get("OPTIONS")
    if opts is None:
        return ["sluice.conf.5 has no OPTIONS section"]
    documented = {}
    for tag, body in entries(opts):
        name = tag.split()[0] if tag else ""
        documented[name] = body
    schema = conf_schema()
    defaults = conf_defaults()
    names = {r[0] for r in schema}
    out = []
    missing = sorted(names - set(documented))
    if missing:
        out.append("options of lib/conf.c missing from sluice.conf.5: %s" % ", ".join(missing))
    extra = sorted(set(documented) - names)
    if extra:
        out.append("sluice.conf.5 documents options lib/conf.c does not have: %s" % ", ".join(extra))
    when_phrase = {"LIVE": "SIGHUP: applies at once.", "RESTART": "SIGHUP: needs a restart.",
                   "LOG": "SIGHUP: the log moves to the new path."}
    type_phrase = {"STR": "String", "PATH": "Path", "BOOL": "Boolean", "INT": "Integer", "ENUM": "One of"}
    for name, typ, lo, hi, field, when in schema:
        body = " ".join(documented.get(name, "").split())
        if not body:
            continue
        if not body.startswith(type_phrase[typ]):
            out.append("%s: the entry should start with its type, %s" % (name, type_phrase[typ]))
        if typ == "INT" and "from %d to %d" % (lo, hi) not in body:
            out.append("%s: the entry should give the range from %d to %d" % (name, lo, hi))
        d = defaults.get(field, "" if typ in ("STR", "PATH", "ENUM") else 0)
        want = ("true" if d else "false") if typ == "BOOL" else (d if isinstance(d, str) else str(d))
        if not re.search(r"default %s(?=[\s.;,)]|$)" % re.escape(want or "empty"), body):
            out.append("%s: the entry should say default %s" % (name, want or "empty"))
        if when_phrase[when] not in body:
            out.append("%s: the entry should say \"%s\" (the schema row says %s)" % (name, when_phrase[when], when))
    return out


def ctl_mistakes(man):
    """What sluicectl(1) gets wrong against `sluicectl --help`."""
    cmds, globals_ = ctl_commands()
    secs = sections(man)
    if "COMMANDS" not in secs:
        return ["sluicectl.1 has no COMMANDS section"]
    where = {}
    for title, lines in subsections(secs["COMMANDS"]):
        text = section_text(lines)
        for tag, _ in entries(lines):
            for c in tag_commands(tag):
                where[c] = (title, text)
    out = []
    missing = sorted(set(cmds) - set(where))
    if missing:
        out.append("commands of sluicectl --help missing from sluicectl.1: %s" % ", ".join(missing))
    for c in sorted(set(cmds) & set(where)):
        title, text = where[c]
        lost = sorted(f for f in cmds[c] if not re.search(r"--%s(?![a-z-])" % re.escape(f), text))
        if lost:
            out.append("sluicectl %s: options missing from its section (%s) of sluicectl.1: %s"
                       % (c, title, ", ".join("--" + f for f in lost)))
    gtext = section_text(secs.get("OPTIONS", []))
    lost = sorted(f for f in globals_ if "--" + f not in gtext)
    if lost:
        out.append("global options missing from OPTIONS of sluicectl.1: %s" % ", ".join("--" + f for f in lost))
    extra = sorted(set(where) - set(cmds))
    if extra:
        print("   note: sluicectl.1 documents commands this build does not have: %s" % ", ".join(extra))
    return out


def option_mistakes(man, flags, pagename):
    opts = sections(man).get("OPTIONS", [])
    tags = set()
    for tag, _ in entries(opts):
        for t in re.split(r",\s*", tag):
            if t:
                tags.add(t.split()[0])
    missing = sorted(flags - tags)
    return ["options missing from OPTIONS of %s: %s" % (pagename, ", ".join(missing))] if missing else []


def env_mistakes(man, sources, pagename):
    names = set()
    for src in sources:
        names |= set(re.findall(r'(?:getenv|cgi_env)\("([A-Z_]+)"\)', read(os.path.join(SRCDIR, src))))
    env = section_text(sections(man).get("ENVIRONMENT", []))
    missing = sorted(n for n in names if not re.search(r"\b%s\b" % n, env))
    return ["environment variables missing from ENVIRONMENT of %s: %s" % (pagename, ", ".join(missing))] \
        if missing else []


# ---- the tests ------------------------------------------------------------------------------

def test_pages_carry_the_version_and_date_of_configure():
    mk = read(os.path.join(BUILDDIR, "Makefile"))
    version = re.search(r"^PACKAGE_VERSION = (\S+)", mk, re.M).group(1)
    date = re.search(r"^RELEASE_DATE = (\S+)", mk, re.M).group(1)
    for name, sec in PAGES.items():
        text = page(name)
        left = sorted(set(re.findall(r"@[A-Z_]+@", text)))
        assert not left, "%s still holds %s" % (name, left)
        th = re.search(r"^\.TH (\S+) (\d) \"([^\"]*)\" \"([^\"]*)\"", text, re.M)
        assert th, "%s has no .TH line" % name
        assert int(th.group(2)) == sec, (name, th.group(2))
        assert th.group(3) == date and th.group(4) == "sluice " + version, (name, th.groups(), date, version)


def test_every_conf_option_is_in_sluice_conf_5():
    """R-DEP-5: each schema row is an entry with its type, range, default and SIGHUP rule."""
    mistakes = conf_mistakes(page("sluice.conf.5"))
    assert not mistakes, "\n".join(mistakes)


def test_every_sluicectl_command_and_option_is_in_sluicectl_1():
    mistakes = ctl_mistakes(page("sluicectl.1"))
    assert not mistakes, "\n".join(mistakes)


def test_every_healthd_option_is_in_sluice_healthd_8():
    p = subprocess.run([HEALTHD, "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, (p.returncode, p.stderr)
    flags = help_flags(p.stdout)
    flags |= set(re.findall(r'strcmp\(a, "(-[^"]+)"\)', read(os.path.join(SRCDIR, "healthd", "main.c"))))
    assert {"--forever", "--rounds", "-c", "--check-config"} <= flags, flags
    man = page("sluice-healthd.8")
    mistakes = option_mistakes(man, flags, "sluice-healthd.8") + \
        env_mistakes(man, ["healthd/main.c"], "sluice-healthd.8")
    assert not mistakes, "\n".join(mistakes)


def test_every_fcgi_option_is_in_sluice_fcgi_8():
    p = subprocess.run([FCGI, "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, (p.returncode, p.stderr)
    flags = help_flags(p.stdout + p.stderr)
    src = read(os.path.join(SRCDIR, "fcgi", "main.c"))
    flags |= {"--" + n for n in re.findall(r'\{"([a-z-]+)", (?:no|required|optional)_argument', src)}
    short = re.search(r'getopt_long\(argc, argv, "([^"]*)"', src).group(1)
    flags |= {"-" + ch for ch in short if ch != ":"}
    assert {"-c", "--check-config"} <= flags, flags
    man = page("sluice-fcgi.8")
    mistakes = option_mistakes(man, flags, "sluice-fcgi.8") + env_mistakes(man, ["fcgi/main.c"], "sluice-fcgi.8")
    assert not mistakes, "\n".join(mistakes)


def test_the_environment_of_the_cgi_and_sluicectl_is_documented():
    mistakes = env_mistakes(page("sluice-admin.cgi.8"), ["admin/cgi_main.c", "admin/cgi.c"], "sluice-admin.cgi.8") + \
        env_mistakes(page("sluicectl.1"), ["admin/sluicectl.c"], "sluicectl.1")
    assert not mistakes, "\n".join(mistakes)


def test_pages_render_without_warnings():
    tools = []
    if shutil.which("groff"):
        tools.append(["groff", "-man", "-Tutf8", "-ww", "-z"])
    if shutil.which("mandoc"):
        tools.append(["mandoc", "-Tlint", "-W", "warning"])
    if not tools:
        print("   note: neither groff nor mandoc is installed; the pages were not rendered")
        return
    for name in PAGES:
        path = os.path.join(BUILDDIR, "man", name)
        for tool in tools:
            p = subprocess.run(tool + [path], capture_output=True, text=True, timeout=60)
            said = (p.stdout + p.stderr).strip()
            assert p.returncode == 0 and not said, "%s %s:\n%s" % (" ".join(tool), name, said)


def make_env():
    env = dict(os.environ)
    for k in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"):
        env.pop(k, None)
    return env


def test_pages_install_into_their_sections():
    dest = os.path.join(OUTDIR, "t0144-install")
    shutil.rmtree(dest, ignore_errors=True)
    p = subprocess.run(["make", "-s", "-C", BUILDDIR, "install-man", "DESTDIR=" + dest],
                       capture_output=True, text=True, timeout=300, env=make_env())
    assert p.returncode == 0, (p.stdout, p.stderr)
    installed = set()
    for root, _, files in os.walk(dest):
        for f in files:
            installed.add(os.path.join(os.path.basename(root), f))
    for name, sec in PAGES.items():
        assert "man%d/%s" % (sec, name) in installed, ("man%d/%s" % (sec, name), sorted(installed))


def test_page_sources_and_operations_md_go_into_the_tarball():
    p = subprocess.run(["make", "-s", "-C", BUILDDIR, "-f", "Makefile", "-f", "-", "t0144-print-dist"],
                       input="t0144-print-dist:\n\t@echo $(DIST_COMMON) $(EXTRA_DIST) $(DATA) $(dist_doc_DATA)\n",
                       capture_output=True, text=True, timeout=120, env=make_env())
    assert p.returncode == 0, (p.stdout, p.stderr)
    dist = set(p.stdout.split())
    for name in PAGES:
        assert "man/%s.in" % name in dist, "man/%s.in is not distributed" % name
    assert "doc/operations.md" in dist, "doc/operations.md is not distributed"
    for name in PAGES:
        assert os.path.exists(os.path.join(SRCDIR, "man", name + ".in")), name


def test_a_missing_conf_option_is_named():
    """The comparison fails when an entry goes: pool.threads removed from the page."""
    man = page("sluice.conf.5")
    cut = re.sub(r"^\.TP\n\.B pool\.threads\n(?:(?!\.TP\n|\.SS ).*\n)*", "", man, flags=re.M)
    assert cut != man
    assert conf_mistakes(man) == []
    mistakes = conf_mistakes(cut)
    assert any("missing" in m and "pool.threads" in m for m in mistakes), mistakes
    wrong = man.replace("Integer from 1 to 4096; default 32.", "Integer from 1 to 4096; default 31.")
    assert any("pool.threads" in m and "default 32" in m for m in conf_mistakes(wrong))


def test_a_missing_command_or_option_is_named():
    """The comparison fails when a command goes (rule rm) or an option is not mentioned."""
    man = page("sluicectl.1")
    cut = re.sub(r"^\.TP\n\\fBrule rm\\fR.*\n(?:(?!\.TP\n|\.SS ).*\n)*", "", man, flags=re.M)
    assert cut != man
    mistakes = ctl_mistakes(cut)
    assert any("rule rm" in m for m in mistakes), mistakes
    no_flag = man.replace("\\-\\-start\\-period\\-seconds", "\\-\\-start\\-period")
    assert no_flag != man
    mistakes = ctl_mistakes(no_flag)
    assert any("endpoint add" in m and "--start-period-seconds" in m for m in mistakes), mistakes


if __name__ == "__main__":
    run_tests(globals())
