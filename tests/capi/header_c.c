/* The public header must compile as strict C99 (built with -Wall -Wextra -Werror -pedantic). */
#include "cacheblend.h"

int main(void) {
    cbl_model_params p;
    cbl_model_params_init(&p);
    return cbl_version_number() == CBL_VERSION_NUMBER && p.struct_size == sizeof(p) ? 0 : 1;
}
