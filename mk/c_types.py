"""c_types.py HEADER OUT -- the Python bindings' view of the public C header,
written at build time: the structs the ctypes binding passes to and from the
recorder library, and the numbers of its enums and flags, as the header
declares them.  Nothing of the header is copied by hand into Python, so a
field added or moved in C moves in Python with it.

The structs and constants come from the header's own declarations: each
`typedef struct NAME { ... } NAME;` named in STRUCTS (fields of the C types
below, arrays of char included), each `typedef enum NAME { ... } NAME;` named
in ENUMS (members numbered as C numbers them), and the `#define`s whose names
begin with a prefix in FLAGS.  A declaration this cannot read is an error,
never a guess."""
import os
import re
import sys

# struct name in C -> class name in Python
STRUCTS = {
    "gmp_event": "Event",
    "gmp_device_state": "DeviceState",
    "gmp_collector_caps": "CollectorCaps",
    "gmp_growth": "Growth",
    "gmp_host_reading": "HostReading",
    "gmp_classification": "Classification",
}
# enum name in C -> the prefix its members lose in Python
ENUMS = {"gmp_event_type": "GMP_", "gmp_backend": "GMP_"}
# #define prefixes whose integer values Python reads (the GMP_ dropped)
FLAGS = ("GMP_DS_", "GMP_SAMPLE_", "GMP_EVENT_FLAG_")

C_TYPES = {
    "uint64_t": "ctypes.c_uint64", "int64_t": "ctypes.c_int64",
    "uint32_t": "ctypes.c_uint32", "int32_t": "ctypes.c_int32",
    "uint16_t": "ctypes.c_uint16", "int16_t": "ctypes.c_int16",
    "uint8_t": "ctypes.c_uint8", "int8_t": "ctypes.c_int8",
    "int": "ctypes.c_int", "unsigned": "ctypes.c_uint", "unsigned int": "ctypes.c_uint",
    "size_t": "ctypes.c_size_t", "double": "ctypes.c_double",
    "char": "ctypes.c_char", "const char *": "ctypes.c_char_p", "char *": "ctypes.c_char_p",
}


def strip_comments(text):
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.S)


def struct_fields(code, name, enums, defines):
    found = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name), code, re.S)
    if not found:
        raise SystemExit("c_types.py: no struct %s in the header" % name)
    fields = []
    for decl in found.group(1).split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        typed = re.match(r"^((?:const )?[A-Za-z_][A-Za-z_0-9]*(?: int)?(?: \*)?) ?(.*)$", decl)
        if not typed:
            raise SystemExit("c_types.py: %s: cannot read '%s'" % (name, decl))
        ctype, names = typed.group(1), typed.group(2)
        if names.startswith("*"):
            ctype, names = ctype + " *", names[1:].strip()
        if ctype in enums:
            ctype = "int"  # an enum is an int to C's ABI here
        if ctype not in C_TYPES:
            raise SystemExit("c_types.py: %s: no ctypes type for '%s'" % (name, ctype))
        for field in names.split(","):
            field = field.strip()
            array = re.match(r"^([A-Za-z_][A-Za-z_0-9]*)\[([A-Za-z_0-9]+)\]$", field)
            if array:
                count = array.group(2)
                count = defines.get(count, count)
                if not str(count).isdigit():
                    raise SystemExit("c_types.py: %s: array size '%s'" % (name, count))
                fields.append((array.group(1), "%s * %s" % (C_TYPES[ctype], count)))
            elif re.match(r"^[A-Za-z_][A-Za-z_0-9]*$", field):
                fields.append((field, C_TYPES[ctype]))
            else:
                raise SystemExit("c_types.py: %s: cannot read field '%s'" % (name, field))
    return fields


def enum_members(code, name):
    found = re.search(r"typedef enum %s \{(.*?)\} %s;" % (name, name), code, re.S)
    if not found:
        raise SystemExit("c_types.py: no enum %s in the header" % name)
    members, value = [], -1
    for item in found.group(1).split(","):
        item = item.strip()
        if not item:
            continue
        named = re.match(r"^([A-Z_][A-Z_0-9]*)(?:\s*=\s*(\d+))?$", item)
        if not named:
            raise SystemExit("c_types.py: %s: cannot read '%s'" % (name, item))
        value = int(named.group(2)) if named.group(2) else value + 1
        members.append((named.group(1), value))
    return members


def main(header, out):
    with open(header, encoding="utf-8") as f:
        code = strip_comments(f.read())
    defines = {}
    for m in re.finditer(r"^#define (GMP_[A-Z_0-9]+) (0x[0-9a-fA-F]+|\d+)u?\s*$", code, re.M):
        defines[m.group(1)] = int(m.group(2), 0)
    enums = set(ENUMS) | set(re.findall(r"typedef enum [A-Za-z_0-9]+ \{.*?\} ([A-Za-z_0-9]+);",
                                        code, re.S))
    lines = ['"""Generated from %s by mk/c_types.py at build time: do not edit."""'
             % "include/gpumemprof.h", "import ctypes", ""]
    for enum, prefix in ENUMS.items():
        lines.append("# %s" % enum)
        for member, value in enum_members(code, enum):
            lines.append("%s = %d" % (member[len(prefix):], value))
        lines.append("")
    lines.append("# flags")
    for name, value in sorted(defines.items()):
        if name.startswith(FLAGS):
            lines.append("%s = 0x%x" % (name[len("GMP_"):], value))
    for struct, cls in STRUCTS.items():
        lines += ["", "", "class %s(ctypes.Structure):" % cls,
                  '    """%s, as the header lays it out."""' % struct,
                  '    c_struct = "%s"' % struct, "    _fields_ = ["]
        for field, ctype in struct_fields(code, struct, enums, defines):
            lines.append('        ("%s", %s),' % (field, ctype))
        lines.append("    ]")
    lines += ["", "", "# every struct above, for a check of their layout against the compiler's",
              "STRUCTS = (%s)" % ", ".join(STRUCTS.values())]
    text = "\n".join(lines) + "\n"
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: c_types.py HEADER OUT")
    main(sys.argv[1], sys.argv[2])
