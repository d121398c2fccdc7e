// Compiles the functions between SLUICE_TARGET_BEGIN and SLUICE_TARGET_END for
// a wider instruction set than the rest of the program, for code that is only
// called after a run-time CPU check. Include standard headers *before* the
// region: inline functions defined inside it would otherwise be emitted with
// the wider target and could be picked by the linker for callers that run on
// any CPU.
#pragma once

#define SLUICE_PRAGMA(x) _Pragma(#x)

#if defined(__clang__)
#define SLUICE_TARGET_BEGIN(isa) SLUICE_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define SLUICE_TARGET_END SLUICE_PRAGMA(clang attribute pop)
#elif defined(__GNUC__)
#define SLUICE_TARGET_BEGIN(isa) SLUICE_PRAGMA(GCC push_options) SLUICE_PRAGMA(GCC target(isa))
#define SLUICE_TARGET_END SLUICE_PRAGMA(GCC pop_options)
#else
#error "sluice needs GCC or clang"
#endif
