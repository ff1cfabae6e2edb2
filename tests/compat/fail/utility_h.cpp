// expect: utility\.h.*(No such file|not found)
// MIGRATION.md M11: the original's utility.h (getBitmask, getSetBitsCount, getShiftBitsCount,
// ERROR_MSG) is not provided.
#include "utility.h"

int main() { return 0; }
