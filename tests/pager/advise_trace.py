#!/usr/bin/env python3
"""Description: the recorder writes what mt_advise promised. Runs advise_test
readmostly under LD_PRELOAD with MT_TRACE and reads the trace back: it is
version 2, and of the 15 launches of sum_u32 (which reads the buffer w) the
5 made while w was advised read-mostly carry access kind 1 (read) on w's
span; the others, like every span the program said nothing about, carry 0
(unknown).

Usage: advise_trace.py LIB PROGRAM WORKDIR
"""
import os
import struct
import subprocess
import sys

lib, prog, work = sys.argv[1:4]
trace = os.path.join(work, "advise.trace")
env = dict(os.environ, MT_TRACE=trace,
           LD_PRELOAD=os.environ.get("MT_TEST_PRELOAD_PREFIX", "") + lib)
r = subprocess.run([prog, "readmostly"], env=env, capture_output=True, text=True)
sys.stderr.write(r.stderr)
if r.returncode == 77:
    sys.exit(77)
if r.returncode != 0:
    print("advise_trace: advise_test readmostly failed (%d)" % r.returncode)
    sys.exit(1)

data = open(trace, "rb").read()
version, header_bytes = struct.unpack_from("<II", data, 8)
fails = []
if version != 2:
    fails.append("trace version %d, want 2" % version)
names, kinds_of_sum = {}, []
off = header_bytes
while off < len(data):
    rtype, size = data[off], struct.unpack_from("<I", data, off + 4)[0]
    if rtype == 10:  # NAME
        fid, ln = struct.unpack_from("<QI", data, off + 16)
        names[fid] = data[off + 32:off + 32 + ln].decode()
    elif rtype == 3:  # LAUNCH
        func, = struct.unpack_from("<Q", data, off + 24)
        nfoot, = struct.unpack_from("<I", data, off + 44)
        kinds = list(data[off + 48 + 24 * nfoot:off + 48 + 24 * nfoot + nfoot])
        if size != 48 + 24 * nfoot + (nfoot + 7) // 8 * 8:
            fails.append("LAUNCH at %d: size %d for %d spans" % (off, size, nfoot))
        if names.get(func) == "sum_u32":
            kinds_of_sum.append(kinds)
        elif any(kinds):
            fails.append("launch of %s has kinds %s, want unknown" % (names.get(func), kinds))
    off += size
read = [k for k in kinds_of_sum if k[0] == 1]
if len(kinds_of_sum) != 15 or len(read) != 5:
    fails.append("sum_u32: %d launches, %d with w read; want 15 and 5: %s" % (len(kinds_of_sum), len(read),
                                                                              kinds_of_sum))
if any(k[0] not in (0, 1) or any(k[1:]) for k in kinds_of_sum):
    fails.append("sum_u32 kinds %s: w 0 or 1, the rest 0" % kinds_of_sum)
for f in fails:
    print("FAIL  " + f)
print("advise_trace: %d launches of sum_u32, %d with w marked read; %d failed" % (len(kinds_of_sum), len(read),
                                                                                  len(fails)))
sys.exit(1 if fails else 0)
