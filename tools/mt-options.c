/* mt-options: prints the MT_* options table as Markdown (the README's table
 * is this output; tests/readme_options.sh checks that they agree). */
#include <unistd.h>

#include "internal.h"

int main(void) {
  _mt_options_markdown(STDOUT_FILENO);
  return 0;
}
