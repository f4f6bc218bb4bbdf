/* vec.c: vec_reserve_ (vec.h). */
#include "lib/vec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"

int vec_reserve_(void *arrp, size_t *cap, size_t need, size_t elem, size_t first) {
    void *arr;
    memcpy(&arr, arrp, sizeof arr); /* the caller's pointer, of its own type: read as bytes */
    size_t n = *cap ? *cap : (first ? first : 1);
    while (n < need) {
        if (n > SIZE_MAX / 2) return ERR_NOMEM;
        n *= 2;
    }
    if (n > SIZE_MAX / elem) return ERR_NOMEM;
    void *p = realloc(arr, n * elem);
    if (!p) return ERR_NOMEM;
    memset((char *)p + *cap * elem, 0, (n - *cap) * elem);
    memcpy(arrp, &p, sizeof p);
    *cap = n;
    return 0;
}
