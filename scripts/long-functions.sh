#!/usr/bin/env bash
# Lists the functions in src/ longer than a limit (default 80 lines), longest first,
# as "LINES FILE:LINE NAME". Issue 38 counts these against hyperfine's 5.
#
# What it counts: from the line holding `fn NAME` to the line closing its body, by
# brace matching. Braces inside string and char literals and `//` comments are
# ignored; a raw string spanning lines or a `/* */` comment could still mislead it.
# Declarations without a body (`fn f();` in a trait) are skipped. Nested fns are
# counted on their own and inside their parent. Functions in `#[cfg(test)]` modules
# are left out unless --tests is given.
#
# Usage: scripts/long-functions.sh [--tests] [LIMIT] [DIR]
set -euo pipefail
tests=0
if [ "${1:-}" = "--tests" ]; then tests=1; shift; fi
limit=${1:-80}
dir=${2:-src}
find "$dir" -name '*.rs' -print0 | sort -z | xargs -0 awk -v limit="$limit" -v tests="$tests" '
FNR == 1 { depth = 0; n = 0; pend = 0; cfgtest = 0; testdepth = -1 }
{
    line = $0
    # Strip char literals holding a brace, then string literals, then line comments.
    gsub(/\x27[{}]\x27/, "", line)
    gsub(/"([^"\\]|\\.)*"/, "\"\"", line)
    sub(/\/\/.*/, "", line)
    if (line ~ /#\[cfg\(test\)\]/) cfgtest = 1
    else if (cfgtest && line ~ /^[[:space:]]*(pub[^ ]* )?mod [A-Za-z_]+/) { cfgtest = 0; if (testdepth < 0) testdepth = depth }
    else if (line ~ /[^[:space:]]/ && line !~ /^[[:space:]]*#/) cfgtest = 0
    if (match(line, /(^|[^A-Za-z0-9_])fn [A-Za-z_][A-Za-z0-9_]*/)) {
        name = substr(line, RSTART, RLENGTH); sub(/.*fn /, "", name)
        pend = 1; pname = name; pline = FNR
    }
    for (i = 1; i <= length(line); i++) {
        c = substr(line, i, 1)
        if (c == "{") {
            if (pend) { n++; sname[n] = pname; sline[n] = pline; sdepth[n] = depth; pend = 0 }
            depth++
        } else if (c == "}") {
            depth--
            if (n > 0 && depth == sdepth[n]) {
                len = FNR - sline[n] + 1
                intest = (testdepth >= 0 && sdepth[n] > testdepth)
                if (len > limit && (tests || !intest)) print len, FILENAME ":" sline[n], sname[n]
                n--
            }
            if (testdepth >= 0 && depth <= testdepth) testdepth = -1
        } else if (c == ";" && pend && depth >= 0) {
            pend = 0
        }
    }
}' | sort -rn
