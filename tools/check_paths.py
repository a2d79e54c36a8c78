#!/usr/bin/env python3
"""Every repository path the docs and the bench scripts name must exist, every shell script under
bench/ must parse, and every relative Markdown link (file and heading) must resolve.

The README, docs/ and bench/ name hundreds of files: the script that produced a result, the patch
an experiment applied, the header a design note explains. Files get renamed and moved; a record
whose command names a script that is gone can no longer be rerun, and nothing else notices. This
check reads README.md, docs/*.md, bench/**/*.md, bench/**/*.sh, bench/*.py and tools/*.py, finds
each token that starts with one of the repository's top-level folders (bench/, docs/, src/, ...)
and fails when no such file or folder exists.

What counts as a path:
- a token followed by a pattern (`{`, `*`, `<` or `$`) is skipped: `bench/results/x.{md,json}`;
- a token that ends in `_` or `-` and starts an existing path is accepted, since the text goes on
  to complete it (a name built by a script, or cut at a placeholder);
- a path given as a git object, `<commit>:path`
  (`git show 0ef1796^:bench/experiments/decode_merge_vec4.patch`), is history: the file was
  deleted and the text says where it still is. Once a file names a path so, its other mentions of
  that path (a command as it was run) are accepted too. Where the checkout has that commit (not
  an export, not a shallow clone), the object itself must exist;
- paths the build or a script creates (gitignored folders, CMake targets) are listed in CREATED.
Usage: tools/check_paths.py [--root DIR]; ctest `doc_paths`. Exit 1 with one line per dead path.
"""
import argparse
import bisect
import pathlib
import re
import subprocess
import sys

TOP = ("bench", "docs", "tools", "examples", "src", "include", "tests", "cmake", "apps")
PATH = re.compile(r"(?<![\w/.$-])((?:%s)/[A-Za-z0-9_./-]*[A-Za-z0-9_/-])" % "|".join(TOP))
GIT_OBJECT = re.compile(r"([0-9a-f]{7,40}[~^0-9]*):$")
# Made by the build or by a script, never committed.
CREATED = {"bench/.venv-bench"}


def sources(root):
    yield root / "README.md"
    yield from sorted(root.glob("docs/*.md"))
    for pattern in ("bench/**/*.md", "bench/**/*.sh", "bench/*.py", "tools/*.py"):
        yield from sorted(root.glob(pattern))


def tracked_and_present(root):
    """Every file and folder a clean clone has, as 'a/b/c' strings, for prefix checks: in a git
    checkout the files git tracks or would add (so that a file only this machine has, ignored or
    built, does not count), elsewhere every file under root."""
    try:
        r = subprocess.run(["git", "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, text=True)
        files = r.stdout.splitlines() if r.returncode == 0 else None
    except FileNotFoundError:
        files = None
    if files is None:
        files = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    out = set()
    for f in files:
        parts = f.split("/")
        out.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return out


def git_has(root, obj):
    try:
        return subprocess.run(["git", "-C", str(root), "cat-file", "-e", obj], capture_output=True).returncode == 0
    except FileNotFoundError:  # no git: history cannot be checked, nor denied
        return False


def dead_paths(root):
    present = tracked_and_present(root)
    ordered = sorted(present)
    dead = {}
    for f in sources(root):
        text = f.read_text(errors="replace")
        history = set()
        for m in PATH.finditer(text):
            rev = GIT_OBJECT.search(text[max(0, m.start() - 48):m.start()])
            if rev:
                path = m.group(1).rstrip("/.")
                history.add(path)
                if git_has(root, rev.group(1) + "^{commit}") and not git_has(root, f"{rev.group(1)}:{path}"):
                    dead.setdefault(f"{rev.group(1)}:{path}", []).append(f.relative_to(root).as_posix())
        for m in PATH.finditer(text):
            token = m.group(1)
            if any(c in text[m.end():m.end() + 2] for c in "{*<$"):
                continue  # a pattern: the text after the token completes it
            path = token.rstrip("/.")
            if path in present or path in CREATED or path in history:
                continue
            if path.endswith(("_", "-")):  # the start of a longer name the text builds
                i = bisect.bisect_left(ordered, path)
                if i < len(ordered) and ordered[i].startswith(path):
                    continue
            dead.setdefault(path, []).append(f.relative_to(root).as_posix())
    return dead


def unparsable_scripts(root):
    bad = []
    for s in sorted(root.glob("bench/**/*.sh")):
        r = subprocess.run(["bash", "-n", str(s)], capture_output=True, text=True)
        if r.returncode != 0:
            bad.append((s.relative_to(root).as_posix(), r.stderr.strip().splitlines()[0]))
    return bad


def heading_anchors(md):
    """The anchors GitHub gives a Markdown file's headings: lower case, punctuation but `-` and `_`
    dropped, spaces as `-`."""
    out = set()
    for line in md.read_text(errors="replace").splitlines():
        m = re.match(r"#+\s+(.*)$", line)
        if m:
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def broken_links(root):
    """Relative Markdown links `[text](file#anchor)` into the repository whose file or heading is
    gone (code blocks skipped)."""
    bad = []
    for f in [root / "README.md", *sorted(root.glob("docs/*.md")), *sorted(root.glob("bench/**/*.md"))]:
        text = re.sub(r"```.*?```", "", f.read_text(errors="replace"), flags=re.S)
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            link = m.group(1)
            if re.match(r"[a-z]+:", link):
                continue  # https:, mailto:
            path, _, anchor = link.partition("#")
            target = (f.parent / path) if path else f
            if not target.resolve().is_relative_to(root.resolve()):
                continue  # outside the repository (../shared/DESIGN.md): not this checkout's to check
            where = f.relative_to(root).as_posix()
            if not target.exists():
                bad.append((where, link, "no such file"))
            elif anchor and target.suffix == ".md" and anchor not in heading_anchors(target):
                bad.append((where, link, "no such heading"))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent))
    root = pathlib.Path(ap.parse_args().root)
    dead = dead_paths(root)
    for path, where in sorted(dead.items()):
        print(f"dead path {path} (named in {', '.join(sorted(set(where)))})")
    bad = unparsable_scripts(root)
    for script, err in bad:
        print(f"script does not parse: {script}: {err}")
    links = broken_links(root)
    for where, link, why in links:
        print(f"broken link in {where}: ({link}): {why}")
    n_files = sum(1 for _ in sources(root))
    if dead or bad or links:
        print(f"FAIL: {len(dead)} dead paths, {len(bad)} scripts that do not parse, {len(links)} broken links, "
              f"in {n_files} files")
        return 1
    print(f"paths: every named path exists, every bench script parses, every Markdown link resolves "
          f"({n_files} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
