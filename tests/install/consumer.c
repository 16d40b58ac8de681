/* consumer.c — a program built against an installed meld only (tests/check_install.sh: the
 * header and library from `make install`, flags from pkg-config): the version it compiled
 * against equals the library's, an error has its name and a sentence, and a bad argument is
 * refused with one (no GPU needed). Exit 0 on success. */
#include <stdio.h>
#include <string.h>

#include <meld.h>

int main(void) {
  int bad = 0;
  if (meld_version() != MELD_VERSION_CODE) {
    printf("version: header %d, library %d\n", MELD_VERSION_CODE, meld_version());
    bad = 1;
  }
  if (!strstr(meld_strerror(MELD_ERR_TIMEOUT), "MELD_ERR_TIMEOUT")) {
    printf("meld_strerror: \"%s\"\n", meld_strerror(MELD_ERR_TIMEOUT));
    bad = 1;
  }
  meld_comm_t comm = NULL;
  meld_unique_id id;
  memset(&id, 0, sizeof id);
  const meld_result_t r = meld_comm_init(&comm, 0, id, 0, NULL);
  if (r != MELD_ERR_INVALID_ARG || !strstr(meld_last_error(), "nranks")) {
    printf("meld_comm_init(nranks 0): %d \"%s\"\n", (int)r, meld_last_error());
    bad = 1;
  }
  printf("%s: meld %d.%d.%d as installed\n", bad ? "FAILED" : "ok", MELD_VERSION_MAJOR, MELD_VERSION_MINOR,
         MELD_VERSION_PATCH);
  return bad;
}
