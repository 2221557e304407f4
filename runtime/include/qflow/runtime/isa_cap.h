// The instruction-set cap: one process-wide ceiling (QFLOW_ISA, or `qflow --isa`) on the
// vector code of every run-time-dispatched kernel, the runtime's fast integer kernels and the
// host interpreter's float and integer kernels alike (docs/performance.md, "Instruction
// sets"). It lives with the runtime because both sides select their kernels through it.
#pragma once

#include <string>
#include <string_view>

#include "qflow/core/status.h"

namespace qflow::isa {

// Ceilings in increasing order. Each allows the kernels of its own level and those below:
// avx2 also admits FMA; avxvnni the AVX-VNNI dot products (256-bit); avx512 AVX-512 with
// VNNI and VBMI where the CPU has them; native is no cap at all.
enum class Level { portable, avx2, avxvnni, avx512, native };

const char* level_name(Level level);
// "portable", "avx2", "avxvnni", "avx512" or "native"; anything else is an error naming the
// allowed values.
Expected<Level> parse_level(std::string_view name);
// Whether this CPU has the instructions of `level` itself (avx2: AVX2 and FMA; avxvnni:
// AVX-VNNI; avx512: AVX-512F). portable and native: always.
bool cpu_has(Level level);

// The cap in force: set_cap's, else QFLOW_ISA's (read once), else native. An invalid
// QFLOW_ISA leaves native in force and makes cap_status() fail.
Level cap();
// Whether the cap admits kernels of `level`.
inline bool allows(Level level) { return static_cast<int>(level) <= static_cast<int>(cap()); }
// Ok, or why QFLOW_ISA cannot be honoured: "QFLOW_ISA=avx512: this CPU lacks AVX-512F
// (it has: avx2, avxvnni)". Executor::create (automatic kernels) and the qflow CLI report it.
Status cap_status();
// Puts `name` in force for the process; refused (nothing changes) when the name is unknown or
// the CPU lacks its instructions. `source` names where the name came from in messages
// ("--isa", "QFLOW_ISA").
Status set_cap(std::string_view name, std::string_view source);
// Back to QFLOW_ISA's cap (tests).
void reset_cap();

// The levels this CPU has, lowest first, joined by ", " ("portable, avx2, avxvnni, avx512").
std::string cpu_levels();

}  // namespace qflow::isa
