/* x86-64 prebuilds only: hack/prebuild/deps.sh renames libnftnl.a's references to `stderr` (read
 * PC-relative by code built as PIE, which a shared object cannot resolve against libc) to this
 * variable, which takes libc's stderr when the addon loads. */
#include <stdio.h>

FILE *kpng_nftnl_stderr;

__attribute__((constructor)) static void kpng_nftnl_stderr_init(void) { kpng_nftnl_stderr = stderr; }
