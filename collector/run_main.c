/* run_main.c -- firstpass-run: starts a program with the collector injected.
 *
 * Owns the launcher's arguments and the two variables it sets before exec:
 * CUDA_INJECTION64_PATH (the collector) and NVTX_INJECTION64_PATH (the libcupti the collector
 * resolves to in this environment). NVTX3 reads NVTX_INJECTION64_PATH once, at the program's
 * first NVTX call, and it must name the same libcupti the collector records through, so it
 * has to be in the environment before the program starts: the collector itself must not
 * setenv (other threads may be in getenv by the time the driver loads it). The libcupti is
 * found by loading the collector here with dlopen, the way the program's dynamic linker will
 * (same LD_LIBRARY_PATH, same RUNPATH). Must not link CUPTI or the collector. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LIB_NAME "libfirstpass-cupti.so"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: firstpass-run [--lib PATH] [--] PROGRAM [ARG]...\n"
            "\n"
            "Runs PROGRAM with the firstpass collector: sets CUDA_INJECTION64_PATH to the\n"
            "collector library and NVTX_INJECTION64_PATH to the libcupti it uses (so NVTX\n"
            "ranges are recorded), then execs PROGRAM. Everything else (FIRSTPASS_SERVER,\n"
            "FIRSTPASS_* settings) comes from the environment; see docs/collector.md.\n"
            "\n"
            "  --lib PATH   the collector (default $FIRSTPASS_LIB, else " LIB_NAME "\n"
            "               next to this program, else ../lib/" LIB_NAME ")\n"
            "  --help       this text\n"
            "\n"
            "FIRSTPASS_NVTX=0 leaves NVTX_INJECTION64_PATH alone. An NVTX_INJECTION64_PATH\n"
            "already set is kept (with a note when it names another library).\n"
            "Exit status: PROGRAM's; 2 on a usage error; 1 when the collector cannot be\n"
            "found or loaded; 127 when PROGRAM cannot be run.\n");
}

/* The collector: --lib, $FIRSTPASS_LIB, or beside / ../lib of this executable. Resolved
 * with realpath into out. 0, or -1 with a message printed. */
static int find_lib(const char *opt, char *out)
{
    char exe[PATH_MAX], cand[PATH_MAX + 64];
    const char *env = getenv("FIRSTPASS_LIB");
    ssize_t n;
    char *slash;
    if (opt == NULL && env && env[0])
        opt = env;
    if (opt) {
        if (realpath(opt, out) == NULL) {
            fprintf(stderr, "firstpass-run: %s: not found\n", opt);
            return -1;
        }
        return 0;
    }
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "firstpass-run: cannot find myself; give --lib PATH\n");
        return -1;
    }
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(cand, sizeof cand, "%s/" LIB_NAME, exe);
    if (realpath(cand, out) != NULL)
        return 0;
    snprintf(cand, sizeof cand, "%s/../lib/" LIB_NAME, exe);
    if (realpath(cand, out) != NULL)
        return 0;
    fprintf(stderr, "firstpass-run: no %s beside %s or in %s/../lib; give --lib PATH\n",
            LIB_NAME, exe, exe);
    return -1;
}

/* The libcupti the collector loads here, resolved with realpath into out. 0 or -1. */
static int find_cupti(const char *lib, char *out)
{
    void *h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
    void *sym;
    Dl_info info;
    if (h == NULL) {
        fprintf(stderr, "firstpass-run: cannot load %s: %s\n", lib, dlerror());
        return -1;
    }
    /* dlsym on the collector's handle searches its dependencies: the symbol is libcupti's. */
    sym = dlsym(h, "cuptiGetVersion");
    if (sym == NULL || dladdr(sym, &info) == 0 || info.dli_fname == NULL ||
        realpath(info.dli_fname, out) == NULL) {
        fprintf(stderr, "firstpass-run: cannot tell which libcupti %s uses\n", lib);
        return -1;
    }
    return 0; /* not dlclose'd: libcupti must not be unloaded (docs/collector.md) */
}

int main(int argc, char **argv)
{
    const char *opt_lib = NULL, *nvtx_off = getenv("FIRSTPASS_NVTX"), *have;
    char lib[PATH_MAX], cupti[PATH_MAX], cur[PATH_MAX];
    int i = 1;

    while (i < argc && argv[i][0] == '-') {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--lib") == 0 && i + 1 < argc) {
            opt_lib = argv[i + 1];
            i += 2;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    if (find_lib(opt_lib, lib) != 0)
        return 1;
    if (!(nvtx_off && strcmp(nvtx_off, "0") == 0)) {
        if (find_cupti(lib, cupti) != 0)
            return 1;
        have = getenv("NVTX_INJECTION64_PATH");
        if (have == NULL || have[0] == '\0') {
            if (setenv("NVTX_INJECTION64_PATH", cupti, 1) != 0) {
                perror("firstpass-run: setenv");
                return 1;
            }
        } else if (realpath(have, cur) == NULL || strcmp(cur, cupti) != 0) {
            fprintf(stderr,
                    "firstpass-run: keeping NVTX_INJECTION64_PATH=%s; the collector uses %s, so "
                    "NVTX ranges will not be recorded\n",
                    have, cupti);
        }
    }
    if (setenv("CUDA_INJECTION64_PATH", lib, 1) != 0) {
        perror("firstpass-run: setenv");
        return 1;
    }
    execvp(argv[i], argv + i);
    fprintf(stderr, "firstpass-run: cannot run %s: ", argv[i]);
    perror(NULL);
    return 127;
}
