"""Every module includes only the modules below it (docs/ARCHITECTURE.md, "Modules"): the
layers are read from the #include lines of the sources as they are, and each module is one folder
(core/base, storage, core/engine, comm, drivers/fwi, drivers/io, drivers/app, drivers/python/src).
Run: check_layers.py ROOT"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
# module -> (its source folders, the modules it may include); the host part of base is the one
# the I/O library (compiled without Kokkos) may use.
host = {"ksweep/base/error.hpp", "ksweep/base/names.hpp", "ksweep/base/config.hpp"}
modules = {
    "base": (["core/base"], {"base"}),
    "storage": (["storage"], {"base", "storage"}),
    "core": (["core/engine"], {"base", "storage", "core"}),
    "comm": (["comm"], {"base", "comm"}),
    "fwi": (["drivers/fwi"], {"base", "storage", "core", "comm", "fwi"}),
    "io": (["drivers/io"], {"host", "io"}),
    "app": (["drivers/app"], {"base", "storage", "core", "comm", "fwi", "io"}),
    "python": (["drivers/python/src"], {"base", "storage", "core", "comm", "fwi", "io"}),
}
include = re.compile(r'^\s*#\s*include\s*<(ksweep/([a-z]+)/[^>]+)>', re.M)
bad = []
for name, (folders, allowed) in modules.items():
    for folder in folders:
        for f in sorted((root / folder).rglob("*")):
            if f.suffix not in (".hpp", ".cpp", ".in"):
                continue
            for m in include.finditer(f.read_text(errors="replace")):
                header, module = m.group(1), m.group(2)
                if module == "base" and "host" in allowed and header in host:
                    continue
                if module not in allowed:
                    why = "only the host part of base is below it" if "host" in allowed else f"{module} is not below it"
                    bad.append(f"{f.relative_to(root)}: module {name} includes <{header}> ({why})")
# Each module is one folder: every source file of the libraries and programs lies in exactly one.
for top in ("core", "storage", "comm", "drivers"):
    for f in sorted((root / top).rglob("*")):
        if f.suffix not in (".hpp", ".cpp"):
            continue
        owners = [n for n, (folders, _) in modules.items() if any(root / d in f.parents for d in folders)]
        if len(owners) != 1:
            bad.append(f"{f.relative_to(root)}: in {len(owners)} module folders ({', '.join(owners) or 'none'})")
for line in bad:
    print(line)
print(f"{len(bad)} includes against the layers")
sys.exit(1 if bad else 0)
