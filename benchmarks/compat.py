"""Compatibility check: public projects' own test suites before and after the vcrpy migration.

For each project of ``benchmarks/compat_projects.toml``: get its source at the pinned revision,
make a venv, install it with its test dependencies, run its suite offline (baseline), install
casstore, migrate as docs/migrating.md says (``casstore init``, ``casstore import vcr DIRS
--add``, ``casstore push``, ``git rm`` of the old cassettes, commit; no test or conftest
touched), then run the suite again in a fresh clone of the migrated repository with an empty
cache after ``casstore pull --frozen``, under ``CASSTORE_OFFLINE=1``.

    python benchmarks/compat.py                                   # every project, this checkout
    python benchmarks/compat.py --only llm-gemini --casstore ../wt-other
    python benchmarks/compat.py --source tweepy=/path/to/tweepy.git --write-doc

A git project's source comes from ``--source NAME=PATH`` (a clone or a bare git dir) or is
cloned from GitHub. Results go to ``benchmarks/results/compat-LABEL.json``; ``--write-doc``
puts the table into docs/compat.md between its markers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
from benchmarks.run import machine as run_machine  # noqa: E402

DOC = REPO / "docs" / "compat.md"
# environment of every test run: no proxy (the suites must not need one), git identity set;
# bytecode written as on a developer's machine or CI (without it pytest parses and rewrites
# every module of every plugin's package again on each run)
DROP_ENV = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
            "CASSTORE_MODE", "CASSTORE_OFFLINE", "PYTHONPATH", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")
GIT_ID = {"GIT_AUTHOR_NAME": "compat", "GIT_AUTHOR_EMAIL": "compat@example.invalid",
          "GIT_COMMITTER_NAME": "compat", "GIT_COMMITTER_EMAIL": "compat@example.invalid"}

_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?|rerun)")
_SUMMARY = re.compile(r"^=*\s*(?P<body>(?:no tests ran|\d+ \w+).*?) in (?P<secs>[\d.]+)s(?: \([^)]*\))?\s*=*$")


@dataclass
class Run:
    """One pytest run of a suite."""

    label: str
    exit_code: int
    wall_s: float
    counts: dict[str, int]
    crash: str = ""  # INTERNALERROR / collection error / no summary: its first line
    load: float | None = None  # the 1-minute load average when the run started (a shared machine)
    outcomes: dict[str, tuple[str, str]] = field(default_factory=dict)  # test -> (outcome, message)

    @property
    def passed(self) -> int:
        return self.counts.get("passed", 0)

    @property
    def failed(self) -> int:
        return self.counts.get("failed", 0) + self.counts.get("error", 0)


def parse_summary(output: str) -> dict[str, int] | None:
    """Counts from pytest's last summary line (``=== 3 passed, 1 failed in 0.5s ===``), or None."""
    for line in reversed(output.splitlines()):
        m = _SUMMARY.match(line.strip())
        if m:
            counts: dict[str, int] = {}
            for n, word in _COUNT.findall(m.group("body")):
                key = {"errors": "error", "warnings": "warning"}.get(word, word)
                counts[key] = counts.get(key, 0) + int(n)
            return counts
    return None


def crash_line(output: str) -> str:
    """The first line that says why a run stopped before or outside its tests."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("INTERNALERROR>") and re.search(r"\w+(Error|Exception|Exit)\b", line):
            last = [ln for ln in lines[i:] if ln.startswith("INTERNALERROR>")][-1]
            return "INTERNALERROR: " + last.removeprefix("INTERNALERROR>").strip()
    for line in lines:
        if line.startswith("E   ") and ("Error" in line or "Exception" in line):
            return line[4:].strip()
    for line in lines:
        if "Error" in line and not line.startswith(" "):
            return line.strip()
    return (lines[-1] if lines else "no output").strip()


def parse_junit(path: Path) -> dict[str, tuple[str, str]]:
    """test id -> (outcome, first line of its message), the worst outcome of each test."""
    rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
    out: dict[str, tuple[str, str]] = {}
    if not path.exists():
        return out
    for case in ET.parse(path).getroot().iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome, message = "passed", ""
        for child in case:
            kind = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(child.tag)
            if kind and rank[kind] >= rank[outcome]:
                outcome, message = kind, cause(child.get("message") or "", child.text or "")
        if test not in out or rank[outcome] > rank[out[test][0]]:
            out[test] = (outcome, message)
    return out


def cause(message: str, text: str) -> str:
    """One line: the error's first line, what a miss differs in, and where it was raised."""
    line = (message.strip().splitlines() or [""])[0][:160]
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        if "closest recorded request" in ln and i + 1 < len(lines):
            line += " | " + lines[i + 1].removeprefix("E").strip()[:120]
            break
    where = [ln for ln in lines if re.match(r"^\S+\.py:\d+: \w", ln)]
    if where:
        line += " [at " + where[-1].rsplit(": ", 1)[0].split("site-packages/")[-1] + "]"
    return line


def sh(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 1800,
       check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} (in {cwd}) exited {proc.returncode}:\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc


def base_env(home: Path, venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROP_ENV}
    env.update(GIT_ID)
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               XDG_CACHE_HOME=str(home / ".cache"), CASSTORE_CONFIG_DIR=str(home / ".config/casstore"),
               PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
               PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache/pip")))
    return env


def get_source(proj: dict[str, Any], local: str | None, dest: Path, env: dict[str, str]) -> str:
    """Puts the project's tree at its revision into ``dest`` (a git repository); returns the revision."""
    if proj["source"] == "sdist":
        dl = dest.parent / "sdist"
        dl.mkdir(exist_ok=True)
        sh([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
            proj["sdist"], "-d", str(dl)], dest.parent, env)
        (archive,) = list(dl.glob("*.tar.gz"))
        with tarfile.open(archive) as tar:
            top = tar.getnames()[0].split("/")[0]
            tar.extractall(dl, filter="data")
        shutil.move(str(dl / top), dest)
        sh(["git", "init", "-q"], dest, env)
        sh(["git", "add", "-A"], dest, env)
        sh(["git", "commit", "-q", "-m", f"sdist {proj['sdist']}"], dest, env)
        return str(proj["sdist"])
    origin = local or f"https://github.com/{proj['repo']}.git"
    sh(["git", "clone", "-q", "--no-checkout", origin, str(dest)], dest.parent, env)
    sh(["git", "checkout", "-q", "-B", "compat", proj["rev"]], dest, env)
    return str(proj["rev"])[:12]


def run_suite(label: str, venv: Path, cwd: Path, args: list[str], env: dict[str, str],
              timeout: float, repeat: int = 1) -> Run:
    """The suite's first run, with the least wall time of ``repeat`` runs."""
    run = run_once(label, venv, cwd, args, env, timeout)
    for _ in range(repeat - 1):
        run.wall_s = min(run.wall_s, run_once(f"{label}-again", venv, cwd, args, env, timeout).wall_s)
    return run


def run_once(label: str, venv: Path, cwd: Path, args: list[str], env: dict[str, str],
             timeout: float) -> Run:
    junit = cwd.parent / f"junit-{label}.xml"
    junit.unlink(missing_ok=True)
    cmd = [str(venv / "bin/python"), "-m", "pytest", "-p", "no:cacheprovider", "-rfE",
           f"--junitxml={junit}", *args]
    load = round(os.getloadavg()[0], 1)
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=True,
                              timeout=timeout)
        output, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        output += f"\ntimed out after {timeout:.0f}s"
        code = -1
    wall = time.perf_counter() - start
    (cwd.parent / f"pytest-{label}.log").write_text(output)
    counts = parse_summary(output)
    run = Run(label, code, round(wall, 2), counts or {}, outcomes=parse_junit(junit), load=load)
    if counts is None or code not in (0, 1):
        run.crash = crash_line(output)
    return run


def migrate(work: Path, checkout: Path, venv: Path, proj: dict[str, Any], casstore: Path,
            env: dict[str, str]) -> dict[str, Any]:
    """Installs casstore into the project's venv and migrates the checkout as docs/migrating.md says."""
    pip = [str(venv / "bin/python"), "-m", "pip"]
    before = sh([*pip, "freeze"], checkout, env).stdout.splitlines()
    sh([*pip, "install", "-q", str(casstore_tree(casstore, work / "casstore-src", env))], checkout, env)
    after = sh([*pip, "freeze"], checkout, env).stdout.splitlines()
    old, new = freeze_versions(before), freeze_versions(after)
    changed = sorted(f"{name} {old[name]} → {new[name]}" for name in old
                     if name in new and new[name] != old[name])
    added = sorted(name for name in new if name not in old)
    steps: list[dict[str, Any]] = []
    store = work / "store"

    def step(*cmd: str) -> bool:
        proc = sh(list(cmd), checkout, env, check=False)
        tail = (proc.stdout + proc.stderr).strip().splitlines()
        steps.append({"cmd": " ".join(cmd), "exit": proc.returncode, "tail": tail[-6:]})
        return proc.returncode == 0

    ok = (step("casstore", "init", "--remote", str(store))
          and step("casstore", "import", "vcr", *proj["import"], "--add")
          and step("casstore", "push")
          and step("git", "rm", "-q", *proj["remove"])
          and step("git", "add", "casstore.lock", "casstore.toml", ".casstore/trusted_keys")
          and step("git", "commit", "-q", "-m", "Move cassettes to casstore"))
    return {"ok": ok, "steps": steps, "changed_by_install": changed, "added_by_install": added,
            "casstore_built_from": casstore_revision(casstore)}


def casstore_tree(casstore: Path, dest: Path, env: dict[str, str]) -> Path:
    """The committed tree of the casstore checkout (HEAD), exported to ``dest``: what is
    measured is what is committed, and the build never writes into that checkout."""
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(casstore), "archive", "HEAD"], env=env,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def freeze_versions(lines: list[str]) -> dict[str, str]:
    """``pip freeze`` lines -> {normalized name: version (or the whole line for a path)}."""
    out = {}
    for line in lines:
        name, _, version = line.partition("==")
        if not version:
            name, _, version = line.partition(" @ ")
        out[re.sub(r"[-_.]+", "-", name).lower()] = version or line
    return out


def run_project(proj: dict[str, Any], args: argparse.Namespace, local: str | None) -> dict[str, Any]:
    name = proj["name"]
    work = Path(args.workdir) / args.label / name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    venv = work / "venv"
    env = base_env(work / "home", venv)
    result: dict[str, Any] = {"name": name, "shape": proj["shape"]}
    checkout = work / "checkout"
    result["revision"] = get_source(proj, local, checkout, env)
    sh([sys.executable, "-m", "venv", str(venv)], work, env)
    sh([str(venv / "bin/python"), "-m", "pip", "install", "-q", "-U", "pip"], work, env)
    sh([str(venv / "bin/python"), "-m", "pip", "install", "-q", *proj["install"]], checkout, env)
    print(f"[{name}] baseline", flush=True)
    base = run_suite("baseline", venv, checkout, proj["pytest"], env, args.timeout, args.repeat)
    result["baseline"] = asdict(base)
    print(f"[{name}] baseline: {base.counts} {base.wall_s}s {base.crash}", flush=True)

    mig = migrate(work, checkout, venv, proj, Path(args.casstore), env)
    result["migration"] = mig
    result["after"] = []
    if not mig["ok"]:
        print(f"[{name}] migration failed: {mig['steps'][-1]}", flush=True)
        return result
    # CI: a fresh clone of the migrated repository (no working copies), an empty cache
    ci = work / "ci"
    sh(["git", "clone", "-q", str(checkout), str(ci)], work, env)
    ci_env = base_env(work / "home-ci", venv)
    shutil.copytree(work / "home" / ".config", work / "home-ci" / ".config")
    pull = sh(["casstore", "pull", "--frozen"], ci, ci_env, check=False)
    mig["pull"] = {"exit": pull.returncode, "tail": (pull.stdout + pull.stderr).strip().splitlines()[-4:]}
    ci_env["CASSTORE_OFFLINE"] = "1"
    variants = [("after", [])]
    if proj.get("recording"):
        variants = [("after-kept", []), ("after-no-recording", ["-p", "no:recording"])]
    for label, extra in variants:
        run = run_suite(label, venv, ci, [*extra, *proj["pytest"]], ci_env, args.timeout,
                        args.repeat)
        run_d = asdict(run)
        run_d["lost"] = lost_tests(base, run)
        result["after"].append(run_d)
        print(f"[{name}] {label}: {run.counts} {run.wall_s}s {run.crash} lost={len(run_d['lost'])}",
              flush=True)
    if args.alternate:
        # the tree as it was before the migration, its cassette files back, casstore not loaded
        before = work / "before"
        sh(["git", "clone", "-q", str(checkout), str(before)], work, env)
        sh(["git", "checkout", "-q", "HEAD~1"], before, env)
        result["alternate"] = alternate(venv, (before, [*proj["pytest"], "-p", "no:casstore"], env),
                                        (ci, [*variants[0][1], *proj["pytest"]], ci_env), args)
        print(f"[{name}] alternate: {result['alternate']}", flush=True)
    return result


def alternate(venv: Path, base: tuple[Path, list[str], dict[str, str]],
              after: tuple[Path, list[str], dict[str, str]], args: argparse.Namespace) -> dict[str, Any]:
    """``args.alternate`` runs of the baseline and of the first after-run, taken in turn (a
    shared machine's load moves between runs far apart): the least wall time of each, their
    ratio, and the range of load averages the runs started under."""
    walls: dict[str, list[float]] = {"baseline": [], "after": []}
    loads: list[float] = []
    for i in range(args.alternate):
        for label, (cwd, pytest_args, env) in (("baseline", base), ("after", after)):
            run = run_once(f"alternate-{label}{i}", venv, cwd, pytest_args, env, args.timeout)
            walls[label].append(run.wall_s)
            loads.append(run.load or 0.0)
    least = {label: min(w) for label, w in walls.items()}
    return {"runs": args.alternate, "baseline_s": least["baseline"], "after_s": least["after"],
            "ratio": round(least["after"] / least["baseline"], 2), "load": [min(loads), max(loads)]}


def lost_tests(base: Run, after: Run) -> dict[str, str]:
    """Tests that passed in the baseline and not after, each with its cause in one line."""
    lost = {}
    for test, (outcome, _) in base.outcomes.items():
        if outcome != "passed":
            continue
        now, message = after.outcomes.get(test, ("not run", after.crash or "not collected"))
        if now != "passed":
            lost[test] = f"{now}: {message}"
    if not after.outcomes and base.passed:
        lost["(whole suite)"] = after.crash or "no tests ran"
    return lost


def machine() -> str:
    m = run_machine()
    load = m["load_avg_at_start"]
    assert isinstance(load, tuple)
    return (f"{m['cpu']}, {m['cores']} cores, {m['platform']}, Python {m['python']}, "
            f"load average {load[0]:.0f} at start")


def casstore_revision(path: Path) -> str:
    proc = subprocess.run(["git", "-C", str(path), "log", "-1", "--format=%h %s"], text=True,
                          capture_output=True)
    return proc.stdout.strip()[:90] or str(path)


def group_causes(lost: dict[str, str]) -> list[tuple[int, str, str]]:
    """Lost tests grouped by cause (outcome, error class, where raised): count, example, a test."""
    groups: dict[str, list[str]] = {}
    for test, cause in lost.items():
        head = cause.split(" [at ")[0]
        key = re.split(r":\s", head, maxsplit=2)[:2]
        where = cause.rsplit(" [at ", 1)[-1] if " [at " in cause else ""
        groups.setdefault(f"{key}{where}", []).append(test)
    rows = [(len(tests), lost[tests[0]], tests[0].split("::")[-1]) for tests in groups.values()]
    return sorted(rows, key=lambda row: -row[0])


def wall(run: dict[str, Any]) -> str:
    """A run's wall time, with the load average it started under when it was recorded."""
    load = run.get("load")
    return f"{run['wall_s']} s" + (f" (load {load:.0f})" if isinstance(load, (int, float)) else "")


def table(report: dict[str, Any]) -> str:
    rows = ["| project | revision | baseline passed / failed | wall | after: run | passed / failed | wall | lost |",
            "|---|---|---|---|---|---|---|---|"]
    causes: list[str] = []
    for r in report["projects"]:
        b = r.get("baseline")
        if "error" in r:
            rows.append(f"| {r['name']} | | harness error: {r['error']} | | | | | |")
            continue
        assert b is not None
        bpf = f"{b['counts'].get('passed', 0)} / {b['counts'].get('failed', 0) + b['counts'].get('error', 0)}"
        if b.get("crash"):
            bpf += f" ({b['crash'][:80]})"
        afters = r["after"] or [{"label": "after", "counts": {}, "wall_s": "—", "lost": {},
                                 "crash": "migration failed: " + r["migration"]["steps"][-1]["cmd"]}]
        for i, a in enumerate(afters):
            apf = f"{a['counts'].get('passed', 0)} / {a['counts'].get('failed', 0) + a['counts'].get('error', 0)}"
            if a.get("crash"):
                apf += f" ({a['crash'][:80]})"
            head = (f"| {r['name']} | `{r['revision']}` | {bpf} | {wall(b)}"
                    if i == 0 else "| | | | ")
            rows.append(f"{head} | {a['label']} | {apf} | {wall(a)} | {len(a['lost'])} |")
            for (n, example, test) in group_causes(a["lost"]):
                causes.append(f"- {r['name']}, {a['label']}: **{n}** — {example} (e.g. `{test}`)")
    out = [f"casstore: `{report['casstore']}`; machine: {report['machine']}; "
           f"{report['date']}; command: `{report['command']}`", "", *rows]
    timed = [r for r in report["projects"] if r.get("alternate")]
    if timed:
        out += ["", "Wall time, baseline and after-run taken in turn (`--alternate`): the least of each, "
                "the ratio after ÷ baseline, the load averages the runs started under:", "",
                "| project | runs each | baseline | after | ratio | load |", "|---|---|---|---|---|---|"]
        for r in timed:
            t = r["alternate"]
            out.append(f"| {r['name']} | {t['runs']} | {t['baseline_s']} s | {t['after_s']} s | {t['ratio']} | "
                       f"{t['load'][0]:.0f}–{t['load'][1]:.0f} |")
    for r in report["projects"]:
        mig = r.get("migration")
        if mig and mig.get("changed_by_install"):
            out += ["", f"Installing casstore into {r['name']}'s environment changed what it had: "
                    + ", ".join(f"`{p}`" for p in mig["changed_by_install"])]
    if causes:
        out += ["", "Tests lost (passed before, not after), grouped by cause: how many, the first "
                "one's error, where it was raised:", "", *causes]
    return "\n".join(out)


def write_doc(text: str, label: str) -> None:
    """Puts ``text`` between the doc's markers for ``label``, adding them at the end if missing."""
    begin, end = f"<!-- compat:{label}:begin -->", f"<!-- compat:{label}:end -->"
    doc = DOC.read_text() if DOC.exists() else "# Compatibility check\n"
    if begin not in doc:
        doc = doc.rstrip("\n") + f"\n\n### {label}\n\n{begin}\n{end}\n"
    head, rest = doc.split(begin, 1)
    tail = rest.split(end, 1)[1] if end in rest else "\n"
    DOC.write_text(f"{head}{begin}\n{text}\n{end}{tail}")


def shown_args(argv: list[str]) -> list[str]:
    """The command line as the docs show it: no path of this machine (a local clone given to
    --source is <NAME clone>; a --casstore checkout is named relative to this repository)."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        flag = argv[i - 1] if i else ""
        if flag == "--source" and "=" in arg:
            name = arg.split("=", 1)[0]
            arg = f"{name}=<{name} clone>"
        elif flag == "--casstore":
            path = Path(arg).resolve()
            arg = os.path.relpath(path, REPO) if path.is_relative_to(REPO) else "<other checkout>"
        out.append(arg)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--projects", default=str(HERE / "compat_projects.toml"))
    ap.add_argument("--only", action="append", default=[], help="project name (repeatable)")
    ap.add_argument("--source", action="append", default=[], metavar="NAME=PATH",
                    help="a local clone or bare git dir of a git project")
    ap.add_argument("--casstore", default=str(REPO), help="casstore checkout to install (default: this one)")
    ap.add_argument("--label", default="main", help="names the results file and work folder")
    ap.add_argument("--workdir", default="/tmp/casstore-compat")
    ap.add_argument("--timeout", type=float, default=1200, help="seconds per pytest run")
    ap.add_argument("--repeat", type=int, default=1, help="runs per suite; wall time is the least")
    ap.add_argument("--alternate", type=int, default=0, metavar="N",
                    help="then N runs each of the baseline (the tree before the migration, casstore not "
                         "loaded) and the first after-run, in turn: the least wall times and their ratio")
    ap.add_argument("--write-doc", action="store_true", help=f"put the table into {DOC.relative_to(REPO)} (its section for --label)")
    ap.add_argument("--render", action="store_true",
                    help="run nothing: print (and --write-doc) the table of the --label results file")
    args = ap.parse_args(argv)
    out = HERE / "results" / f"compat-{args.label}.json"
    if args.render:
        text = table(json.loads(out.read_text()))
        print(text)
        if args.write_doc:
            write_doc(text, args.label)
        return 0
    sources = dict(s.split("=", 1) for s in args.source)
    with open(args.projects, "rb") as fh:
        projects = tomllib.load(fh)["project"]
    if args.only:
        projects = [p for p in projects if p["name"] in args.only]
    report: dict[str, Any] = {
        "casstore": casstore_revision(Path(args.casstore)), "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python benchmarks/compat.py " + " ".join(shown_args(argv if argv is not None else sys.argv[1:])),
        "projects": [],
    }
    out.parent.mkdir(exist_ok=True)
    for proj in projects:
        try:
            report["projects"].append(run_project(proj, args, sources.get(proj["name"])))
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
            print(f"[{proj['name']}] harness error: {exc}", file=sys.stderr, flush=True)
            report["projects"].append({"name": proj["name"], "shape": proj["shape"],
                                       "error": str(exc).splitlines()[0][:200]})
        out.write_text(json.dumps(report, indent=1, default=list))  # each project as it ends
    text = table(report)
    print(text)
    if args.write_doc:
        write_doc(text, args.label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
