#!/usr/bin/env python3
"""Write the cacheblend(1) man page from the CLI's own --help texts, so it cannot drift from them.

    gen-manpage.py CLI OUT [--help2man PATH]

help2man renders `cacheblend --help` and `--version` (NAME, DESCRIPTION with the command list);
this script adds a COMMANDS section with every subcommand's --help (usage, summary, one .TP per
option, the closing notes), and FILES, ENVIRONMENT and SEE ALSO, through help2man's --include.
The subcommand texts follow samples/cli/args.cpp format_help(): "usage: ...", a blank line, the
summary, "options:" with two-space-indented "  --flag ARG  help" lines, then the details.
Run by the build (samples/CMakeLists.txt) whenever the CLI is relinked.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def run(cli, *args):
    env = dict(os.environ, COLUMNS="100")
    return subprocess.run([cli, *args], check=True, capture_output=True, text=True, env=env).stdout


def roff(text):
    """Escape text for a roff text line: backslashes, minus signs, and a leading control char."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    if text.startswith((".", "'")):
        text = "\\&" + text
    return text


def bold_flags(left):
    """'--data DIR' -> bold flag, plain argument; '-h, --help' -> both bold."""
    out = []
    for word in left.split(" "):
        w = roff(word)
        out.append("\\fB" + w + "\\fR" if word.startswith("-") else "\\fI" + w + "\\fR")
    return " ".join(out)


def commands(top_help):
    """The subcommand names listed under 'commands:' in `cacheblend --help`."""
    names, inside = [], False
    for line in top_help.splitlines():
        if line.strip() == "commands:":
            inside = True
        elif inside and line.startswith("  ") and line.strip():
            names.append(line.split()[0])
        elif inside and not line.strip():
            break
    return names


def paragraphs(lines):
    """Blank-line separated paragraphs joined into filled text (roff refills them)."""
    out, cur = [], []
    for line in lines + [""]:
        if line.strip():
            cur.append(line.strip())
        elif cur:
            out.append(" ".join(cur))
            cur = []
    return out


def command_section(name, text):
    lines = text.rstrip("\n").splitlines()
    usage = lines[0]
    if not usage.startswith("usage: "):
        sys.exit(f"gen-manpage: '{name} --help' does not start with 'usage: ': {usage!r}")
    words = usage[len("usage: "):].split(" ")
    out = [f".SS {name}", ".PP", ".B " + roff(" ".join(words[:2]))]
    if len(words) > 2:
        out.append(roff(" ".join(words[2:])))
    body = lines[1:]
    if "options:" in body:
        i = body.index("options:")
        before, rest = body[:i], body[i + 1:]
    else:
        before, rest = body, []
    for p in paragraphs(before):
        out += [".PP", roff(p)]
    flag = re.compile(r"^  (-\S.*?)(?: {2,}(.*))?$")
    j = 0
    while j < len(rest) and rest[j].strip():
        m = flag.match(rest[j])
        if not m:
            sys.exit(f"gen-manpage: '{name} --help': not an option line: {rest[j]!r}")
        out += [".TP", bold_flags(m.group(1)), roff(m.group(2) or "")]
        j += 1
    for p in paragraphs(rest[j:]):
        out += [".PP", roff(p)]
    return out


def include_file(cli):
    top = run(cli, "--help")
    out = ["[SYNOPSIS]", ".B cacheblend", "\\fIcommand\\fR [\\fIoptions\\fR]", ".br",
           ".B cacheblend", "\\fIcommand\\fR \\fB\\-\\-help\\fR", ".br",
           ".B cacheblend", "\\fB\\-\\-version\\fR", "[COMMANDS]"]
    for name in commands(top):
        out += command_section(name, run(cli, name, "--help"))
    out += [
        "[ENVIRONMENT]",
        ".TP", "\\fBCBL_MODEL\\fR",
        roff("the model when no --model is given: a GGUF file or a model name "
             "(see cacheblend models)."),
        ".TP", "\\fBCBL_EMBED_MODEL\\fR",
        roff("the embedder GGUF for dense search; without it search runs as BM25."),
        ".TP", "\\fBXDG_CACHE_HOME\\fR, \\fBXDG_DATA_HOME\\fR",
        roff("where the model cache and the default data and KV store folders live "
             "(~/.cache/cacheblend, ~/.local/share/cacheblend when unset)."),
        "[FILES]",
        ".TP", roff("~/.cache/cacheblend/models/"),
        roff("named models, filled by cacheblend-fetch-model NAME."),
        "[EXIT STATUS]",
        roff("0 on success, 1 when the command failed, 2 for a bad command line, 130 when "
             "interrupted. With --json a failure also prints "
             '{"error": {"status", "message"}} on stdout.'),
        "[SEE ALSO]",
        ".BR cacheblend\\-fetch\\-model (1)",
        roff("(run it with --help); the libcacheblend README and docs in the documentation "
             "folder."),
    ]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cli")
    ap.add_argument("out")
    ap.add_argument("--help2man", default="help2man")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        inc = os.path.join(tmp, "commands.h2m")
        with open(inc, "w") as f:
            f.write(include_file(a.cli))
        tmp_out = os.path.join(tmp, "cacheblend.1")
        subprocess.run([a.help2man, "--no-info", "--no-discard-stderr",
                        "--name", "embedded RAG runtime with CacheBlend KV fusion",
                        "--section", "1", "--include", inc, "--output", tmp_out, a.cli],
                       check=True, env=dict(os.environ, COLUMNS="100"))
        with open(tmp_out) as f:
            page = f.read()
    # The usage lines of `cacheblend --help` are the SYNOPSIS above; help2man only recognizes
    # "Usage:", so it leaves them at the top of DESCRIPTION: drop them there.
    start = page.find(".SH DESCRIPTION\n")
    end = page.find('.SS "commands:"', start)
    if start < 0 or end < 0:
        sys.exit("gen-manpage: help2man's page has no DESCRIPTION with a commands: list")
    start += len(".SH DESCRIPTION\n")
    page = page[:start] + page[end:]
    with open(a.out, "w") as f:
        f.write(page)


if __name__ == "__main__":
    main()
