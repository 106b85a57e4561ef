# bench/pystderr.py — python3 printing 20,000 lines to stderr that read as an
# out-of-memory message, as a test suite printing its expected errors does:
# what the preload's stderr scan costs a program whose every line matches.
import sys

for i in range(20000):
    print(f"test {i}: expected error: Out of memory", file=sys.stderr)
