#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Checks of the Markdown pages of the tree, without the network.

  check-docs.py links SRC          every relative link and image in the Markdown pages of SRC
                                   (README.md, docs/, and every *.md outside build folders)
                                   resolves: the file or folder exists and, for a link with
                                   #anchor into a Markdown page, that page has a heading whose
                                   GitHub slug is the anchor (or an <a name>/id of that name).
                                   http(s), mailto and other links with a scheme are skipped.
  check-docs.py readme-lines SRC N README.md is at most N lines: the first screen (README.md
                                   says what kvblk is, the two commands, one result, links).
  check-docs.py self-test          the links check fails on a missing file, a missing anchor
                                   and a broken image, and passes links in code, external links
                                   and good anchors: run on pages it writes to a temporary folder.

Links inside fenced code blocks and inline code are not links and are not checked. Exit status:
0 all good, 1 something is broken (each printed as FILE:LINE: ...), 2 bad usage.
"""

import os
import re
import sys
import tempfile
import urllib.parse

SKIP_DIRS = {".git", "Testing", "__pycache__", "node_modules"}
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
INLINE_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"<a\s[^>]*\b(?:name|id)\s*=\s*[\"']([^\"']+)[\"']", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def markdown_files(src):
    """README.md, docs/ and every other *.md of the tree, build folders left out."""
    out = []
    for root, dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not (rel == "." and (d.startswith("build") or d.startswith("obj-"))))
        if rel.split(os.sep)[0] == "debian" and rel != "debian":
            dirs[:] = []  # dpkg-buildpackage's staging folders
            continue
        out += [os.path.join(root, f) for f in sorted(files) if f.endswith(".md")]
    return out


def strip_code_spans(line):
    """The line with inline code spans blanked (same length), so that nothing in them counts."""
    out, i = [], 0
    while i < len(line):
        if line[i] == "`":
            n = len(line) - len(line[i:].lstrip("`"))
            ticks = line[i:i + n]
            end = line.find(ticks, i + n)
            while end != -1 and end + n < len(line) and line[end + n] == "`":
                end = line.find(ticks, end + n + 1)
            if end == -1:
                out.append(ticks)
                i += n
                continue
            out.append(" " * (end + n - i))
            i = end + n
        else:
            out.append(line[i])
            i += 1
    return "".join(out)


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fence = None
    for no, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip().strip(fence[0]):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield no, line


def slug(heading):
    """GitHub's anchor of a heading: the rendered text, lower case, punctuation dropped, spaces as '-'."""
    parts = re.split(r"(`+)(.*?)\1", heading)
    text = []
    for i in range(0, len(parts), 3):
        t = parts[i]
        t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", t)  # links and images: their text
        t = re.sub(r"<[^>]+>", "", t)                     # HTML tags
        t = re.sub(r"(?<!\w)_+|_+(?!\w)", "", t)          # emphasis underscores
        text.append(t)
        if i + 2 < len(parts):
            text.append(parts[i + 2])                     # code: its text as it is
    s = "".join(text).strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


ANCHORS = {}  # page -> its anchors, read once


def anchors(path):
    cache = ANCHORS
    if path not in cache:
        seen, out = {}, set()
        text = open(path, encoding="utf-8").read()
        lines = list(prose_lines(text))
        for idx, (no, line) in enumerate(lines):
            m = ATX.match(line)
            title = None
            if m:
                title = m.group(2) or ""
            elif idx + 1 < len(lines) and lines[idx + 1][0] == no + 1 and line.strip() \
                    and re.match(r"^ {0,3}(=+|-+)\s*$", lines[idx + 1][1]) and not line.lstrip().startswith(("-", "*", "|", ">")):
                title = line.strip()
            if title is not None:
                base = slug(title)
                n = seen.get(base, 0)
                seen[base] = n + 1
                out.add(base if n == 0 else f"{base}-{n}")
            for a in HTML_ANCHOR.findall(line):
                out.add(a)
        cache[path] = out
    return cache[path]


def check_links(src):
    src = os.path.abspath(src)
    bad, count = [], 0
    for page in markdown_files(src):
        rel_page = os.path.relpath(page, src)
        text = open(page, encoding="utf-8").read()
        for no, line in prose_lines(text):
            plain = strip_code_spans(line)
            targets = [m.group(2) for m in INLINE_LINK.finditer(plain)]
            m = REF_DEF.match(plain)
            if m:
                targets.append(m.group(2))
            for target in targets:
                count += 1
                why = broken(src, page, target.strip("<>"))
                if why:
                    bad.append(f"{rel_page}:{no}: ({target}): {why}")
    return bad, count


def broken(src, page, target):
    if not target:
        return "empty link"
    if SCHEME.match(target) or target.startswith("//"):
        return None  # external: not fetched
    path, _, anchor = target.partition("#")
    path = urllib.parse.unquote(path.split("?", 1)[0])
    if not path:
        dest = page
    elif path.startswith("/"):
        dest = os.path.join(src, path.lstrip("/"))
    else:
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path))
    if not os.path.exists(dest):
        return f"{os.path.relpath(dest, src)} does not exist"
    if anchor and dest.endswith(".md") and os.path.isfile(dest):
        if urllib.parse.unquote(anchor) not in anchors(dest):
            return f"{os.path.relpath(dest, src)} has no heading with anchor #{anchor}"
    return None


def cmd_links(src):
    if not os.path.isfile(os.path.join(src, "README.md")):
        print(f"check-docs: {src} has no README.md", file=sys.stderr)
        return 2
    bad, count = check_links(src)
    for b in bad:
        print(b)
    pages = len(markdown_files(src))
    if bad:
        print(f"check-docs links: {len(bad)} of {count} links broken in {pages} pages")
        return 1
    print(f"check-docs links: {count} links in {pages} pages resolve")
    return 0


def cmd_readme_lines(src, limit):
    n = len(open(os.path.join(src, "README.md"), encoding="utf-8").read().splitlines())
    if n > limit:
        print(f"check-docs: README.md has {n} lines, more than {limit}: move the rest to docs/")
        return 1
    print(f"check-docs readme-lines: README.md has {n} lines (at most {limit})")
    return 0


def cmd_self_test():
    with tempfile.TemporaryDirectory(prefix="kvblk-check-docs.") as d:
        os.makedirs(os.path.join(d, "docs", "img"))
        open(os.path.join(d, "docs", "img", "plot.png"), "wb").close()
        pages = {
            "README.md": "# Top\n\n[guide](docs/guide.md) and [its part](docs/guide.md#a-part-b)\n"
                         "![plot](docs/img/plot.png) [web](https://example.com/x.md#nothing)\n"
                         "`[in code](nowhere.md)`\n\n```\n[in a fence](nowhere.md)\n```\n",
            "docs/guide.md": "# Guide\n\n## A part: `b`\n\n## A part: `b`\n\n[again](#a-part-b-1) "
                             "[up](../README.md#top) [dir](img/)\n\n[ref]: guide.md#guide\n",
        }
        for name, text in pages.items():
            with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                f.write(text)
        bad, count = check_links(d)
        if bad or count != 8:
            print(f"self-test: good pages: {count} links (expected 8), broken: {bad}")
            return 1
        breakages = {
            "missing file": ("docs/guide.md", "[dir](img/)", "[gone](gone.md)"),
            "missing anchor": ("README.md", "#a-part-b)", "#a-part-c)"),
            "broken image": ("README.md", "img/plot.png", "img/plot.svg"),
            "second duplicate heading": ("docs/guide.md", "#a-part-b-1", "#a-part-b-2"),
            "reference definition": ("docs/guide.md", "guide.md#guide", "guide.md#nope"),
        }
        for what, (name, old, new) in breakages.items():
            path = os.path.join(d, name)
            text = open(path, encoding="utf-8").read()
            assert old in text, (what, old)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.replace(old, new, 1))
            ANCHORS.clear()
            bad, _ = check_links(d)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            ANCHORS.clear()
            if len(bad) != 1:
                print(f"self-test: a {what} gave {len(bad)} reports, not 1: {bad}")
                return 1
            print(f"self-test: a {what} is found: {bad[0]}")
        with open(os.path.join(d, "README.md"), "a", encoding="utf-8") as f:
            f.write("x\n" * 60)
        if cmd_readme_lines(d, 60) != 1:
            print("self-test: a README.md over 60 lines passed")
            return 1
    print("self-test: OK")
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "links":
        return cmd_links(argv[2])
    if len(argv) == 4 and argv[1] == "readme-lines" and argv[3].isdigit():
        return cmd_readme_lines(argv[2], int(argv[3]))
    if len(argv) == 2 and argv[1] == "self-test":
        return cmd_self_test()
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
