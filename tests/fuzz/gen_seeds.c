/* Description: writes the seed corpus of fuzz_trace (seeds.h) into DIR.
 * Usage: gen_seeds DIR */
#include <stdio.h>

#include "seeds.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gen_seeds DIR\n");
    return 2;
  }
  write_seeds(argv[1]);
  return 0;
}
