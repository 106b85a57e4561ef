"""test_run_doc_commands.py — the docs' runner holds its pages to their
word: a command whose status is not the one shown fails its page, a fence
with no language and a prompt outside an `sh` block are refused, a page's
blocks share one shell, and `# exits N` is the status expected.  `make
docs-check` runs it before the pages themselves (python3 -m unittest)."""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "run_doc_commands.py")
BUILD = os.environ.get("GMP_BUILD", os.path.join(HERE, "..", "..", "build"))


def run_page(text, *extra):
    with tempfile.TemporaryDirectory() as d:
        page = os.path.join(d, "page.md")
        with open(page, "w") as f:
            f.write(textwrap.dedent(text))
        p = subprocess.run([sys.executable, RUNNER, "--build", BUILD] + list(extra) + [page],
                           capture_output=True, text=True, timeout=300)
        return p.returncode, p.stdout + p.stderr


FENCE = "`" * 3


class RunnerHoldsPagesToTheirWord(unittest.TestCase):
    def test_a_page_whose_commands_do_as_shown_passes(self):
        rc, out = run_page(f"""
            {FENCE}sh
            export WORD=kept
            false                      # exits 1
            {FENCE}

            {FENCE}text
            output, not run: false
            {FENCE}

            {FENCE}sh
            test "$WORD" = kept && test -f train.py
            sh -c 'exit 3'   # exits 3
            {FENCE}
            """)
        self.assertEqual(rc, 0, out)
        self.assertIn("4 command(s) ran as shown", out)

    def test_a_status_that_differs_fails_the_page_and_names_the_line(self):
        rc, out = run_page(f"""
            {FENCE}sh
            true
            sh -c 'exit 2'   # exits 3
            echo never
            {FENCE}
            """)
        self.assertEqual(rc, 1, out)
        self.assertIn("page.md:4: `sh -c 'exit 2'` exited 2, not 3", out)

    def test_an_unmarked_command_is_expected_to_succeed(self):
        rc, out = run_page(f"""
            {FENCE}sh
            gmp-inspect show no_such_bundle
            {FENCE}
            """)
        self.assertEqual(rc, 1, out)
        self.assertIn("exited 1, not 0", out)

    def test_a_fence_with_no_language_is_refused(self):
        rc, out = run_page(f"""
            {FENCE}
            make demo
            {FENCE}
            """, "--list")
        self.assertEqual(rc, 1, out)
        self.assertIn("a fence with no language", out)

    def test_a_prompt_outside_an_sh_block_is_refused(self):
        rc, out = run_page(f"""
            {FENCE}text
            $ gmp-run python train.py
            {FENCE}
            """, "--list")
        self.assertEqual(rc, 1, out)
        self.assertIn("a command in a `text` block", out)

    def test_a_continued_line_is_one_command_and_a_hash_in_quotes_no_comment(self):
        rc, out = run_page(f"""
            {FENCE}sh
            test "a # b" = \\
                 "a # b"
            {FENCE}
            """, "--list")
        self.assertEqual(rc, 0, out)
        self.assertIn("page.md:3 [exit 0] test \"a # b\" =", out)


if __name__ == "__main__":
    unittest.main()
