#!/bin/sh
# Description: the README's options table is exactly what mt-options prints
# from the one options table. Usage: readme_options.sh mt-options README.md
set -eu
gen=$("$1")
doc=$(sed -n '/<!-- options:begin -->/,/<!-- options:end -->/p' "$2" | sed '1d;$d')
if [ "$gen" != "$doc" ]; then
  echo "README options table differs from the code; regenerate it with:"
  echo "  build/tools/mt-options  (paste between the options:begin/end markers)"
  printf '%s\n' "$gen" > /tmp/mt-options.gen
  printf '%s\n' "$doc" > /tmp/mt-options.doc
  diff /tmp/mt-options.doc /tmp/mt-options.gen || true
  exit 1
fi
echo "readme_options: ok"
