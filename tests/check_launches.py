"""Every kernel of the library and the program goes through ksweep::launch_for / launch_reduce
(core/base/include/ksweep/base/launch.hpp), which set the floating-point mode of host kernels:
a direct Kokkos::parallel_for, parallel_reduce or parallel_scan outside it would compute with
subnormals that the other kernels flush, and make results depend on the schedule.
Nested loops inside a kernel (TeamThreadRange, ThreadVectorRange, TeamVectorRange) are allowed.

    python3 tests/check_launches.py SOURCE_DIR
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
allowed = {root / "core/base/include/ksweep/base/launch.hpp"}
call = re.compile(r"Kokkos::parallel_(for|reduce|scan)\s*\(")
nested = re.compile(r"\s*(Kokkos::)?(TeamThreadRange|ThreadVectorRange|TeamVectorRange|TeamThreadMDRange)")
found = []
checked = 0
for d in ("core", "storage", "comm", "drivers"):
    for f in sorted((root / d).rglob("*")):
        if f.suffix not in (".hpp", ".cpp") or f in allowed:
            continue
        checked += 1
        text = f.read_text()
        for m in call.finditer(text):
            if nested.match(text, m.end()):
                continue
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{f.relative_to(root)}:{line}: {text.splitlines()[line - 1].strip()}")
if checked < 20:
    sys.exit(f"only {checked} sources found under {root}: wrong source directory")
if found:
    print("kernels launched outside ksweep::launch_for / launch_reduce (see core/base/include/ksweep/base/launch.hpp):")
    print("\n".join(found))
    sys.exit(1)
print(f"{checked} sources: every kernel launch goes through ksweep::launch_for / launch_reduce")
