"""Issue #16, item 4: gc never deletes a fresh pin.

The scenario, with real git repositories and clones sharing one store (a local folder, and
the moto S3 server on loopback, loose and packed):

1. clone C pins cassette x on a branch it later abandons, and pushes: the object is uploaded;
   days pass (the store says the object is 10 days old);
2. clone B pins the very same content (same digest) on a new branch, pushes the branch to
   origin, and `casstore push` finds the object present and uploads nothing;
3. clone A, which has not fetched B's commit, runs `casstore gc --remote` (default grace);
4. a CI clone of B's branch runs `casstore pull --frozen`.

Before the fix, step 3 deleted the object and step 4 failed. Now B's push leaves a liveness
marker (docs/design.md, "gc and re-pins") that gc honours within the grace period.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from casstore.ops import sync
from casstore.ops.gc import gc
from casstore.project import Project
from casstore.store.backends import object_key, open_store
from tests.helpers.commands import git
from tests.helpers.figures import record
from tests.helpers.gitrepo import age_tree, commit, pin
from tests.helpers.s3 import age_s3_bucket

DAY = 86400
SECTION = "gc and re-pins"


class Clones:
    """An origin repository and clones of it, each with its own cache (its own machine)."""

    def __init__(self, tmp_path: Path, casstore, monkeypatch: pytest.MonkeyPatch, remote: str,  # type: ignore[no-untyped-def]
                 pack_threshold: int | None = None) -> None:
        self.tmp, self.casstore, self.mp, self.remote = tmp_path, casstore, monkeypatch, remote
        self.origin = tmp_path / "origin.git"
        git("init", "-q", "--bare", str(self.origin), cwd=tmp_path)
        seed = self.clone("seed")
        assert casstore("init", "--remote", remote, cwd=seed).exit_code == 0
        if pack_threshold is not None:
            cfg = seed / "casstore.toml"
            cfg.write_text(cfg.read_text().replace("[remote]\n", f"[remote]\npack_threshold = {pack_threshold}\n"))
        commit(seed, "casstore init")
        git("push", "-q", "origin", "HEAD:main", cwd=seed)

    def clone(self, who: str, branch: str | None = None) -> Path:
        where = self.tmp / who
        args = ["clone", "-q"] + (["-b", branch] if branch else []) + [str(self.origin), str(where)]
        git(*args, cwd=self.tmp)
        return where

    def be(self, who: str) -> None:
        """Run the next commands as ``who``: another machine, another cache."""
        self.mp.setenv("CASSTORE_CACHE_DIR", str(self.tmp / f"cache-{who}"))

    def run(self, who: str, *args: str, where: Path, ok: bool = True):  # type: ignore[no-untyped-def]
        self.be(who)
        r = self.casstore(*args, cwd=where)
        if ok:
            assert r.exit_code == 0, (args, r.stdout, r.stderr)
        return r


def _digests(store_url: str, base: Path) -> set[str]:
    store = open_store(store_url, base=base)
    return {"sha256:" + i.key.split("/", 2)[2].replace("/", "") for i in store.list("objects/")}


def run_scenario(cl: Clones, age, *, extra: int = 0) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """Steps 1-4 above. ``extra`` abandoned cassettes go up with x (enough to make a pack)."""
    a, b, c = cl.clone("A"), cl.clone("B"), cl.clone("C")
    # 1. C pins x (and the extras) on a branch it abandons; pushes; days pass
    cl.be("C")
    git("checkout", "-q", "-b", "abandoned", cwd=c)
    x = pin(cl.casstore, c, "x", answer="the same recording")
    extras = [pin(cl.casstore, c, f"e{i}", answer=f"abandoned {i}") for i in range(extra)]
    commit(c, "abandoned work")
    cl.run("C", "push", "-q", where=c)
    stored = _digests(cl.remote, c)
    assert x in stored and set(extras) <= stored
    age(10 * DAY)
    # 2. B pins the same content on a new branch and publishes it; push uploads nothing
    cl.be("B")
    git("checkout", "-q", "-b", "feature", cwd=b)
    assert pin(cl.casstore, b, "x", answer="the same recording") == x
    commit(b, "feature: pin x")
    git("push", "-q", "origin", "feature", cwd=b)
    r = cl.run("B", "push", "--json", where=b)
    assert r.json["done"] == [] and r.json["skipped"] == ["x"], r.stdout
    # 3. A has not fetched feature: nothing A's refs reach pins x; gc runs with the default grace
    assert "feature" not in git("branch", "-a", cwd=a).stdout
    r = cl.run("A", "gc", "--remote", "--json", where=a)
    gc = r.json
    deleted = {i["digest"] for i in gc["deleted"] if i["where"] == "store"}
    assert x not in deleted, "gc deleted an object a push had just re-pinned"
    assert deleted == set(extras), "gc must still sweep what nobody re-pinned"
    assert gc["kept_refreshed"] >= 1
    left = _digests(cl.remote, a)
    assert x in left and not (set(extras) & left)
    # 4. CI on B's branch: a fresh clone, a fresh cache, pull --frozen
    ci = cl.clone("CI", branch="feature")
    r = cl.run("CI", "pull", "--frozen", "--json", where=ci)
    assert r.json["done"] == ["x"]
    cl.run("CI", "verify", where=ci)
    record(SECTION, scenarios=1, repinned_objects_kept=1, abandoned_objects_swept=len(extras))
    return {"a": a, "b": b, "x": x}


def expire_markers(cl: Clones, out: dict[str, object], age) -> None:  # type: ignore[no-untyped-def]
    """A marker protects for the grace period only: once it is older, gc from a clone that
    still has not fetched deletes the object (and the marker); a fetched clone never does."""
    a, x = out["a"], out["x"]
    age(3 * DAY)
    git("fetch", "-q", cwd=a)
    r = cl.run("A", "gc", "--remote", "--json", where=a)  # A now sees origin/feature: x is pinned
    assert x not in {i["digest"] for i in r.json["deleted"]}
    assert r.json["markers_deleted"] >= 1 and r.json["kept_refreshed"] == 0
    assert not list(open_store(cl.remote, base=a).list("live/")), "expired markers are removed"
    git("update-ref", "-d", "refs/remotes/origin/feature", cwd=a)  # forget it again
    r = cl.run("A", "gc", "--remote", "--json", where=a)
    assert x in {i["digest"] for i in r.json["deleted"] if i["where"] == "store"}


def test_gc_keeps_a_re_pinned_object_on_a_local_folder_store(tmp_path: Path, casstore,  # type: ignore[no-untyped-def]
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "shared-store"
    cl = Clones(tmp_path, casstore, monkeypatch, str(store))

    def age(seconds: float) -> None:
        age_tree(store, seconds)

    out = run_scenario(cl, age, extra=2)
    expire_markers(cl, out, age)


def test_gc_keeps_a_re_pinned_object_on_s3(tmp_path: Path, casstore, s3_url: str,  # type: ignore[no-untyped-def]
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    cl = Clones(tmp_path, casstore, monkeypatch, s3_url, pack_threshold=0)  # loose objects
    bucket = s3_url.split("/")[2]

    def age(seconds: float) -> None:
        assert age_s3_bucket(bucket, seconds) > 0

    out = run_scenario(cl, age, extra=2)
    expire_markers(cl, out, age)


def test_gc_keeps_a_re_pinned_pack_member_on_s3(tmp_path: Path, casstore, s3_url: str,  # type: ignore[no-untyped-def]
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    cl = Clones(tmp_path, casstore, monkeypatch, s3_url, pack_threshold=2)
    bucket = s3_url.split("/")[2]

    def age(seconds: float) -> None:
        assert age_s3_bucket(bucket, seconds) > 0

    out = run_scenario(cl, age, extra=3)  # x and three extras go up as one pack
    packs = [i.key for i in open_store(s3_url).list("packs/") if i.key.endswith(".pack")]
    assert len(packs) == 1, "gc rewrote the pack keeping x only"
    expire_markers(cl, out, age)


def test_a_push_racing_with_gc_keeps_its_object(tmp_path: Path, casstore,  # type: ignore[no-untyped-def]
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The interleaving the markers' order exists for: gc has listed the markers and chosen x;
    B's push writes its marker, finds x present and uploads nothing; then gc deletes x. gc's
    second listing of the markers sees B's and puts x back (library API, real stores)."""

    store_dir = tmp_path / "shared-store"
    cl = Clones(tmp_path, casstore, monkeypatch, str(store_dir))
    a, b, c = cl.clone("A"), cl.clone("B"), cl.clone("C")
    cl.be("C")
    x = pin(casstore, c, "x", answer="raced")
    cl.run("C", "push", "-q", where=c)
    age_tree(store_dir, 10 * DAY)
    cl.be("B")
    assert pin(casstore, b, "x", answer="raced") == x
    commit(b, "pin x")

    sweeper = Project.discover(a)
    real = sweeper.store
    pushed: list[object] = []

    class PushDuringDelete:
        """The real store; B's real push runs just before gc's first delete."""

        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(real, name)

        def delete(self, key: str) -> None:
            if not pushed:
                cl.be("B")
                pushed.append(sync.push(Project.discover(b)))
                cl.be("A")
            real.delete(key)

    sweeper._store = PushDuringDelete()  # type: ignore[assignment]
    cl.be("A")
    rep = gc(sweeper, remote=True)
    assert pushed and pushed[0].skipped == ["x"] and pushed[0].done == []  # type: ignore[attr-defined]
    assert x not in {i.digest for i in rep.deleted if i.where == "store"}
    assert rep.kept_refreshed == 1
    assert x in _digests(str(store_dir), a), "gc deleted the object of a push that ran during it"
    ci = cl.clone("CI2")
    git("fetch", "-q", str(b), "HEAD:refs/heads/b-work", cwd=ci)
    git("checkout", "-q", "b-work", cwd=ci)
    r = cl.run("CI2", "pull", "--frozen", where=ci)
    assert r.exit_code == 0
    record(SECTION, raced_pushes_kept=1)


def test_a_push_finding_its_object_gone_after_its_marker_uploads_it(repo: Path, casstore,  # type: ignore[no-untyped-def]
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The other interleaving: gc deletes the object after the push's first look, and after
    gc's second listing of the markers (so gc puts nothing back). The push's second look,
    which follows its marker, finds the object gone and uploads it (a local folder's second
    look lists the fan-out folders instead of a stat a key)."""
    from casstore.store import liveness

    digests = {n: pin(casstore, repo, n, answer=f"answer {n}") for n in ("a", "b")}
    commit(repo, "pins")
    assert casstore("push", "-q", cwd=repo).exit_code == 0
    store = Project.discover(repo).store
    real_marker = liveness.write_marker

    def marker_then_deletion(st, names, **kw):  # type: ignore[no-untyped-def]
        key = real_marker(st, names, **kw)
        store.delete(object_key(digests["a"]))  # gc's deletion lands between the two looks
        return key

    monkeypatch.setattr(liveness, "write_marker", marker_then_deletion)
    r = casstore("push", "--json", cwd=repo)
    assert r.exit_code == 0, r.stderr
    assert r.json["done"] == ["a"] and r.json["skipped"] == ["b"], r.stdout
    assert store.info(object_key(digests["a"])) is not None
    assert casstore("verify", "--remote", cwd=repo).exit_code == 0
