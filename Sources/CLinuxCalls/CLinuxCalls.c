// The declarations are static inline functions in include/CLinuxCalls.h; SwiftPM needs a source
// file to make a C target.
#include "CLinuxCalls.h"
