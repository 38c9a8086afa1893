/* backend.c - choosing a compute backend by name (strata/backend.h): the one
 * list of the backends there are. */
#include <string.h>

#include "strata/backend.h"

const compute_backend *compute_backend_named(const char *name) {
    const compute_backend *all[] = {compute_backend_cpu(), compute_backend_check()};
    for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(all[i]->name, name)) return all[i];
    return NULL;
}
