#!/usr/bin/env python3
"""t0000-docs: the README's error table and option list match the code (R-API-2, R-DEP-5)."""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from harness import SRCDIR, run_tests


def read(path):
    with open(os.path.join(SRCDIR, path)) as f:
        return f.read()


def test_every_error_code_is_in_the_readme_table():
    """R-API-2: a table of every code in the README, with the status the code uses."""
    readme = read("README.md")
    rows = re.findall(r'^ERROR_ROW\([A-Z_]+, "([A-Za-z_]+)", (\d{3}), "([a-z_]+)", (\d), (\d),', read("fcgi/errors.def"), re.M)
    assert len(rows) > 10, rows
    for code, status, typ, no_retry, retry_after in rows:
        m = re.search(r"^\| `%s` \| (\d{3}) \| (\w+) \| (yes)? *\| (yes)? *\|" % code, readme, re.M)
        assert m, "README has no row for error code %s" % code
        assert m.group(1) == status and m.group(2) == typ, (code, m.groups())
        assert bool(m.group(3)) == (no_retry == "1") and bool(m.group(4)) == (retry_after == "1"), (code, m.groups())


def test_every_conf_option_is_documented():
    """R-DEP-5: every sluice.conf option in the README."""
    readme = read("README.md")
    conf = read("lib/conf.c")
    names = re.findall(r'^    OPT_[A-Z]+\("([a-z_.]+)"', conf, re.M)      # the schema's rows
    assert len(names) > 60, names
    for n in names:
        assert "| `%s` |" % n in readme, "README does not document %s" % n


def test_every_setting_is_in_the_readme_table():
    """SPEC §0 settings: the README's settings table has every row of lib/settings.c, with its
    default and meaning, and no other."""
    readme = read("README.md")
    rows = re.findall(r'SETTING_[A-Z]+\("([a-z_0-9]+)",.*?"([^"]*)",\s*"([^"]*)"\),', read("lib/settings.c"), re.S)
    assert len(rows) >= 9, rows
    for name, default, meaning in rows:
        m = re.search(r"^\| `%s` \| [^|]+ \| ([^|]+) \| (.+) \|$" % name, readme, re.M)
        assert m, "README's settings table has no row for %s" % name
        assert m.group(1) == (default or "(empty)"), (name, default, m.group(1))
        assert m.group(2) == meaning, (name, meaning, m.group(2))
    table = re.findall(r"^\| `([a-z_0-9]+)` \| [^|]+ \| [^|]+ \| R-", readme, re.M)
    assert sorted(table) == sorted(r[0] for r in rows), (table, rows)


if __name__ == "__main__":
    run_tests(globals())
