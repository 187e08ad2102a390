#!/bin/sh
# table_then_stderr.sh BURSTSIM SRCDIR — with stdout and stderr in one pipe (2>&1 | ...), the table
# is whole before the "N of M points refused" line: stdout is block-buffered in a pipe, and the line
# used to land inside the table's rows (issue 33). The quickstart's 24 points make a table of
# several KiB, past one stdio buffer.
bs=$1; src=$2
out=$(mktemp); trap 'rm -f "$out"' EXIT
"$bs" sim "$src/experiments/quickstart.ini" --quiet 2>&1 | cat > "$out"
last=$(tail -n 1 "$out")
case "$last" in *"points refused by their method or platform"*) ;; *) echo "the last line is: $last"; cat "$out"; exit 1 ;; esac
# from the header on (each refused point is named on stderr while the points run, before the table)
bad=$(head -n -1 "$out" | sed -n '/^method /,$p' | grep -v -E '^(method|burst|ring|ulysses|usp) ' | head -n 3)
[ "$(grep -c '^method ' "$out")" = 1 ] || { echo "no table header, or two"; cat "$out"; exit 1; }
[ -z "$bad" ] || { echo "a line that is no table row: $bad"; cat "$out"; exit 1; }
echo "table_then_stderr: $(sed -n '/^method /,$p' "$out" | wc -l) lines from the header, the refused line last"
