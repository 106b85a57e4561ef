#!/usr/bin/env python3
"""run_doc_commands.py — every command the documentation shows, run, so that
no page can drift from the code.  `make test` runs it on README.md, the
pages of docs/ and the EXAMPLES of the man pages.

What counts as a command: each line of a fenced block whose language is
`sh` (a line ending in a backslash goes on on the next), and each `python`
block as a whole program.  Every fence must name its language — `text` for
output, `c` for code to read — and a line that starts with a `$ ` prompt
outside an `sh` block is an error: a command must not hide where it is not
run.  In a man page, the lines of its EXAMPLES section are the commands.

How they run: one page is one session, as a reader working through it —
one bash, its blocks in order, in a scratch directory that holds the
checkout's top-level entries as symbolic links (so `build/...` and
`examples/...` resolve, and what the commands write stays in the scratch),
`train.py` (test/docs/train.py: a training loop that dies of MemoryError),
the tools installed by `make install` into the scratch and on the PATH,
and a venv with the wheel installed (`python`, `pip`, `gpumemprof`), where
`make wheel` could build one.  `make` runs in the checkout.  A command
exits 0 unless its trailing comment says otherwise (`# exits 3`); the first
one whose status differs ends its page, which fails, with its output.

A few commands cannot run inside `make test`; SKIPPED says which and why,
and each one skipped is printed with its reason.  torchrun comes from the
venv with torch mk/torch-venv.sh made (GMP_TEST_TORCH_PYTHON), last on the
PATH."""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)\s*$")
EXPECTED_STATUS = re.compile(r"\bexits? (\d+)\b")
PAGE_TIMEOUT_S = 900

# (pattern on the command, the reason, whether it applies here)
SKIPPED = [
    (r"^make test(\s|$)", "make test runs this check itself", lambda: True),
    (r"^make docs-check\b", "this is that check", lambda: True),
    (r"^make bench(\s|$)", "ten minutes of timing that wants an idle machine (docs/performance.md)",
     lambda: True),
    (r"^make sanitize\b", "make test runs the sanitizer builds as a stage of its own", lambda: True),
    (r"^sh test/conformance/run\.sh\b", "make test runs the conformance suite as a stage of its own",
     lambda: True),
    (r"^make check(\s|$)", "make test runs the unit tests as a stage of its own", lambda: True),
    (r"^pip install \.(\s|$)", "the wheel stage runs it in a copy of the tree (test/wheel/from_source.sh), "
     "with PyPI for pip's build isolation", lambda: True),
    (r"^make fuzz\b", "make test runs the fuzzers as a stage of its own", lambda: True),
    (r"\btorchrun\b|\bddp_dumps\b",
     "no torch here (make test gets one with mk/torch-venv.sh, its python in GMP_TEST_TORCH_PYTHON)",
     lambda: not torch_bin()),
    (r"train_ddp\.py spawn",
     "the python here is the wheel's venv, without torch; test_distributed's test_mp_spawn runs it",
     lambda: True),
    (r"^(\S+=\S+ )*(srun|sbatch)\b",
     "no Slurm cluster answers here (make test's Slurm stage stands one up for its own checks)",
     lambda: not slurm_answers()),
]


def torch_bin():
    """The bin directory of the venv with torch (torchrun in it), or None."""
    python = os.environ.get("GMP_TEST_TORCH_PYTHON", "")
    bin_dir = os.path.dirname(python)
    return bin_dir if python and os.access(os.path.join(bin_dir, "torchrun"), os.X_OK) else None


def slurm_answers():
    """Whether a Slurm controller answers (srun installed is not enough)."""
    if shutil.which("srun") is None or shutil.which("sinfo") is None:
        return False
    try:
        return subprocess.run(["sinfo", "-h"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
NEEDS_WHEEL = re.compile(r"^make wheel\b|\bpip install\b|\bpython3? -m gpumemprof\b|"
                         r"^(\S+=\S+ )*(gpumemprof|tfmemprof) ")


class Command:
    def __init__(self, page, line, text, expected, kind="sh"):
        self.page, self.line, self.text, self.expected, self.kind = page, line, text, expected, kind

    def where(self):
        return "%s:%d" % (self.page, self.line)


def comment_start(line):
    """Where a shell comment begins in the line, outside quotes; -1 if none."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
            elif c == "\\" and quote == '"':
                continue
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return i
    return -1


def shell_commands(page, first_line, lines):
    commands, pending, start = [], "", None
    for n, raw in enumerate(lines, first_line):
        if start is None:
            start = n
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        text = pending + raw
        pending = ""
        at = comment_start(text)
        comment = text[at:] if at >= 0 else ""
        code = (text[:at] if at >= 0 else text).strip()
        line, start = start, None
        if not code:
            continue
        m = EXPECTED_STATUS.search(comment)
        commands.append(Command(page, line, code, int(m.group(1)) if m else 0))
    return commands


def markdown_commands(path, page):
    """The page's commands, in order; raises ValueError for a block that breaks the rules."""
    lines = open(path, encoding="utf-8").read().split("\n")
    commands, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = len(m.group(1)), m.group(2), m.group(3).lower()
        start, body, i = i + 1, [], i + 1
        while i < len(lines):
            close = FENCE.match(lines[i])
            if close and close.group(2)[0] == fence[0] and len(close.group(2)) >= len(fence) \
                    and not close.group(3):
                break
            line = lines[i]
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
            i += 1
        i += 1
        if not lang:
            raise ValueError("%s:%d: a fence with no language: `sh` for commands, `text` for "
                             "output" % (page, start))
        if lang == "sh":
            commands += shell_commands(page, start + 1, body)
        elif lang == "python":
            m = EXPECTED_STATUS.search(body[0]) if body and body[0].startswith("#") else None
            commands.append(Command(page, start + 1, "\n".join(body) + "\n",
                                    int(m.group(1)) if m else 0, kind="python"))
        else:
            for n, b in enumerate(body, start + 1):
                if b.startswith("$ "):
                    raise ValueError("%s:%d: a command in a `%s` block: commands go in `sh` "
                                     "blocks, where they are run" % (page, n, lang))
    return commands


def man_commands(path, page):
    text = open(path, encoding="utf-8").read().split("\n")
    commands, inside, in_examples = [], False, False
    body, first = [], 0
    for n, line in enumerate(text, 1):
        if line.startswith(".SH"):
            in_examples = line.split(None, 1)[1:] == ["EXAMPLES"]
        elif in_examples and line == ".nf":
            inside, body, first = True, [], n + 1
        elif in_examples and line == ".fi":
            inside = False
            commands += shell_commands(page, first, body)
        elif inside:
            body.append(line.replace("\\-", "-").replace("\\(aq", "'").replace("\\e", "\\"))
    return commands


def skip_reason(command, have_wheel):
    if command.kind == "python":
        return None if have_wheel else "no wheel was built here (make wheel skipped)"
    for pattern, reason, applies in SKIPPED:
        if re.search(pattern, command.text) and applies():
            return reason
    if not have_wheel and NEEDS_WHEEL.search(command.text):
        return "no wheel was built here (make wheel skipped)"
    return None


def make_venv(work, wheel):
    venv = os.path.join(work, "venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, stdout=subprocess.DEVNULL)
    if wheel:
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "--no-index",
                        "--disable-pip-version-check", wheel], check=True)
    return venv


def session(repo, build, venv, page, commands, have_wheel, work):
    """Runs one page's commands; returns (failure text or None, skipped list, count run)."""
    scratch = tempfile.mkdtemp(prefix="page-", dir=work)
    for entry in os.listdir(repo):
        if not entry.startswith("."):
            os.symlink(os.path.join(repo, entry), os.path.join(scratch, entry))
    shutil.copy(os.path.join(HERE, "train.py"), scratch)
    prefix = os.path.join(work, "prefix-" + os.path.basename(scratch))
    xdg = os.path.join(work, "xdg-" + os.path.basename(scratch))
    os.mkdir(xdg, 0o700)
    subprocess.run(["make", "-C", repo, "--no-print-directory", "-s", "install",
                    "BUILD=" + build, "PREFIX=" + prefix], check=True, stdout=subprocess.DEVNULL)
    blocks = os.path.join(work, "blocks-" + os.path.basename(scratch))
    os.mkdir(blocks)
    status_file = os.path.join(work, "status-" + os.path.basename(scratch))
    script = ["make() { command make -C \"$GMP_DOC_REPO\" --no-print-directory \"$@\"; }",
              "exec 3>\"$GMP_DOC_STATUS\""]
    skipped, ran = [], []
    python_skipped = False  # a Python block before this one, skipped: no wheel
    for i, c in enumerate(commands):
        reason = skip_reason(c, have_wheel)
        if reason:
            python_skipped |= c.kind == "python"
            skipped.append((c, reason))
            continue
        # bundles that block would have written: the command runs when
        # another made some, and is skipped when none are there
        guarded = python_skipped and "oom_dumps" in c.text
        if guarded:
            script.append("if [ ! -d oom_dumps ]; then echo %d skip >&3; else" % i)
        if c.kind == "python":
            block = os.path.join(blocks, "block_%d.py" % c.line)
            with open(block, "w") as f:
                f.write(c.text)
            text = "python %s" % block
        else:
            text = c.text
        ran.append(c)
        script += ["echo '+ %s' >&2" % c.where(),
                   "{ %s" % text, "}",
                   "__s=$?; echo %d $__s >&3; [ $__s = %d ] || exit 99" % (i, c.expected)]
        if guarded:
            script.append("fi")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GMP_") and k not in ("LD_PRELOAD", "MAKEFLAGS", "MAKELEVEL",
                                                      "MFLAGS", "VIRTUAL_ENV", "PYTHONPATH")}
    path = [os.path.join(prefix, "bin")] + ([os.path.join(venv, "bin")] if venv else [])
    # torch's venv last: torchrun from it, python still the wheel's
    path_tail = [torch_bin()] if torch_bin() else []
    env.update(PATH=":".join(path + [env.get("PATH", "/usr/bin:/bin")] + path_tail), NO_COLOR="1",
               XDG_RUNTIME_DIR=xdg, GMP_DOC_REPO=repo, GMP_DOC_STATUS=status_file,
               PREFIX=prefix, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PYTHONDONTWRITEBYTECODE="1", TMPDIR=scratch)
    log = os.path.join(work, "log-" + os.path.basename(scratch))
    with open(log, "w") as out:
        try:
            subprocess.run(["bash", "-c", "\n".join(script)], cwd=scratch, env=env,
                           stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                           timeout=PAGE_TIMEOUT_S, start_new_session=True)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
    statuses = {}
    for line in open(status_file):
        idx, status = line.split()
        statuses[int(idx)] = None if status == "skip" else int(status)
    for i, c in enumerate(commands):
        if c in ran and i in statuses and statuses[i] is None:
            ran.remove(c)
            skipped.append((c, "no bundles here: a Python block skipped before it (no wheel) "
                               "writes them"))
    output = open(log, errors="replace").read()
    for i, c in enumerate(commands):
        if c not in ran:
            continue
        if i not in statuses:
            why = "did not finish within %d s" % PAGE_TIMEOUT_S if timed_out else "never ran"
            return "%s: `%s` %s" % (c.where(), first_line(c), why), output, skipped, ran
        if statuses[i] != c.expected:
            return ("%s: `%s` exited %d, not %d" % (c.where(), first_line(c), statuses[i],
                                                     c.expected), output, skipped, ran)
    return None, output, skipped, ran


def first_line(command):
    return command.text.strip().split("\n")[0][:100]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--list", action="store_true", help="print the commands, run nothing")
    parser.add_argument("--verbose", action="store_true", help="print every page's output")
    parser.add_argument("pages", nargs="+")
    args = parser.parse_args()
    repo = os.path.dirname(os.path.dirname(HERE))
    build = os.path.abspath(args.build)
    pages, errors = [], []
    for path in args.pages:
        page = os.path.relpath(os.path.abspath(path), repo)
        try:
            found = man_commands(path, page) if path.endswith(".1") else markdown_commands(path, page)
        except ValueError as e:
            errors.append(str(e))
            continue
        pages.append((page, found))
    for e in errors:
        print("FAIL  docs: %s" % e)
    if args.list:
        for page, commands in pages:
            for c in commands:
                print("%s [exit %d] %s" % (c.where(), c.expected, first_line(c)))
        return 1 if errors else 0

    wheels = sorted(glob.glob(os.path.join(repo, "dist", "gpumemprof-*.whl")), key=os.path.getmtime)
    wheel = wheels[-1] if wheels else None
    work = tempfile.mkdtemp(prefix="gmp-docs-")
    failed = len(errors)
    passed = 0
    try:
        venv = make_venv(work, wheel)
        for page, commands in pages:
            began = time.time()
            failure, output, skipped, ran = session(repo, build, venv, page, commands,
                                                    wheel is not None, work)
            for c, reason in skipped:
                print("SKIP  docs: %s: `%s`: %s" % (c.where(), first_line(c), reason))
            if failure:
                failed += 1
                print("FAIL  docs: %s" % failure)
                lines = output.rstrip("\n").split("\n")
                said = [l for l in lines[:-40] if re.search(r"FAIL|ERROR|error:", l)][:20]
                if said:
                    print("      what its page's output said of failures before its end:")
                    for line in said:
                        print("      | " + line)
                print("      its page's output, last 40 lines:")
                for line in lines[-40:]:
                    print("      | " + line)
            else:
                passed += 1
                if args.verbose:
                    print(output)
                print("ok    docs: %s: %d command(s) ran as shown (%.0f s)"
                      % (page, len(ran), time.time() - began))
    finally:
        subprocess.run(["chmod", "-R", "u+w", work], stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
