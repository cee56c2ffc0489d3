"""Summarise a CSV file in the current folder: its shape, numeric ranges and the commonest text values."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import statistics
import sys
from collections import Counter

USAGE = "usage: summarize.py FILE.csv"
# Stricter than float(): "nan", "inf" and "1_000" are words in a CSV, not numbers.
NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
DELIMITERS = ",;\t|"
SNIFF_CHARS = 64 * 1024
TOP = 3
VALUE_CHARS = 40


class NotCsv(Exception):
    pass


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        return fail(USAGE)
    path = argv[0]
    # The script may run without a person looking; it reads only files of the folder it runs in (the workspace).
    here = os.path.realpath(os.getcwd())
    real = os.path.realpath(path)
    if os.path.commonpath([here, real]) != here:
        return fail(f"{path} is outside the workspace")
    if not os.path.isfile(real):
        return fail(f"no such file: {path}")
    try:
        header, rows, delimiter = load(real)
    except NotCsv as e:
        return fail(f"{path} is not a CSV file: {e}")
    except OSError as e:
        return fail(f"cannot read {path}: {e.strerror or e}")
    print(report(path, header, rows, delimiter))
    return 0


def fail(message: str) -> int:
    print(f"summarize.py: error: {message}", file=sys.stderr)
    return 2


def load(path: str) -> tuple[list[str], list[list[str]], str]:
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise NotCsv("it is not UTF-8 text") from None
    if "\x00" in text:
        raise NotCsv("it is binary")
    if not text.strip():
        raise NotCsv("it is empty")
    try:
        delimiter = csv.Sniffer().sniff(text[:SNIFF_CHARS], delimiters=DELIMITERS).delimiter
    except csv.Error:
        # A single column has no delimiter to find.
        delimiter = ","
    try:
        records = [r for r in csv.reader(io.StringIO(text), delimiter=delimiter) if r]
    except csv.Error as e:
        raise NotCsv(str(e)) from None
    header, rows = records[0], records[1:]
    for number, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise NotCsv(f"record {number} has {fields(len(row))}, the header has {fields(len(header))}")
    return header, rows, delimiter


def report(path: str, header: list[str], rows: list[list[str]], delimiter: str) -> str:
    lines = [
        f"file: {path}",
        f"rows: {len(rows)}, columns: {len(header)} (delimiter {delimiter!r})",
    ]
    numeric, text = [], []
    for i, name in enumerate(header):
        values = [row[i].strip() for row in rows]
        present = [v for v in values if v]
        missing = len(values) - len(present)
        gap = f" ({missing} missing)" if missing else ""
        label = name or f"column {i + 1}"
        if present and all(NUMBER.fullmatch(v) for v in present):
            numbers = [float(v) for v in present]
            numeric.append(
                f"  {label}: count {len(numbers)}{gap}, min {fmt(min(numbers))}, max {fmt(max(numbers))}, "
                f"mean {fmt(statistics.fmean(numbers))}"
            )
        else:
            counts = Counter(present)
            top = ", ".join(f"{quoted(value)} ({n})" for value, n in counts.most_common(TOP)) or "none"
            text.append(f"  {label}: {len(counts)} distinct{gap}; top: {top}")
    if numeric:
        lines += ["numeric columns:", *numeric]
    if text:
        lines += ["text columns:", *text]
    return "\n".join(lines)


def fields(n: int) -> str:
    return f"{n} field" if n == 1 else f"{n} fields"


def quoted(value: str) -> str:
    # Quoted, so a value holding a comma cannot be mistaken for two.
    clipped = value if len(value) <= VALUE_CHARS else value[: VALUE_CHARS - 3] + "..."
    return json.dumps(clipped, ensure_ascii=False)


def fmt(x: float) -> str:
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else f"{x:.6g}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
