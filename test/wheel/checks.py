"""checks.py — how the wheel's check scripts report: one "ok    " or
"FAIL  " line per check under the script's label (run.sh passes them on),
and an exit status that says whether any failed."""

import sys


class Checks:
    def __init__(self, label):
        self.label = label
        self.failed = []

    def __call__(self, name, ok, detail=""):
        print(("ok    " if ok else "FAIL  ") + self.label + ": " + name +
              ("" if ok else ": " + str(detail)))
        if not ok:
            self.failed.append(name)

    def refused(self, name, call, error, words):
        """call() raises error, and its message holds words."""
        try:
            call()
        except error as e:
            self(name, words in str(e), e)
            return
        self(name, False, "not refused")

    def exit(self):
        sys.exit(1 if self.failed else 0)
