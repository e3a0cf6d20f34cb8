/* The public headers must compile as strict C99 (built with -Wall -Wextra -Werror -pedantic). */
#include "cacheblend.h"
#include "cacheblend_experimental.h"

int main(void) {
    cbl_model_params p;
    cbl_x_blend_params x;
    cbl_model_params_init(&p);
    cbl_x_blend_params_init(&x);
    return cbl_version_number() == CBL_VERSION_NUMBER && p.struct_size == sizeof(p) &&
                   x.struct_size == sizeof(x)
               ? 0
               : 1;
}
