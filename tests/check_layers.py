"""Every module includes only the modules below it (docs/ARCHITECTURE.md, "Modules"): the
layers are read from the #include lines of the sources as they are, and each module is one folder
(core/base, storage, core/engine, comm, drivers/fwi, drivers/io, drivers/app, drivers/python/src),
except the inversion library's run from a configuration (drivers/fwi/.../configured*), a module of
its own above fwi and io, named by its files.
Run: check_layers.py ROOT"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
# module -> (its source folders, the modules it may include); the host part of base is the one
# the I/O library (compiled without Kokkos) may use.
host = {"ksweep/base/error.hpp", "ksweep/base/names.hpp", "ksweep/base/config.hpp", "ksweep/base/physics_table.hpp"}
modules = {
    "base": (["core/base"], {"base"}),
    "storage": (["storage"], {"base", "storage"}),
    "core": (["core/engine"], {"base", "storage", "core"}),
    "comm": (["comm"], {"base", "comm"}),
    "fwi": (["drivers/fwi"], {"base", "storage", "core", "comm", "fwi"}),
    "io": (["drivers/io"], {"host", "io"}),
    "configured": (["drivers/fwi/src/configured*.cpp", "drivers/fwi/include/ksweep/fwi/configured.hpp"],
                   {"base", "storage", "core", "comm", "fwi", "io", "configured"}),
    "app": (["drivers/app"], {"base", "storage", "core", "comm", "fwi", "io", "configured"}),
    "python": (["drivers/python/src"], {"base", "storage", "core", "comm", "fwi", "io", "configured"}),
}


def files_of(name):
    """The sources of module `name`: its files named by pattern, or those in its folders that no
    module names by pattern."""
    named = {f for n, (folders, _) in modules.items() for d in folders if "*" in d or d.endswith(".hpp")
             for f in root.glob(d)}
    out = []
    for d in modules[name][0]:
        if "*" in d or d.endswith(".hpp"):
            out += sorted(root.glob(d))
        else:
            out += [f for f in sorted((root / d).rglob("*")) if f not in named]
    return out


include = re.compile(r'^\s*#\s*include\s*<(ksweep/([a-z]+)/[^>]+)>', re.M)
bad = []
sources = {name: files_of(name) for name in modules}
for name, (_, allowed) in modules.items():
    for f in sources[name]:
        if f.suffix not in (".hpp", ".cpp", ".in"):
            continue
        # The configured module's header is <ksweep/fwi/configured.hpp>.
        for m in include.finditer(f.read_text(errors="replace")):
            header, module = m.group(1), m.group(2)
            if header == "ksweep/fwi/configured.hpp":
                module = "configured"
            if module == "base" and "host" in allowed and header in host:
                continue
            if module not in allowed:
                why = "only the host part of base is below it" if "host" in allowed else f"{module} is not below it"
                bad.append(f"{f.relative_to(root)}: module {name} includes <{header}> ({why})")
# Each module is one folder (or its named files): every source file lies in exactly one.
for top in ("core", "storage", "comm", "drivers"):
    for f in sorted((root / top).rglob("*")):
        if f.suffix not in (".hpp", ".cpp"):
            continue
        owners = [n for n in modules if f in sources[n]]
        if len(owners) != 1:
            bad.append(f"{f.relative_to(root)}: in {len(owners)} module folders ({', '.join(owners) or 'none'})")
for line in bad:
    print(line)
print(f"{len(bad)} includes against the layers")
sys.exit(1 if bad else 0)
