"""OpenCL C 1.2 (PyOpenCL, pocl): the table of spellings, then the few overrides."""
from __future__ import annotations

from ..capabilities import DialectCaps
from .c_family import CFamily


class OpenCL(CFamily):
    name = "opencl"
    # no forward-progress guarantee between work-groups; sub-groups optional (not used);
    # atomic_add on int / uint buffers is OpenCL 1.1 core; mem_fence(CLK_GLOBAL_MEM_FENCE)
    # orders a work-item's global stores before its ticket (a reduction in one launch)
    CAPS = DialectCaps("OpenCL C", buffer_atomics=True, device_fence=True)
    TYPES = {"bool": "bool", "int8": "char", "int16": "short", "int32": "int", "int64": "long",
             "uint8": "uchar", "uint16": "ushort", "uint32": "uint", "uint64": "ulong",
             "float16": "float", "float32": "float", "float64": "double"}
    STORAGE = {"bool": "uchar", "float16": "half"}   # half only behind pointers: vload_half / vstore_half
    INT_SUFFIX = {"uint32": "u", "int64": "L", "uint64": "UL"}
    THREAD = {"local_id": "get_local_id(0)", "group_id": "get_group_id(0)",
              "local_size": "get_local_size(0)", "num_groups": "get_num_groups(0)"}
    BARRIER = "barrier(CLK_LOCAL_MEM_FENCE)"
    ATOMIC_ADD = "atomic_add(&{buf}[{i}], {v})"   # 32-bit int / uint buffers (OpenCL 1.1 core)
    FENCE = "mem_fence(CLK_GLOBAL_MEM_FENCE)"
    VOLATILE = "volatile __global"
    SHARED = "__local"
    SHUFFLE_DOWN = ""      # sub-groups are optional (and limited on pocl): shared-memory trees instead
    BITCAST = {"float32": "as_float({v})", "uint32": "as_uint({v})",
               "float64": "as_double({v})", "uint64": "as_ulong({v})"}
    # IEEE-exact: correctly rounded float32 / and sqrt; never -cl-fast-relaxed-math or -cl-mad-enable
    OPTIONS = ("-cl-fp32-correctly-rounded-divide-sqrt",)
    UNROLL = ""            # OpenCL 1.2 has no unroll pragma; constant-trip loops unroll anyway
    FOLD_RUNS_APART = True # CPU devices (pocl) run OpenCL: W1 stage 1 1.3x faster, as fast as float4 code
    KERNEL_HEAD = "__kernel __attribute__((reqd_work_group_size({block}, 1, 1)))\nvoid {name}"
    BUFFER_ARG = "__global {const}{type}* restrict {name}"
    SCALAR_ARG = "const {type} {name}"
    SCALAR_ARG_TYPES = {"bool": "uchar", "float16": "float"}   # no bool kernel arguments in OpenCL C
    HALF_LOAD = "vload_half({i}, {buf})"
    HALF_STORE = "vstore_half_rte({v}, {i}, {buf});"
    VECTOR_LOADS = True    # typed vloadN / vload_halfN (vec_load): element alignment suffices

    def vec_load(self, s, pad):
        """A thread's run as one vloadN (vload_halfN for float16, which converts too); the
        lanes are the vector's components .s0 .. .sf."""
        loads, per = self.load_chunks(s)       # a whole-element run: vloadN(q, ptr) each
        ptr = f"{s.buffer} + {self.kcode(s.base).text}"
        decls, lanes = [], []
        for q in range(loads):
            w = "w_" + s.name[2:] + (f"_{q}" if loads > 1 else "")
            if s.dtype == "float16":
                decls.append(f"{pad}const float{per} {w} = vload_half{per}({q}, {ptr});")
            else:
                decls.append(f"{pad}const {self.storage(s.dtype)}{per} {w} = vload{per}({q}, {ptr});")
            lanes += [f"{w}.s{k:x}" for k in range(per)]
        if s.dtype == "bool":
            lanes = [f"({lane} != 0)" for lane in lanes]
        return decls + [f"{pad}{self.t(s.dtype)} {s.name}[{s.count}] = {{{', '.join(lanes)}}};"]

    def vec_store(self, s, pad):
        """A thread's run as one vstoreN (vstore_halfN_rte for float16, which rounds to
        nearest even as the scalar vstore_half_rte does) of a vector built from the lanes."""
        ptr = f"{s.buffer} + {self.kcode(s.base).text}"
        lanes = [f"{s.name}[{k}]" for k in range(s.count)]
        if s.dtype == "float16":
            return [f"{pad}vstore_half{s.count}_rte((float{s.count})({', '.join(lanes)}), 0, {ptr});"]
        st = self.storage(s.dtype)
        if s.dtype == "bool":
            lanes = [f"({st}){lane}" for lane in lanes]
        return [f"{pad}vstore{s.count}(({st}{s.count})({', '.join(lanes)}), 0, {ptr});"]

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
