#!/usr/bin/env python3
"""Documentation lint: docs that cannot drift silently.

Fails (exit 1, one `file:line: kind: message` per finding) when

1. a kernhub command or option named in the docs (README.md, CONTRIBUTING.md,
   docs/*.md: code spans and code-block lines), in the CLI's own --help text
   or in a message of the CLI (string literals in cli/) does not exist. The
   truth is the built CLI: `kernhub --help` and every subcommand's --help,
   discovered recursively.
2. a relative markdown link names a missing file or a heading the target
   lacks (GitHub's anchors), or a source file cites a missing section: the
   page docs/PAGE.md or README, a comma, then the heading in double quotes.
3. a KERNHUB_* variable, an `Options::field` or a kh_hub_set key is named
   that the settings table of docs/configuration.md lacks.
4. a string literal in src/ names a CLI flag or a kernhub command (the
   library says what to do in words; each interface adds its own hints).
5. README's Quick start runs another test command than .ci/run does.

Standard library only. `--self-test` plants one error of each kind in a copy
of the files the lint reads and checks that exactly that one is reported.
"""

import argparse
import bisect
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from urllib.parse import unquote

# --- what the lint reads ------------------------------------------------------

SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "venv"}
SOURCE_EXTS = (".cpp", ".hpp", ".h", ".c", ".cc")
CITING_EXTS = (".cpp", ".hpp", ".h", ".py", ".sh", ".cmake")

# Options fields that are no setting: they carry objects a program hands in,
# not values a user sets (the progress-event callback, the cancel flag, a
# torch runtime a program has loaded itself).
NON_SETTING_OPTIONS_FIELDS = {"events", "cancel", "torch"}
# KERNHUB_* names the docs mention on purpose although no setting has them.
NON_SETTING_VARIABLES = {
    # docs/configuration.md: the example of a typo the library warns about.
    "KERNHUB_RETRYS",
    "KERNHUB_REF_TTL_SECONDS",
}
# Flags of other programs that the docs name in a bare code span without
# ever showing the program's command line (such a line would teach the lint
# the flag by itself: see foreign_flags).
FOREIGN_FLAGS = {
    "--no-deps",  # pip: how the test suite installs torch
    "--require-checks",  # the test executables' runner (tests/support/catch_main.cpp)
    "--something",  # docs/ARCHITECTURE.md: "a CLI flag (`--something`)", a placeholder
}


_walks = {}


def walk(root, top, want):
    """Files under root/top (a folder) whose relative path `want` accepts, sorted."""
    return [rel for rel in all_files(root, top) if want(rel)]


def all_files(root, top):
    if (root, top) not in _walks:
        _walks[(root, top)] = _all_files(root, top)
    return _walks[(root, top)]


def _all_files(root, top):
    out = []
    base = os.path.join(root, top)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
            out.append(rel)
    return out


def is_build_dir(rel):
    first = rel.split("/", 1)[0]
    return first.startswith("build")


def doc_pages(root):
    """README.md, CONTRIBUTING.md and docs/*.md (the manual; not CHANGELOG.md)."""
    pages = [p for p in ("README.md", "CONTRIBUTING.md") if os.path.isfile(os.path.join(root, p))]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        pages += sorted("docs/" + n for n in os.listdir(docs) if n.endswith(".md"))
    return pages


def linking_pages(root):
    pages = doc_pages(root)
    if os.path.isfile(os.path.join(root, "CHANGELOG.md")):
        pages.insert(1, "CHANGELOG.md")
    return pages


def sources(root, top):
    return walk(root, top, lambda rel: rel.endswith(SOURCE_EXTS))


def citing_files(root):
    out = []
    for top in ("src", "include", "cli", "tests"):
        out += walk(root, top, lambda rel: rel.endswith(CITING_EXTS) or rel.endswith("/CMakeLists.txt"))
    return out


def cmake_files(root):
    out = [p for p in ("CMakeLists.txt",) if os.path.isfile(os.path.join(root, p))]
    for top in sorted(os.listdir(root)):
        if os.path.isdir(os.path.join(root, top)) and top not in SKIP_DIRS and not top.startswith(".") \
                and not is_build_dir(top):
            out += walk(root, top, lambda rel: rel.endswith("/CMakeLists.txt") or rel.endswith(".cmake"))
    return out


def script_files(root):
    out = [p for p in (".ci/run",) if os.path.isfile(os.path.join(root, p))]
    for top in ("tests", "bench", "examples", ".ci"):
        out += walk(root, top, lambda rel: rel.endswith(".sh"))
    return sorted(set(out))


def input_files(root):
    """Every file the lint reads (the self-test copies these)."""
    files = set(linking_pages(root))
    for top in ("src", "cli", "include"):
        files.update(sources(root, top))
    files.update(citing_files(root))
    files.update(cmake_files(root))
    files.update(script_files(root))
    return sorted(files)


_texts = {}


def read(root, rel):
    key = (root, rel)
    if key not in _texts:
        try:
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                _texts[key] = f.read()
        except OSError:
            _texts[key] = None
    return _texts[key]


_newlines = {}


def line_of(text, offset):
    if text not in _newlines:
        _newlines[text] = [i for i, c in enumerate(text) if c == "\n"]
    return bisect.bisect_left(_newlines[text], offset) + 1


class Findings:
    def __init__(self):
        self.items = []

    def add(self, where, line, kind, message):
        item = "%s:%d: %s: %s" % (where, line, kind, message)
        if item not in self.items:
            self.items.append(item)


# --- the CLI ------------------------------------------------------------------


class Command:
    def __init__(self, path):
        self.path = path  # ("cache", "ls")
        self.options = set()  # "--json", "-q"
        self.subcommands = {}  # name -> Command
        self.help = ""

    def name(self):
        return " ".join(("kernhub",) + self.path)


def run_help(cli, path):
    result = subprocess.run([cli, *path, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True, timeout=30)
    if result.returncode != 0:
        raise RuntimeError("%s %s --help exited %d: %s" % (cli, " ".join(path), result.returncode,
                                                           result.stdout.strip()[:200]))
    return result.stdout


def discover(cli, path=()):
    """The command tree below `path`, from CLI11's help text."""
    command = Command(path)
    command.help = run_help(cli, path)
    section = None
    for line in command.help.splitlines():
        if re.match(r"^\S.*:$", line):
            section = line[:-1]
            continue
        if section == "Options":
            m = re.match(r"^  (-\S+)", line)
            if m:
                for name in m.group(1).split(","):
                    command.options.add(name)
        elif section == "Subcommands":
            m = re.match(r"^  ([a-z][\w-]*)(\s|$)", line)
            if m:
                command.subcommands[m.group(1)] = None
    for name in list(command.subcommands):
        command.subcommands[name] = discover(cli, path + (name,))
    return command


def all_commands(command):
    yield command
    for sub in command.subcommands.values():
        yield from all_commands(sub)


class Cli:
    def __init__(self, root_command):
        self.root = root_command
        self.every_option = set()
        for command in all_commands(root_command):
            self.every_option |= command.options

    LONG = re.compile(r"(?<![\w-])(--[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9]|--[A-Za-z0-9])")
    SHORT = re.compile(r"(?<![\w-])(-[A-Za-z])(?![\w-])")
    PLACEHOLDER_WORD = re.compile(r"^[a-z][a-z0-9-]*$")

    def check(self, text, report):
        """Checks one command line that starts after the word `kernhub`.

        report(kind, message) is called for each problem. Path words must be
        subcommands while the command has subcommands; every option must be
        one the command reached takes (--help everywhere)."""
        command = self.root
        words = text.split()
        rest_at = len(words)
        for i, word in enumerate(words):
            if word.startswith("-") or word.startswith("[") or word.startswith("|"):
                if command.subcommands and word.lstrip("[").startswith("-"):
                    # An option before the subcommand: the group's own.
                    self._check_options(word, command, report)
                    continue
                rest_at = i
                break
            if not command.subcommands:
                rest_at = i
                break
            clean = word.strip("`'\"(),;.:")
            if clean in command.subcommands:
                command = command.subcommands[clean]
                continue
            if not self.PLACEHOLDER_WORD.match(clean):
                command = None  # KERNEL, <command>, $cmd: any command
                rest_at = i + 1
                break
            report("command", "`%s %s` is no command (%s has: %s)" % (
                command.name(), clean, command.name(), ", ".join(sorted(command.subcommands))))
            return
        self._check_options(" ".join(words[rest_at:]), command, report)

    def _check_options(self, text, command, report):
        for m in list(self.LONG.finditer(text)) + list(self.SHORT.finditer(text)):
            option = m.group(1)
            if option in ("--help", "-h"):
                continue
            if command is None:
                if option not in self.every_option:
                    report("option", "`%s`: no kernhub command takes it" % option)
            elif option not in command.options:
                report("option", "`%s` takes no `%s`" % (command.name(), option))


# --- markdown -----------------------------------------------------------------

FENCE = re.compile(r"^\s*(```+|~~~+)\s*([^\s`]*)")


_parts = {}


def markdown_parts(text):
    """(prose, blocks): prose is the text with fenced code blanked (same
    lines), blocks are (first line number, info string, [lines])."""
    if text not in _parts:
        _parts[text] = _markdown_parts(text)
    return _parts[text]


def _markdown_parts(text):
    prose = []
    blocks = []
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            blocks.append((number + 1, m.group(2).lower(), []))
            prose.append("")
        elif fence is not None and line.strip().startswith(fence[0] * len(fence)) \
                and line.strip().strip(fence[0]) == "":
            fence = None
            prose.append("")
        elif fence is not None:
            blocks[-1][2].append(line)
            prose.append("")
        else:
            prose.append(line)
    return "\n".join(prose), blocks


def strip_html_comments(text):
    return re.sub(r"<!--.*?-->", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


# A code span: a run of backticks, text not crossing a blank line, the same run.
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.S)
_spans = {}


def code_spans(prose):
    """[(line, text)] of the code spans; a span ends at a blank line."""
    if prose not in _spans:
        _spans[prose] = [(line_of(prose, m.start()), m.group(2).replace("\n", " ").strip())
                         for m in CODE_SPAN.finditer(prose)]
    return _spans[prose]


def without_code_spans(prose):
    return CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose)


def heading_text(raw):
    """The rendered text of an ATX heading's content."""
    text = re.sub(r"\s+#+\s*$", "", raw.strip())
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # HTML tags
    return text.replace("`", "").strip()


def slug(text):
    """GitHub's anchor for a heading's rendered text."""
    out = []
    for ch in text.lower():
        if ch in " -_" or ch.isalnum() or unicodedata.category(ch).startswith("M"):
            out.append("-" if ch == " " else ch)
    return "".join(out)


def headings(text):
    """[(line, raw heading content)] of the ATX headings outside code."""
    prose, _ = markdown_parts(text)
    out = []
    for number, line in enumerate(prose.split("\n"), 1):
        m = re.match(r"^ {0,3}(#{1,6})\s+(.*)$", line)
        if m:
            out.append((number, m.group(2)))
    return out


_anchors = {}


def anchors(text):
    if text not in _anchors:
        _anchors[text] = _anchor_set(text)
    return _anchors[text]


def _anchor_set(text):
    seen = {}
    out = set()
    for _, raw in headings(text):
        base = slug(heading_text(raw))
        anchor = base
        n = seen.get(base, 0)
        while anchor in out:
            n += 1
            anchor = "%s-%d" % (base, n)
        seen[base] = n
        out.add(anchor)
    for m in re.finditer(r"<a\s+(?:name|id)=\"([^\"]+)\"", text):
        out.add(m.group(1))
    return out


# --- C++ string literals --------------------------------------------------------


CXX_TOKEN = re.compile(r"""
    (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
  | (?<![\w])(?:u8|u|U|L)?R"(?P<delim>[^()\\\s"]{0,16})\((?P<raw>.*?)\)(?P=delim)"
  | (?<![\w])(?:u8|u|U|L)?"(?P<text>(?:[^"\\\n]|\\.)*)"
  | (?<![\w])'(?:[^'\\\n]|\\.)*'
""", re.S | re.X)
ESCAPE = re.compile(r"\\(.)", re.S)
_literals = {}


def string_literals(src):
    """[(line, text)] of every string literal in C++ source `src`: comments
    and char literals skipped (1'000 is a digit separator, not a char),
    adjacent literals joined as the compiler joins them, simple escapes
    decoded (the scanner of tests/common/test_cli_words.cpp)."""
    if src in _literals:
        return _literals[src]
    out = []
    line = 1
    at = 0
    joins = False  # the last token was a string literal, with only space and comments since
    for m in CXX_TOKEN.finditer(src):
        gap = src[at:m.start()]
        line += gap.count("\n")
        if gap.strip():
            joins = False
        if m.group("comment") is not None:
            pass
        elif m.group("raw") is not None or m.group("text") is not None:
            if m.group("raw") is not None:
                text = m.group("raw")
            else:
                text = ESCAPE.sub(lambda e: {"n": "\n", "t": "\t"}.get(e.group(1), e.group(1)), m.group("text"))
            if joins and out:
                out[-1] = (out[-1][0], out[-1][1] + text)
            else:
                out.append((line, text))
            joins = True
        else:
            joins = False  # a char literal
        line += m.group(0).count("\n")
        at = m.end()
    _literals[src] = out
    return out


# --- rule 1: commands and options -------------------------------------------------

SHELL_PREFIX = {"$", "sudo", "env", "time", "exec", "nice", "command"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")


def split_shell(line):
    """The commands of one shell line: split at |, ||, &&, ; outside [...]."""
    if not any(c in line for c in "|;&"):
        return [line]
    parts = []
    depth = 0
    current = []
    i = 0
    while i < len(line):
        c = line[i]
        if c == "[":
            depth += 1
        elif c == "]":
            depth = max(0, depth - 1)
        if depth == 0 and (line.startswith("&&", i) or line.startswith("||", i)):
            parts.append("".join(current))
            current = []
            i += 2
            continue
        if depth == 0 and c in "|;":
            parts.append("".join(current))
            current = []
            i += 1
            continue
        current.append(c)
        i += 1
    parts.append("".join(current))
    return parts


def kernhub_rest(command_text):
    """What follows the word kernhub when `command_text` runs kernhub, else None."""
    words = command_text.split()
    i = 0
    while i < len(words) and (words[i] in SHELL_PREFIX or ASSIGNMENT.match(words[i])):
        i += 1
    if i < len(words) and re.match(r"^(\S*/)?kernhub$", words[i].lstrip("$(")):
        return " ".join(words[i + 1:])
    return None


def strip_shell_comment(line):
    m = re.search(r"(^|\s)#", line)
    return line[:m.start()] if m else line


def block_commands(lines, first_line):
    """(line, text after `kernhub`) of each kernhub command in a code block;
    usage-style continuation lines (indented, starting with [ or -) and
    backslash continuations belong to the command above."""
    out = []
    current = None  # [line, text]
    continues = False
    for offset, raw in enumerate(lines):
        number = first_line + offset
        line = strip_shell_comment(raw)
        stripped = line.strip()
        if current is not None and (continues or (raw[:1].isspace() and stripped[:1] in ("[", "-"))):
            current[1] += " " + stripped.rstrip("\\")
            continues = stripped.endswith("\\")
            continue
        current = None
        continues = stripped.endswith("\\")
        for part in split_shell(stripped.rstrip("\\")):
            rest = kernhub_rest(part)
            if rest is not None:
                current = [number, rest]
                out.append(current)
    return out


def span_command(span, cli):
    """What follows `kernhub` in a code span that names a kernhub command:
    `kernhub lock --check`, or one that starts with a command and goes on
    (`cache verify --repair`, `lock --check`), as the docs' tables write
    them. None for any other span."""
    rest = kernhub_rest(span)
    if rest is not None:
        return rest
    words = span.split()
    if len(words) < 2 or words[0] not in cli.root.subcommands:
        return None
    # What follows the command is an option or a word (`verify [--repair]`,
    # `cache prune`); anything else reads as prose or another program's.
    second = words[1].lstrip("[")
    return span if second.startswith("-") or re.match(r"^[a-z][a-z0-9-]*$", second) else None


def check_short_form(span, cli, report):
    """A span naming a command without `kernhub` (`verify [--repair]` next to
    `ls` in a sentence about the cache): fine when some command whose path
    ends with the span's leading words takes it, else reported as
    `kernhub SPAN`."""
    lead = []
    for word in span.split():
        if not re.match(r"^[a-z][a-z0-9-]*$", word):
            break
        lead.append(word)
    first_reports = []
    for command in all_commands(cli.root):
        path = command.path
        for j in range(len(path)):
            if tuple(lead[:len(path) - j]) != path[j:]:
                continue
            reports = []
            cli.check(" ".join(path[:j] + (span,)), lambda kind, message: reports.append((kind, message)))
            if not reports:
                return
            if j == 0 and not first_reports:
                first_reports = reports
    for kind, message in first_reports:
        report(kind, message)


def foreign_flags(root, pages, cli):
    """Flags the docs show on command lines of other programs (cmake, pip,
    tests/run.sh): a bare code span naming one of those is not kernhub's."""
    flags = set(FOREIGN_FLAGS)
    for page in pages:
        prose, blocks = markdown_parts(strip_html_comments(read(root, page)))
        texts = [text for _, text in code_spans(prose) if span_command(text, cli) is None]
        for _, _, lines in blocks:
            texts += [strip_shell_comment(l) for l in lines]
        for text in texts:
            for part in split_shell(text):
                words = part.split()
                if not words or words[0].startswith(("-", "[")) or kernhub_rest(part) is not None:
                    continue
                flags.update(m.group(1) for m in Cli.LONG.finditer(part))
    return flags


def check_docs_commands(root, cli, findings):
    pages = doc_pages(root)
    foreign = foreign_flags(root, pages, cli)
    for page in pages:
        prose, blocks = markdown_parts(strip_html_comments(read(root, page)))
        for line, span in code_spans(prose):
            def report(kind, message, line=line):
                findings.add(page, line, kind, message)
            for part in split_shell(span):
                rest = kernhub_rest(part)
                if rest is not None:
                    cli.check(rest, report)
                elif span_command(part, cli) is not None:
                    check_short_form(part, cli, report)
            if span.startswith("--"):
                for m in Cli.LONG.finditer(span):
                    if m.group(1) not in cli.every_option and m.group(1) not in foreign:
                        report("option", "`%s`: no kernhub command takes it" % m.group(1))
        for first, _, lines in blocks:
            for line, rest in block_commands(lines, first):
                cli.check(rest, lambda kind, message, line=line: findings.add(page, line, kind, message))


MENTION_END = re.compile(r"[`'\"();,]|\.(\s|$)")


def check_text_mentions(text, cli, report, bare_options_of=None):
    """`kernhub ...` mentions in a message or a help line; with
    bare_options_of, every other --flag must be one of its options."""
    covered = []
    for m in re.finditer(r"(?<![\w./-])kernhub(?= +[-a-z])", text):
        rest = text[m.end():]
        end = MENTION_END.search(rest)
        rest = rest[:end.start()] if end else rest
        # A command line, not a sentence about kernhub ("kernhub needs ..."):
        # a command or an option follows, or it is quoted or to be run.
        first = rest.split()[0]
        quoted = m.start() > 0 and text[m.start() - 1] in "`'\""
        if not (first in cli.root.subcommands or first.startswith("-") or quoted
                or re.search(r"\b(run|try|see|use)\s+$", text[:m.start()])):
            continue
        cli.check(rest, report)
        covered.append((m.start(), m.end() + len(rest)))
    if bare_options_of is None:
        return
    for m in Cli.LONG.finditer(text):
        if any(a <= m.start() < b for a, b in covered) or m.group(1) in ("--help",):
            continue
        if m.group(1) not in bare_options_of:
            report("option", "`%s`: no such option here" % m.group(1))


def check_cli_help(cli, findings):
    for command in all_commands(cli.root):
        where = "%s --help" % command.name()
        section = None
        for number, line in enumerate(command.help.splitlines(), 1):
            def report(kind, message, number=number):
                findings.add(where, number, kind, message)
            if line.startswith("Usage: "):
                words = line.split()
                cli.check(" ".join(words[2:]), report)
                continue
            if re.match(r"^\S.*:$", line):
                section = line[:-1]
                continue
            own = command.options
            m = re.match(r"^  ([a-z][\w-]*)\s", line)
            if section == "Subcommands" and m and m.group(1) in command.subcommands:
                own = command.subcommands[m.group(1)].options
            check_text_mentions(line, cli, report, own | cli.root.options)


def check_cli_messages(root, cli, findings):
    for rel in walk(root, "cli", lambda rel: rel.endswith(SOURCE_EXTS)):
        for line, text in string_literals(read(root, rel)):
            def report(kind, message, line=line):
                findings.add(rel, line, kind, message + " (in \"%s\")" % shorten(text))
            check_text_mentions(text, cli, report, cli.every_option)


def shorten(text, width=90):
    text = text.replace("\n", "\\n")
    return text if len(text) <= width else text[:width - 3] + "..."


# --- rule 2: links and citations ----------------------------------------------------

LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(\s|$)", re.M)


def check_links(root, findings):
    for page in linking_pages(root):
        prose, _ = markdown_parts(strip_html_comments(read(root, page)))
        prose = without_code_spans(prose)
        targets = [(line_of(prose, m.start()), m.group(2)) for m in LINK.finditer(prose)]
        targets += [(line_of(prose, m.start()), m.group(1)) for m in REFERENCE.finditer(prose)]
        for line, target in targets:
            if not target or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target):
                continue  # a URL, mailto:
            path, _, anchor = target.partition("#")
            path = unquote(path)
            if path.startswith("/"):
                resolved = os.path.normpath(path.lstrip("/"))
            else:
                resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            resolved = resolved.replace(os.sep, "/")
            full = os.path.join(root, resolved)
            if path and not os.path.exists(full):
                findings.add(page, line, "link", "`%s`: no file %s" % (target, resolved))
                continue
            if anchor and resolved.endswith(".md") and os.path.isfile(full):
                if unquote(anchor) not in anchors(read(root, resolved)):
                    findings.add(page, line, "anchor", "`%s`: %s has no heading with anchor #%s" % (
                        target, resolved, anchor))


CITATION = re.compile(r"(?<![\w/.-])(docs/[\w.-]+\.md|README(?:\.md)?|CONTRIBUTING(?:\.md)?|CHANGELOG(?:\.md)?)(?![\w.-]),?\s+\\?\"([^\"\\]{1,120})\\?\"")
COMMENT_LEAD = re.compile(r"^\s*(?://+!?|/\*+|\*+(?!/)|#+)?[ \t]?")


def check_citations(root, findings):
    titles = {}
    for rel in citing_files(root):
        text = read(root, rel)
        if not any(word in text for word in ("README", "docs/", "CONTRIBUTING", "CHANGELOG")):
            continue
        # Join the lines without their comment leaders: a citation may wrap.
        joined = []
        starts = []
        offset = 0
        for line in text.split("\n"):
            body = COMMENT_LEAD.sub("", line, count=1)
            starts.append(offset)
            joined.append(body)
            offset += len(body) + 1
        flat = " ".join(joined)
        for m in CITATION.finditer(flat):
            target = m.group(1) if m.group(1).endswith(".md") else m.group(1) + ".md"
            section = re.sub(r"\s+", " ", m.group(2)).strip()
            number = bisect.bisect_right(starts, m.start())
            if target not in titles:
                page = read(root, target)
                titles[target] = None if page is None else {
                    t for _, raw in headings(page) for t in (raw.strip(), heading_text(raw))}
            if titles[target] is None:
                findings.add(rel, number, "citation", "%s, \"%s\": no file %s" % (m.group(1), section, target))
            elif section not in titles[target]:
                findings.add(rel, number, "citation", "%s, \"%s\": %s has no heading \"%s\"" % (
                    m.group(1), section, target, section))


# --- rule 3: settings -----------------------------------------------------------------

TABLE_PAGE = "docs/configuration.md"
TABLE_BEGIN = "<!-- settings-table:begin -->"
TABLE_END = "<!-- settings-table:end -->"


def settings_table(root):
    """({variables}, {fields}, {c keys}, {"MIN to MAX": setting}), or None
    when the page has no table."""
    text = read(root, TABLE_PAGE)
    if text is None or TABLE_BEGIN not in text or TABLE_END not in text:
        return None
    body = text[text.index(TABLE_BEGIN) + len(TABLE_BEGIN):text.index(TABLE_END)]
    columns = (set(), set(), set(), {})
    rows = 0
    for line in body.splitlines():
        line = line.strip()
        if not line.startswith("|") or re.match(r"^\|[\s:|-]+\|$", line):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) < 3 or "variable" in cells[0].lower():
            continue
        rows += 1
        for i in range(3):
            columns[i].update(re.findall(r"`([^`]+)`", cells[i]))
        # An integer setting's range ("0 to 10"), by its first name.
        if len(cells) >= 5 and re.match(r"^\d+ to \d+$", cells[4]):
            names = re.findall(r"`([^`]+)`", " ".join(cells[:3]))
            columns[3][cells[4]] = names[0] if names else "?"
    return columns if rows else None


def exempt_variables(root):
    """KERNHUB_* names that are no setting by construction: CMake options
    and cache variables, C/C++ macros, and the variables the project's own
    scripts (tests/*.sh, .ci/run, ...) read from the environment."""
    names = set()
    for rel in cmake_files(root):
        text = read(root, rel)
        names.update(re.findall(r"\boption\(\s*(KERNHUB_\w+)", text))
        names.update(m.group(1) for m in re.finditer(r"\bset\(\s*(KERNHUB_\w+)\b[^)]*?\bCACHE\b", text, re.S))
    for top in ("include", "src", "cli"):
        for rel in sources(root, top):
            names.update(re.findall(r"^\s*#\s*define\s+(KERNHUB_\w+)", read(root, rel), re.M))
    for rel in script_files(root):
        names.update(re.findall(r"\$\{?(KERNHUB_\w+)", read(root, rel)))
    return names


VARIABLE = re.compile(r"(?<![\w])(KERNHUB_[A-Z0-9_]+)(\*?)")
OPTIONS_FIELD = re.compile(r"(?<![\w])Options::([a-z_][a-z0-9_]*)")
C_KEY = re.compile(r"\bkh_hub_set\s*\(\s*\w+\s*,\s*\"([^\"]*)\"|\bkh_hub_set\s+\"([^\"]*)\"")


def check_settings(root, findings):
    table = settings_table(root)
    if table is None:
        findings.add(TABLE_PAGE, 1, "settings", "no settings table (a markdown table between `%s` and `%s`)"
                     % (TABLE_BEGIN, TABLE_END))
        return
    variables, fields, keys, ranges = table
    exempt = exempt_variables(root)

    def check_variable(where, line, name, star):
        if name in variables or name in exempt or name in NON_SETTING_VARIABLES:
            return
        if name.startswith("KERNHUB_TEST_"):
            return  # the test suite's own variables
        if (star or name.endswith("_")) and any(v.startswith(name) for v in variables | exempt):
            return  # a family: KERNHUB_ARCHIVE_MAX_*
        findings.add(where, line, "setting", "%s%s is no variable of the settings table (%s)" % (
            name, star, TABLE_PAGE))

    def check_field(where, line, field):
        if field not in fields and field not in NON_SETTING_OPTIONS_FIELDS:
            findings.add(where, line, "setting", "Options::%s is no field of the settings table (%s)" % (
                field, TABLE_PAGE))

    def scan(where, line, text, docs):
        for m in VARIABLE.finditer(text):
            check_variable(where, line + text.count("\n", 0, m.start()), m.group(1), m.group(2))
        for m in OPTIONS_FIELD.finditer(text):
            check_field(where, line + text.count("\n", 0, m.start()), m.group(1))
        if docs:
            for m in C_KEY.finditer(text):
                key = m.group(1) if m.group(1) is not None else m.group(2)
                if key not in keys:
                    findings.add(where, line + text.count("\n", 0, m.start()), "setting",
                                 "kh_hub_set key \"%s\" is no C key of the settings table (%s)" % (key, TABLE_PAGE))

    # A range belongs to the table alone: written again elsewhere, it can
    # drift from the code.
    def check_ranges(where, text):
        for written, setting in ranges.items():
            for m in re.finditer(r"(?<![\w.])%s(?!\w|\.\d)" % re.escape(written), text):
                findings.add(where, line_of(text, m.start()), "setting",
                             "the range of %s (%s) is written outside the settings table (%s)" % (
                                 setting, written, TABLE_PAGE))

    for page in doc_pages(root):
        text = read(root, page)
        scan(page, 1, text, True)
        if page == TABLE_PAGE:
            text = text[:text.index(TABLE_BEGIN)] + "\n" * text.count("\n", text.index(TABLE_BEGIN),
                                                                     text.index(TABLE_END)) + text[
                text.index(TABLE_END):]
        check_ranges(page, text)
    for rel in walk(root, "include/kernhub", lambda rel: re.search(r"\.h\w*$", rel) is not None):
        scan(rel, 1, read(root, rel), False)
        check_ranges(rel, read(root, rel))
    for top in ("src", "cli"):
        for rel in sources(root, top):
            for line, text in string_literals(read(root, rel)):
                scan(rel, line, text, False)


# --- rule 4: no CLI words in the library ------------------------------------------------


def cli_words(text, commands):
    """The flags (--offline) and commands (kernhub lock) named in `text`."""
    if "--" not in text and "kernhub " not in text:
        return []
    words = [m.group(0) for m in re.finditer(r"(?<![\w-])--[a-z][\w-]*", text)]
    named = r"(?<!\w)kernhub (?:%s)(?![\w-])" % "|".join(re.escape(c) for c in commands)
    words += [m.group(0) for m in re.finditer(named, text)]
    return words


def check_library_words(root, cli, findings):
    commands = sorted(cli.root.subcommands)
    if not sources(root, "src"):
        findings.add("src", 1, "cli-word", "no C++ sources under src/ to check")
    for rel in sources(root, "src"):
        for line, text in string_literals(read(root, rel)):
            for word in cli_words(text, commands):
                findings.add(rel, line, "cli-word", "the library's message \"%s\" names %s (the CLI adds "
                             "flags and commands through hints)" % (shorten(text), word))


# --- rule 5: the Quick start runs what CI runs ---------------------------------------------


def check_quick_start(root, findings):
    text = read(root, "README.md")
    if text is None:
        findings.add("README.md", 1, "quick-start", "no README.md")
        return
    lines = text.split("\n")
    start = next((i for i, l in enumerate(lines) if l.strip() == "## Quick start"), None)
    if start is None:
        findings.add("README.md", 1, "quick-start", "no \"## Quick start\" section")
        return
    commands = None
    i = start + 1
    while i < len(lines) and not re.match(r"^#{1,2}\s", lines[i]):
        if re.match(r"^\s*```+\s*(sh|bash|shell|console)\s*$", lines[i]):
            commands = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                command = strip_shell_comment(lines[i]).strip()
                if command:
                    commands.append((i + 1, command))
                i += 1
            break
        i += 1
    if commands is None or len(commands) < 2:
        findings.add("README.md", start + 1, "quick-start", "the Quick start has no ```sh block of two commands")
        return
    line, second = commands[1]
    ci = read(root, ".ci/run")
    ci_command = None
    if ci is not None:
        for ci_line in ci.split("\n"):
            words = strip_shell_comment(ci_line).split()
            while words and ASSIGNMENT.match(words[0]):
                words.pop(0)
            if words and words[0] in ("./tests/run.sh", "tests/run.sh"):
                ci_command = " ".join(words)
                break
    if ci_command is None:
        findings.add(".ci/run", 1, "quick-start", "no ./tests/run.sh line: CI runs no test command of README's")
    elif " ".join(second.split()) != ci_command:
        findings.add("README.md", line, "quick-start", "the Quick start's second command `%s` is not what .ci/run "
                     "runs (`%s`)" % (second, ci_command))


# --- driver ----------------------------------------------------------------------------------


def lint(root, cli_path, cli=None):
    findings = Findings()
    try:
        cli = cli or Cli(discover(cli_path))
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        findings.add(cli_path, 1, "cli", "cannot read the CLI's help: %s" % error)
        cli = None
    if cli is not None:
        check_docs_commands(root, cli, findings)
        check_cli_help(cli, findings)
        check_cli_messages(root, cli, findings)
        check_library_words(root, cli, findings)
    check_links(root, findings)
    check_citations(root, findings)
    check_settings(root, findings)
    check_quick_start(root, findings)
    return findings.items


# --- self-test -----------------------------------------------------------------------------------


def run_lint(script, root, cli, model=None):
    """(exit status, findings) of the lint on `root`: as a process, or, given
    the CLI's discovered commands, in this one (faster: the parsed pages of
    the files a plant did not touch are reused)."""
    if model is not None:
        _texts.clear()
        _walks.clear()
        found = lint(root, cli, model)
        return (1 if found else 0), found
    result = subprocess.run([sys.executable, script, "--root", root, "--cli", cli], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
    lines = [l for l in result.stdout.splitlines() if re.match(r"^\S.*:\d+: [\w-]+: ", l)]
    return result.returncode, lines


def append(path, text):
    with open(path, encoding="utf-8") as f:
        old = f.read()
    sep = "" if old.endswith("\n") else "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(old + sep + text)
    return old.count("\n") + (1 if sep else 0) + 1  # the line the text starts on


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


# A library source with CLI words in comments, a char literal holding a quote,
# a digit separator, adjacent literals joined across a comment, escapes, raw
# and prefixed literals (the sample of tests/common/test_cli_words.cpp): only
# the literals count.
SCANNER_SAMPLE = (
    "// run `kernhub lock` in a comment, or --offline\n"
    "/* kernhub fetch,\n   --target */\n"
    "throw Error(code, \"run `kernhub lock`\");\n"
    "f(\"pass \" /* joined */ \"--offline\", '\"', 1'000, \"\\\"--cache-dir\\\"\");\n"
    "g(R\"x(see kernhub list)x\", u8\"kernhub cache prune\");\n"
    "h(\"kernhub locks, lockfile, -----BEGIN, x--y, --9, kernhub list-like, --\");\n")


def planted_cases(copy, real_cli, temp):
    """(title, plant) pairs; plant() edits the copy and returns (the
    findings wanted: [(file, line, kind, text in the message)], the kernhub
    program to lint with or None)."""
    dq = '"'

    def readme(text, kind, needle, line_offset=0):
        def plant():
            line = append(os.path.join(copy, "README.md"), text)
            return [("README.md", line + line_offset, kind, needle)], None
        return plant

    def new_file(rel, text, wanted):
        def plant():
            write(os.path.join(copy, rel), text)
            return [(rel, line, kind, needle) for line, kind, needle in wanted], None
        return plant

    def quick_start():
        path = os.path.join(copy, "README.md")
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        start = lines.index("## Quick start")
        first = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
        second = next(i for i in range(first + 2, len(lines)) if lines[i].strip())
        lines[second] += " --sanitize"
        write(path, "\n".join(lines))
        return [("README.md", second + 1, "quick-start", "--sanitize")], None

    def help_text():
        # A kernhub program whose `fetch --help` names a command that does not exist.
        wrapper = os.path.join(temp, "kernhub-planted")
        write(wrapper, "#!%s\nimport subprocess, sys\n"
                       "r = subprocess.run([%r] + sys.argv[1:], stdout=subprocess.PIPE, universal_newlines=True)\n"
                       "out = r.stdout\n"
                       "if sys.argv[1:] == ['fetch', '--help']:\n"
                       "    out = out.replace('\\nUsage:', ' (then run `kernhub cache shrink`)\\nUsage:', 1)\n"
                       "sys.stdout.write(out)\nsys.exit(r.returncode)\n" % (sys.executable, real_cli))
        os.chmod(wrapper, 0o755)
        return [("kernhub fetch --help", 1, "command", "kernhub cache shrink")], wrapper

    return [
        ("1, an option that does not exist (a docs usage line)",
         readme("```sh\nkernhub fetch vector-add --no-such-flag\n```\n", "option", "--no-such-flag", 1)),
        ("1, a command that does not exist (a docs code span)",
         readme("Run `kernhub no-such-command` first.\n", "command", "no-such-command")),
        ("1, a command that does not exist (a CLI message)",
         new_file("cli/planted_hint.cpp", "const char* planted_hint() { return " + dq + "run `kernhub cache shrink`"
                  + dq + "; }\n", [(1, "command", "shrink")])),
        ("1, a command that does not exist (the CLI's --help)", help_text),
        ("2, a broken anchor", readme("See [nowhere](#no-such-section).\n", "anchor", "#no-such-section")),
        ("2, a missing file", readme("See [the page](docs/no-such-page.md).\n", "link", "no-such-page.md")),
        ("2, a citation of a missing section",
         new_file("src/planted_citation.cpp", "// Planted: a section the page lacks (docs/" + "commands.md,\n// " + dq
                  + "No such section" + dq + ").\n", [(1, "citation", "No such section")])),
        ("3, a variable the settings table lacks",
         readme("Set `KERNHUB_NO_SUCH_SETTING=1`.\n", "setting", "KERNHUB_NO_SUCH_SETTING")),
        ("3, an Options field the settings table lacks",
         readme("Set `Options::no_such_field`.\n", "setting", "Options::no_such_field")),
        ("3, a C key the settings table lacks",
         readme("Call `kh_hub_set(hub, \"no_such_key\", \"1\")`.\n", "setting", "no_such_key")),
        ("3, a setting's range written outside the table",
         readme("Retries: 0 to 10.\n", "setting", "the range of")),
        ("4, a CLI flag in a library message",
         new_file("src/planted_message.cpp", "// a planted library message\nconst char* planted() {\n    return "
                  + dq + "use --offline" + dq + ";\n}\n", [(3, "cli-word", "--offline")])),
        ("4, the scanner: literals only, joined, raw and prefixed",
         new_file("src/planted_scanner.cpp", SCANNER_SAMPLE,
                  [(4, "cli-word", "names kernhub lock"), (5, "cli-word", "names --offline"),
                   (5, "cli-word", "names --cache-dir"), (6, "cli-word", "names kernhub list"),
                   (6, "cli-word", "names kernhub cache")])),
        ("5, a Quick start whose second command is not .ci/run's", quick_start),
    ]


def self_test(root, cli):
    script = os.path.abspath(__file__)
    temp = tempfile.mkdtemp(prefix="kernhub-docs-lint-")
    failures = []
    try:
        copy = os.path.join(temp, "root")
        for rel in input_files(root):
            os.makedirs(os.path.dirname(os.path.join(copy, rel)), exist_ok=True)
            shutil.copy2(os.path.join(root, rel), os.path.join(copy, rel))
        code, baseline = run_lint(script, copy, cli)
        if baseline or code != 0:
            failures.append("the unplanted copy is not clean (exit %d; fix what docs_lint reports):\n  %s"
                            % (code, "\n  ".join(baseline)))
        else:
            print("unplanted copy: clean (exit 0)")
        model = Cli(discover(cli))
        planted_files = ("cli/planted_hint.cpp", "src/planted_citation.cpp", "src/planted_message.cpp",
                         "src/planted_scanner.cpp")
        for index, (title, plant) in enumerate(planted_cases(copy, cli, temp)):
            _texts.clear()
            saved = read(copy, "README.md")
            wanted, other_cli = plant()
            # The first planted copy, and one linted with another program, run as a process.
            as_process = index == 0 or other_cli is not None
            code, found = run_lint(script, copy, other_cli or cli, None if as_process else model)
            new = [f for f in found if f not in baseline]
            lost = [f for f in baseline if f not in found]
            matched = len(new) == len(wanted) and all(
                f.startswith("%s:%d: %s: " % (where, line, kind)) and needle in f
                for f, (where, line, kind, needle) in zip(new, wanted))
            for f in new:
                print("planted (rule %s): %s" % (title, f))
            if not new:
                print("planted (rule %s): nothing found" % title)
            if code != 1 or not matched or lost:
                failures.append("rule %s: wanted exit 1 and exactly %s; got exit %d, new %s, lost %s"
                                % (title, ["%s:%d: %s: ...%s..." % w for w in wanted], code, new, lost))
            # Undo the plant: each starts from the unplanted copy.
            write(os.path.join(copy, "README.md"), saved)
            for rel in planted_files:
                if os.path.exists(os.path.join(copy, rel)):
                    os.remove(os.path.join(copy, rel))
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    for failure in failures:
        print("FAIL: " + failure)
    print("self-test: %s" % ("failed" if failures else "every planted error found, and only it"))
    return 1 if failures else 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")),
                        help="the repository (default: this script's)")
    parser.add_argument("--cli", default=None, help="the kernhub program (default: ROOT/build/kernhub)")
    parser.add_argument("--self-test", action="store_true",
                        help="plant one error of each kind in a copy and check each is found")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    cli = os.path.abspath(args.cli or os.path.join(root, "build", "kernhub"))
    if not os.access(cli, os.X_OK):
        print("lint_docs.py: no kernhub program at %s (build the kernhub_cli target, or pass --cli)" % cli)
        return 2
    if args.self_test:
        return self_test(root, cli)
    findings = lint(root, cli)
    for item in findings:
        print(item)
    if findings:
        print("lint_docs.py: %d finding(s)" % len(findings))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
