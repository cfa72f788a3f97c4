"""OpenCL C 1.2 (PyOpenCL, pocl): the table of spellings, then the few overrides."""
from __future__ import annotations

from .. import kernel_ir as K
from ..launch import BLOCK
from .c_family import CFamily


class OpenCL(CFamily):
    name = "opencl"
    TYPES = {"bool": "bool", "int8": "char", "int16": "short", "int32": "int", "int64": "long",
             "uint8": "uchar", "uint16": "ushort", "uint32": "uint", "uint64": "ulong",
             "float16": "float", "float32": "float", "float64": "double"}
    STORAGE = {"bool": "uchar", "float16": "half"}   # half only behind pointers: vload_half / vstore_half
    INT_SUFFIX = {"uint32": "u", "int64": "L", "uint64": "UL"}
    THREAD = {"local_id": "get_local_id(0)", "group_id": "get_group_id(0)",
              "local_size": "get_local_size(0)", "num_groups": "get_num_groups(0)"}
    BARRIER = "barrier(CLK_LOCAL_MEM_FENCE)"
    SHARED = "__local"
    SHUFFLE_DOWN = ""      # sub-groups are optional (and limited on pocl): shared-memory trees instead
    BITCAST = {"float32": "as_float({v})", "uint32": "as_uint({v})",
               "float64": "as_double({v})", "uint64": "as_ulong({v})"}
    # IEEE-exact: correctly rounded float32 / and sqrt; never -cl-fast-relaxed-math or -cl-mad-enable
    OPTIONS = ("-cl-fp32-correctly-rounded-divide-sqrt",)
    UNROLL = ""            # OpenCL 1.2 has no unroll pragma; constant-trip loops unroll anyway

    def load(self, buf, index, dtype):
        if dtype == "float16" and buf not in self._shared:
            return f"vload_half({index}, {buf})"
        return super().load(buf, index, dtype)

    def store(self, buf, index, value, dtype):
        if dtype == "float16" and buf not in self._shared:
            return f"vstore_half_rte({value.text}, {index}, {buf});"
        return super().store(buf, index, value, dtype)

    def signature(self, k: K.Kernel) -> str:
        args = []
        for a in k.args:
            if a.is_buffer:
                const = "const " if a.kind == "input" else ""
                args.append(f"__global {const}{self.storage(a.dtype)}* restrict {a.name}")
            else:
                args.append(f"const {self.scalar_type(a.dtype)} {a.name}")
        joined = ",\n        ".join(args)
        return (f"__kernel __attribute__((reqd_work_group_size({BLOCK}, 1, 1)))\n"
                f"void {k.name}(\n        {joined})")

    def scalar_type(self, dtype):
        """bool kernel arguments are not allowed in OpenCL C: passed as uchar."""
        return {"bool": "uchar", "float16": "float"}.get(dtype) or self.t(dtype)

    def prelude(self):
        lines = ["// No FMA contraction: + - * / give NumPy's bits.", "#pragma OPENCL FP_CONTRACT OFF"]
        if "float64" in self.used_types:
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        return "\n".join(lines)

    def define_qc_round_f16(self):
        return ("// float rounded to float16 precision (ties to even) through a private half slot,\n"
                "// which needs no cl_khr_fp16\n"
                "static inline float qc_round_f16(float x) {\n"
                "    ushort h;\n"
                "    vstore_half_rte(x, 0, (__private half*)&h);\n"
                "    return vload_half(0, (__private half*)&h);\n"
                "}")
