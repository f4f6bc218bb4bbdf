/* demangle.h -- a small Itanium C++ demangler for plain CUDA kernel names. */
#ifndef FP_COLLECTOR_DEMANGLE_H
#define FP_COLLECTOR_DEMANGLE_H

#include <stddef.h>

/* Demangles a mangled function name of the simple shapes CUDA C kernels have:
 * _Z <source-name or N...E nested name without templates> <parameter types>, where the types
 * are builtins, class names, P/R/O/K/V qualifiers and S_/S<n>_ substitutions. Output follows
 * c++filt ("kernel(float const*, int)"). Writes a NUL-terminated string to out and returns 0;
 * returns -1 (out untouched beyond out[0] = '\0') for anything else -- templates, operators,
 * constructors, function pointers, std:: abbreviations, a name that is not mangled -- so the
 * caller keeps the mangled name. Never allocates. */
int fp_demangle(const char *mangled, char *out, size_t outlen);

/* Demangles any Itanium name, templates included, with the C++ runtime's __cxa_demangle when
 * the process has one (every CUDA C++ program and PyTorch load libstdc++; it is looked up, never
 * loaded), else with fp_demangle. Same contract as fp_demangle: 0 and out set (c++filt's
 * spelling), or -1 (out[0] = '\0') when the name is not mangled, does not demangle, or does not
 * fit in outlen. Allocates (inside __cxa_demangle): for the send path, not the record path.
 * Thread-safe. */
int fp_demangle_full(const char *mangled, char *out, size_t outlen);

#endif
