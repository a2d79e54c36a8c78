"""One `attnfuse bench` call on the CPU backend, for the CPU benchmark scripts (cpu_decode.py,
cpu_isa_levels.py, cpu_rope_window.py): checked against the float64 reference, or timed."""
import re
import subprocess
import sys


def attnfuse_bench(cli, program, shape, threads, reps, check, extra=(), env=None, expect=None):
    """(median ms, GFLOP/s, output) of `attnfuse bench --device cpu` on `shape` (B,Hq,Hkv,Nq,Nk,D).

    With check, exits unless the reference check ran and passed (the CLI skips it above its cell
    limit, so check a reduced shape); without, passes --no-check. `extra`: more arguments
    (--dtype, --rope-config); `env`: the environment; `expect`: a text the output must hold (the
    run header's `device cpu (<level>)`). Any failure exits with the command and its output."""
    cmd = [cli, "bench", program, "--shape", ",".join(map(str, shape)), "--device", "cpu", "--threads",
           str(threads), "--reps", str(reps), *extra]
    if not check:
        cmd.append("--no-check")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    text = out.stdout + out.stderr
    where = " ".join(cmd)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {where}\n{text}")
    if expect and expect not in text:
        sys.exit(f"'{expect}' is not in the output of {where}:\n{text}")
    if check and not re.search(r"check fused:\n.*\n\s*PASS", text):
        sys.exit(f"the reference check did not run or pass: {where}\n{text}")
    m = re.search(r"^\s*fused\s+([0-9.]+)\s+[0-9.]+\s+\d+\s+([0-9.]+)", text, re.M)
    if not m:
        sys.exit(f"no timing line in the output of {where}:\n{text}")
    return float(m.group(1)), float(m.group(2)), text
